//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"

	"sink/config"
	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// eoTable creates a plain MergeTree target with a deduplication window.
func eoTable(t *testing.T, ch driver.Conn, table string) {
	t.Helper()
	ddl := `CREATE TABLE ` + table + ` (id UInt64, user_id UInt32, ts DateTime, event_type String,
		cost Decimal(18, 4), payload String, _topic LowCardinality(String), _partition Int32, _offset Int64,
		INDEX off _offset TYPE minmax GRANULARITY 1)
		ENGINE = MergeTree PARTITION BY user_id % 4 ORDER BY (_topic, _partition, _offset)
		SETTINGS non_replicated_deduplication_window = 1000`
	if err := ch.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
}

func eoConfig(t *testing.T, s testenv.Server, group, topic, db, table string) *config.Config {
	return newConfig(t, fmt.Sprintf(`
name: %s
delivery: exactly_once
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 3000, max_wait: 1s}
routes: [{topic: %q, table: %s}]
http: {listen: ""}
`, group, testenv.Kafka(t)[0], topic, s.Addr, db, topic, table))
}

// exact checks count() = want and that no (topic, partition, offset) is
// there twice, without FINAL.
func exact(t *testing.T, ch driver.Conn, table string, want uint64) {
	t.Helper()
	var rows, distinct uint64
	if err := ch.QueryRow(context.Background(), "SELECT count(), uniqExact(_topic, _partition, _offset) FROM "+table).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != want || distinct != rows {
		t.Fatalf("%s: count() %d, uniqExact(_topic, _partition, _offset) %d; want both %d", table, rows, distinct, want)
	}
}

// rewind commits partition 0 of topic back by n offsets the way
// kafka-consumer-groups --reset-offsets does: a plain commit, no metadata.
func rewind(t *testing.T, group, topic string, n int64) {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := got.Lookup(topic, 0)
	if !ok || o.At < n {
		t.Fatalf("partition 0 committed at %v (%v); cannot rewind %d", o.At, ok, n)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: o.At - n, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestExactlyOnceRewindOn26: exactly-once into a plain MergeTree table; an
// operator rewind of partition 0 inserts nothing again while the rows are
// there, and after TRUNCATE the same rewind loads them once.
func TestExactlyOnceRewindOn26(t *testing.T) {
	s := testenv.Server26(t)
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 4)
	const n = 60_000
	produceEvents(t, topic, n)
	table := db + ".events"
	eoTable(t, ch, table)
	group := testenv.UniqueName(t, "eo")
	cfg := eoConfig(t, s, group, topic, db, "events")

	m := metrics.New(group)
	st := runUntilWith(t, cfg, ch, table, n, nil, pipeline.WithMetrics(m))
	exact(t, ch, table, n)
	t.Logf("first load: %d rows in %d inserts", st.Rows, st.Inserts)
	// Nothing is pending after the clean stop: the whole window is left.
	if got := gauge(t, m, "sink_eos_dedup_window_margin"); got != 1000 {
		t.Fatalf("sink_eos_dedup_window_margin = %v after a clean stop, want the window, 1000", got)
	}

	const back = 10_000
	rewind(t, group, topic, back)
	// Give the rewound records time to be consumed: the run stops once the
	// partition's committed offset is back at its end.
	st = runWhile(t, cfg, time.Minute, committedAtEnd(t, group, topic, n/4))
	exact(t, ch, table, n)
	if st.Skipped < back || st.Rows != 0 {
		t.Fatalf("after the rewind: %d rows inserted, %d records skipped; want 0 and at least %d", st.Rows, st.Skipped, back)
	}
	t.Logf("rewind of %d offsets on partition 0 with the rows present: %d rows inserted, %d records skipped", back, st.Rows, st.Skipped)

	if err := ch.Exec(context.Background(), "TRUNCATE TABLE "+table); err != nil {
		t.Fatal(err)
	}
	rewind(t, group, topic, back)
	st = runUntil(t, cfg, ch, table, back)
	exact(t, ch, table, back)
	t.Logf("after TRUNCATE and the same rewind: %d rows inserted", st.Rows)
}

// committedAtEnd is a runWhile condition: partition 0 of topic is
// committed at end.
func committedAtEnd(t *testing.T, group, topic string, end int64) func(*writer.Writer) (bool, string) {
	adm := kadm.NewClient(testenv.KafkaClient(t))
	return func(*writer.Writer) (bool, string) {
		got, err := adm.FetchOffsets(context.Background(), group)
		if err != nil {
			return false, err.Error()
		}
		o, _ := got.Lookup(topic, 0)
		return o.At >= end, fmt.Sprintf("partition 0 committed at %d, want %d", o.At, end)
	}
}

// TestExactlyOnceRecreatedTopicOn26: a topic deleted and recreated under
// the same name under an exactly-once connector. Kafka drops the group's
// offsets (and so the ledgers) with the topic, and the table still holds
// the old topic's rows at the offsets the new records take: before, those
// new records were skipped as present. Now the connector stops at the
// assignment with one line naming the fix, whichever proof it has: a row
// at an offset the new topic has not reached, or (when the group still
// holds a ledger of the old topic, as right after a quick recreation) the
// topic ID recorded with the ledger. After the fix it names, the new topic
// loads once.
func TestExactlyOnceRecreatedTopicOn26(t *testing.T) {
	s := testenv.Server26(t)
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	const old, fresh, more = 5_000, 3_000, 5_000
	produceEvents(t, topic, old)
	table := db + ".events"
	eoTable(t, ch, table)
	group := testenv.UniqueName(t, "eo")
	cfg := eoConfig(t, s, group, topic, db, "events")
	runUntil(t, cfg, ch, table, old)
	exact(t, ch, table, old)

	adm := kadm.NewClient(testenv.KafkaClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	oldCommit, ok := got.Lookup(topic, 0)
	if !ok || !strings.Contains(oldCommit.Metadata, " t") {
		t.Fatalf("committed %+v: want a ledger with the topic ID", oldCommit)
	}
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	for { // Kafka removes the group's offsets of the deleted topic
		got, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Lookup(topic, 0); !ok {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for { // the delete completes asynchronously; create again until it takes
		_, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("recreating %s: %v", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	produceEvents(t, topic, fresh)

	stopsWith := func(want string) {
		t.Helper()
		done, stop := startPipeline(t, cfg)
		defer stop()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatal("the connector did not stop on the recreated topic")
		}
		t.Logf("stopped with: %v", err)
		if err == nil || !strings.Contains(err.Error(), "was deleted and recreated") || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), table+" holds the old topic's rows") ||
			!strings.Contains(err.Error(), "docs/guarantees.md#topic-deleted-and-recreated") ||
			strings.Contains(err.Error(), "\n") {
			t.Fatalf("Run: %v; want one line saying the topic was recreated (%s) and naming the fix", err, want)
		}
		exact(t, ch, table, old) // nothing of the new topic skipped into the old rows, nothing inserted
	}
	// The table holds offsets up to 4999; the new topic ends at 3000.
	stopsWith("the table holds a row of offset 4999, and the partition's log ends at 3000")

	// The new topic grows past the old rows, and the group still holds the
	// old topic's ledger (a recreation quicker than Kafka's cleanup): only
	// the topic ID tells.
	produceEvents(t, topic, more)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: oldCommit.At, LeaderEpoch: -1, Metadata: oldCommit.Metadata})
	// A new client: this one knows the deleted topic's ID.
	if resp, err := kadm.NewClient(testenv.KafkaClient(t)).CommitOffsets(ctx, group, os); err != nil || resp.Error() != nil {
		t.Fatalf("committing the old ledger back: %v %v", err, resp.Error())
	}
	stopsWith("the group's ledger was written for topic ID")

	// The fix the line names: delete the old rows, make the table forget
	// the old batches' tokens (the new topic's batches over the same
	// offsets would have the same tokens), reset the group to the earliest.
	for _, q := range []string{
		"ALTER TABLE " + table + " DELETE WHERE _topic = '" + topic + "' SETTINGS mutations_sync = 2",
		"ALTER TABLE " + table + " MODIFY SETTING non_replicated_deduplication_window = 0",
		"ALTER TABLE " + table + " MODIFY SETTING non_replicated_deduplication_window = 1000",
	} {
		if err := ch.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	rewind(t, group, topic, oldCommit.At) // kafka-consumer-groups --reset-offsets --to-earliest
	st := runUntil(t, cfg, ch, table, fresh+more)
	exact(t, ch, table, fresh+more)
	t.Logf("after the fix: %d rows inserted", st.Rows)
}

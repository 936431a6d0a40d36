//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/consumer"
	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
)

// The source of the dead-letter tests: ids 0..6 on one partition, offset 3
// not JSON (the record has no key).
var reproValues = []string{`{"id":0}`, `{"id":1}`, `{"id":2}`, `not json`, `{"id":4}`, `{"id":5}`, `{"id":6}`}

func dlqConfig(t *testing.T, s testenv.Server, topic, db, dlqTopic, extra string) *config.Config {
	return newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 300ms}
batch: {max_rows: 100, max_wait: 200ms}
routes: [{topic: %q, table: repro}]
errors: {tolerance: all, dlq_topic: %q%s}
shutdown_timeout: 3s
http: {listen: ""}
`, testenv.UniqueName(t, "dlq"), testenv.Kafka(t)[0], topic, s.Addr, db, topic, dlqTopic, extra))
}

// reproSetup creates the table repro (id UInt64) in a new database of s and
// a one-partition source topic.
func reproSetup(t *testing.T, s testenv.Server) (driver.Conn, string, string) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	if err := ch.Exec(context.Background(), "CREATE TABLE "+db+".repro (id UInt64) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	return ch, db, testenv.NewTopic(t, 1)
}

// ids returns the table's ids in order, duplicates included.
func ids(t *testing.T, ch driver.Conn, table string) []uint64 {
	t.Helper()
	rows, err := ch.Query(context.Background(), "SELECT id FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// dlqRecords reads every record of topic.
func dlqRecords(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	cl := testenv.KafkaClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxPartitionBytes(8<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for int64(len(out)) < want {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), want, topic)
		}
		f.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// runUntilCommitted runs the connector until its group committed want on
// partition 0 of topic, then stops it like SIGTERM; Run must end cleanly.
func runUntilCommitted(t *testing.T, cfg *config.Config, topic string, want int64) {
	t.Helper()
	done, stop := startPipeline(t, cfg)
	deadline := time.Now().Add(time.Minute)
	for committed(t, cfg.Kafka.Group, topic, 0) < want {
		select {
		case err := <-done:
			t.Fatalf("connector stopped before committing %d: %v", want, err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset %d not committed after a minute (at %d)", want, committed(t, cfg.Kafka.Group, topic, 0))
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("clean stop: %v", err)
	}
}

// The repro: tolerance all with a dead-letter topic that does not
// exist. Three starts fail at once, before consuming anything (no rows, no
// commit); once the topic exists the run dead-letters the bad record,
// inserts each id once and commits past the bad record; a fourth start
// replays nothing. With errors.dlq_create the first start creates the topic.
func TestDLQMissingTopicStopsAtStartThenCommitsPastBadRecord(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := reproSetup(t, s)
		ctx := context.Background()
		produceValues(t, topic, reproValues...)
		dlq := testenv.UniqueName(t, "missing_dlq")
		cfg := dlqConfig(t, s, topic, db, dlq, "")
		for run := 1; run <= 3; run++ {
			_, err := consumer.New(ctx, cfg, zerolog.Nop(), consumer.Hooks{})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("dead-letter topic %q (errors.dlq_topic) does not exist", dlq)) {
				t.Fatalf("start %d: %v; want the missing dead-letter topic named", run, err)
			}
			if got := ids(t, ch, db+".repro"); len(got) != 0 {
				t.Fatalf("start %d: rows %v; want none", run, got)
			}
			if c := committed(t, cfg.Kafka.Group, topic, 0); c != 0 {
				t.Fatalf("start %d: committed %d; want nothing", run, c)
			}
		}
		createTopic(t, dlq, 1)
		for run := 4; run <= 5; run++ {
			runUntilCommitted(t, cfg, topic, 7)
			if got := ids(t, ch, db+".repro"); !slices.Equal(got, []uint64{0, 1, 2, 4, 5, 6}) {
				t.Fatalf("run %d: rows %v; want each of 0,1,2,4,5,6 once", run, got)
			}
		}
		recs := dlqRecords(t, dlq)
		if len(recs) != 1 || string(recs[0].Value) != "not json" {
			t.Fatalf("dead-letter topic holds %d records; want the one bad record", len(recs))
		}
		if off, _ := header(recs[0], "sink.source.offset"); off != "3" {
			t.Fatalf("dead letter's sink.source.offset = %q; want 3", off)
		}

		// errors.dlq_create: the missing topic is created at start, with
		// the source's partition count.
		created := testenv.UniqueName(t, "created_dlq")
		cfg = dlqConfig(t, s, topic, db, created, ", dlq_create: true")
		info := probeDLQ(t, cfg)
		if !info.Created || info.Partitions != 1 {
			t.Fatalf("dlq_create: %+v; want created with 1 partition", info)
		}
		deleteTopicLater(t, created)
	})
}

func probeDLQ(t *testing.T, cfg *config.Config) *consumer.DLQInfo {
	t.Helper()
	_, info, err := consumer.ProbeDLQ(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func deleteTopicLater(t *testing.T, topic string) {
	adm := kadm.NewClient(testenv.KafkaClient(t))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopic(ctx, topic)
	})
}

// A dead-letter produce that fails for good (a compacted DLQ topic refuses
// a record without a key: INVALID_RECORD) stops the connector, and nothing
// after the bad record in its partition is inserted: across three restarts
// the table holds each id before the bad record once and none after it, and
// the committed offset stays at the bad record. Once the DLQ takes the
// record, the run commits past it with every id exactly once.
func TestDLQPermanentFailureInsertsNothingPastTheRecord(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := reproSetup(t, s)
		ctx := context.Background()
		compacted := testenv.UniqueName(t, "compacted_dlq")
		adm := kadm.NewClient(testenv.KafkaClient(t))
		policy := "compact"
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &policy}, compacted); err != nil {
			t.Fatal(err)
		}
		deleteTopicLater(t, compacted)
		testenv.WaitTopic(t, compacted, 1)
		cfg := dlqConfig(t, s, topic, db, compacted, "")

		// Run 1 commits the ids before the bad record, then meets it.
		produceValues(t, topic, reproValues[:3]...)
		done, _ := startPipeline(t, cfg)
		for deadline := time.Now().Add(time.Minute); committed(t, cfg.Kafka.Group, topic, 0) < 3; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("ids 0..2 not committed")
			}
		}
		produceValues(t, topic, reproValues[3:]...)
		for run := 1; run <= 3; run++ {
			if run > 1 {
				done, _ = startPipeline(t, cfg)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("run %d did not stop on the failed dead-letter produce", run)
			}
			if err == nil || !strings.Contains(err.Error(), "offset 3") || !strings.Contains(err.Error(), "INVALID_RECORD") {
				t.Fatalf("run %d: Run error %v; want the failed dead-letter produce of offset 3", run, err)
			}
			if got := ids(t, ch, db+".repro"); !slices.Equal(got, []uint64{0, 1, 2}) {
				t.Fatalf("run %d: rows %v; want 0,1,2 once each and nothing after the bad record", run, got)
			}
			if c := committed(t, cfg.Kafka.Group, topic, 0); c != 3 {
				t.Fatalf("run %d: committed %d; want 3 (the bad record)", run, c)
			}
		}

		// The fix: a dead-letter topic that takes keyless records.
		fixed := testenv.UniqueName(t, "fixed_dlq")
		createTopic(t, fixed, 1)
		cfg.Errors.DLQTopic = fixed
		runUntilCommitted(t, cfg, topic, 7)
		if got := ids(t, ch, db+".repro"); !slices.Equal(got, []uint64{0, 1, 2, 4, 5, 6}) {
			t.Fatalf("after the fix: rows %v; want each of 0,1,2,4,5,6 once", got)
		}
		if recs := dlqRecords(t, fixed); len(recs) != 1 {
			t.Fatalf("fixed dead-letter topic holds %d records; want 1", len(recs))
		}
	})
}

// A dead-letter topic that disappears while the sink runs makes the produce
// fail with a retriable error: it is retried with backoff, nothing after the
// bad record is inserted meanwhile, and SIGTERM ends the run with one line
// saying what it was stuck on and what was committed. Once the topic is
// back, the next run commits past the bad record with each id once.
// Parallel with the package's other parallel tests: its topics, tables and
// group are its own, and its pause only lets retries happen.
func TestDLQRetriedWhileTopicIsGone(t *testing.T) {
	t.Parallel()
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := reproSetup(t, s)
		ctx := context.Background()
		dlq := testenv.UniqueName(t, "vanishing_dlq")
		createTopic(t, dlq, 1)
		cfg := dlqConfig(t, s, topic, db, dlq, "")

		produceValues(t, topic, reproValues[:3]...)
		done, stop := startPipeline(t, cfg)
		for deadline := time.Now().Add(time.Minute); committed(t, cfg.Kafka.Group, topic, 0) < 3; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("ids 0..2 not committed")
			}
		}
		adm := kadm.NewClient(testenv.KafkaClient(t))
		if _, err := adm.DeleteTopic(ctx, dlq); err != nil {
			t.Fatal(err)
		}
		produceValues(t, topic, reproValues[3:]...)
		time.Sleep(5 * time.Second) // several retries of the produce
		if got := ids(t, ch, db+".repro"); !slices.Equal(got, []uint64{0, 1, 2}) {
			t.Fatalf("rows %v while the DLQ is gone; want nothing after the bad record", got)
		}
		stop()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatal("SIGTERM did not end the run")
		}
		t.Logf("Run ended with: %v", err)
		if err == nil || !strings.Contains(err.Error(), "stuck on the dead-letter produce of "+topic+"[0] offset 3") ||
			!strings.Contains(err.Error(), "committed "+topic+"[0] up to offset 3") {
			t.Fatalf("Run error %v; want it stuck on offset 3 with 3 committed", err)
		}
		if c := committed(t, cfg.Kafka.Group, topic, 0); c != 3 {
			t.Fatalf("committed %d; want 3", c)
		}

		createTopic(t, dlq, 1)
		runUntilCommitted(t, cfg, topic, 7)
		if got := ids(t, ch, db+".repro"); !slices.Equal(got, []uint64{0, 1, 2, 4, 5, 6}) {
			t.Fatalf("after the topic came back: rows %v; want each of 0,1,2,4,5,6 once", got)
		}
	})
}

// A malformed record of almost 1 MB fits the source topic, but its
// dead-letter copy with the error headers would not fit a DLQ topic with
// the default max.message.bytes. The copy is cut to fit, with a header
// giving the original length, and the connector goes on: every good id
// once, the offset committed past the record.
func TestDLQCopyOfLargeRecordIsTruncated(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := reproSetup(t, s)
		ctx := context.Background()
		dlq := testenv.UniqueName(t, "small_dlq")
		createTopic(t, dlq, 1)
		info := probeDLQ(t, dlqConfig(t, s, topic, db, dlq, ""))
		big := `{"id": 3, "payload": "` + strings.Repeat("x", info.MaxMessageBytes-200) // malformed: never closed
		cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(int32(info.MaxMessageBytes)))
		var recs []*kgo.Record
		for i, v := range reproValues {
			if i == 3 {
				v = big
			}
			recs = append(recs, &kgo.Record{Value: []byte(v), Partition: 0})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce the large record to the source: %v", err)
		}
		cfg := dlqConfig(t, s, topic, db, dlq, "")
		runUntilCommitted(t, cfg, topic, 7)
		if got := ids(t, ch, db+".repro"); !slices.Equal(got, []uint64{0, 1, 2, 4, 5, 6}) {
			t.Fatalf("rows %v; want each of 0,1,2,4,5,6 once", got)
		}
		dead := dlqRecords(t, dlq)
		if len(dead) != 1 {
			t.Fatalf("dead-letter topic holds %d records; want 1", len(dead))
		}
		orig, ok := header(dead[0], consumer.HeaderValueTruncated)
		if !ok || orig != strconv.Itoa(len(big)) {
			t.Fatalf("header %s = %q; want the original length %d", consumer.HeaderValueTruncated, orig, len(big))
		}
		if n := len(dead[0].Value); n >= len(big) || n < len(big)-4096 || string(dead[0].Value) != big[:n] {
			t.Fatalf("dead-letter value has %d bytes; want the first bytes of the %d-byte original, cut just enough to fit", n, len(big))
		}
		if off, _ := header(dead[0], "sink.source.offset"); off != "3" {
			t.Fatalf("sink.source.offset = %q; want 3", off)
		}
	})
}

// While a dead-letter produce is being retried, the batches after the bad
// record wait in memory; once they fill batch.buffer_memory, fetching
// pauses (sink_fetch_paused 1) as in a ClickHouse outage, and nothing after
// the bad record is inserted.
func TestDLQOutagePausesFetchingAtTheBudget(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := reproSetup(t, s)
		ctx := context.Background()
		if err := ch.Exec(ctx, "ALTER TABLE "+db+".repro ADD COLUMN p String"); err != nil {
			t.Fatal(err)
		}
		dlq := testenv.UniqueName(t, "gone_dlq")
		createTopic(t, dlq, 1)
		cfg := dlqConfig(t, s, topic, db, dlq, "")
		cfg.Batch.MaxRows = 200
		cfg.Batch.MaxBytes = 256 << 10
		cfg.Batch.BufferMemory = 1 << 20
		cfg.Kafka.FetchMaxBytes = 256 << 10
		cfg.Kafka.MaxPartitionFetchBytes = 256 << 10
		m := metrics.New(cfg.Kafka.Group)
		done, stop := startPipelineWith(t, cfg, pipeline.WithMetrics(m))
		adm := kadm.NewClient(testenv.KafkaClient(t))
		if _, err := adm.DeleteTopic(ctx, dlq); err != nil {
			t.Fatal(err)
		}
		pad := strings.Repeat("p", 1000)
		values := []string{`not json`}
		for i := 1; i <= 5000; i++ {
			values = append(values, fmt.Sprintf(`{"id": %d, "p": "%d%s"}`, i, i, pad)) // distinct: equal strings share memory
		}
		produceValues(t, topic, values...)
		deadline := time.Now().Add(time.Minute)
		for gauge(t, m, metrics.FetchPaused) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("fetching did not pause; buffer %v of %v bytes", gauge(t, m, metrics.BufferBytes), gauge(t, m, metrics.BufferLimit))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if n := countRows(t, ch, db+".repro"); n != 0 {
			t.Fatalf("%d rows inserted after the bad record while the DLQ is gone", n)
		}
		createTopic(t, dlq, 1)
		for committed(t, cfg.Kafka.Group, topic, 0) < 5001 {
			if time.Now().After(deadline.Add(time.Minute)) {
				t.Fatalf("not caught up after the DLQ came back (committed %d)", committed(t, cfg.Kafka.Group, topic, 0))
			}
			time.Sleep(100 * time.Millisecond)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := uint64Of(t, ch, "SELECT uniqExact(id) FROM "+db+".repro"); n != 5000 || countRows(t, ch, db+".repro") != 5000 {
			t.Fatalf("%d distinct ids; want each of the 5000 once", n)
		}
	})
}

// gauge reads an unlabelled gauge from m.
func gauge(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

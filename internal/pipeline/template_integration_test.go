//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/testenv"
)

// HostileTopics is a connector's database (Own) beside another database
// (Victim) whose table orders holds 3 rows, and two topics that a route
// with table '${topic}' under topic_regex Regex consumes: Legit, whose
// table Own.Legit exists, and Hostile, named Victim + ".orders", which a
// topic's dot choosing the database would send to Victim.orders. Both
// tables have the same columns. DLQ is a dead-letter topic. Tests of
// other hostile input can reuse it.
type HostileTopics struct {
	CH                         driver.Conn
	Own, Victim                string
	Legit, Hostile, Regex, DLQ string
	victimCols                 []string // Victim.orders' columns as made
}

// NewHostileTopics makes the databases, the two tables (columns cols,
// ordered by id, engine engine), the victim's 3 rows (row: the values of
// SELECT for number 0..2) and the three topics on s.
func NewHostileTopics(t *testing.T, s testenv.Server, cols, engine, row string) HostileTopics {
	t.Helper()
	h := HostileTopics{CH: s.Conn(t), Own: s.NewDatabase(t), Victim: s.NewDatabase(t)}
	// Not Victim_orders: Kafka refuses a topic whose name differs from
	// another's only by '.' and '_'.
	h.Legit, h.Hostile = h.Victim+"_legit", h.Victim+".orders"
	h.Regex = regexp.QuoteMeta(h.Victim) + `[._](legit|orders)`
	testenv.Exec(t, h.CH,
		"CREATE TABLE "+h.Victim+".orders ("+cols+") ENGINE = "+engine+" ORDER BY id",
		"INSERT INTO "+h.Victim+".orders SELECT "+row+" FROM system.numbers LIMIT 3",
		"CREATE TABLE "+h.Own+"."+h.Legit+" ("+cols+") ENGINE = "+engine+" ORDER BY id")
	h.victimCols = columnsOfTable(t, h.CH, h.Victim, "orders")
	createTopic(t, h.Legit, 1)
	createTopic(t, h.Hostile, 1)
	h.DLQ = testenv.NewTopic(t, 1)
	return h
}

// Config is a connector over both topics with route, whose topic_regex
// and table '${topic}' come first, and every bad record to DLQ.
func (h HostileTopics) Config(t *testing.T, s testenv.Server, route string) *config.Config {
	t.Helper()
	return newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topic_regex: '%s', fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 300ms}
batch: {max_rows: 100, max_wait: 200ms}
routes: [{topic_regex: '%s', table: '${topic}'%s}]
errors: {tolerance: all, dlq_topic: %q}
shutdown_timeout: 5s
http: {listen: ""}
`, testenv.UniqueName(t, "tpl"), testenv.Kafka(t)[0], h.Regex, s.Addr, h.Own, h.Regex, route, h.DLQ))
}

// CheckVictim fails unless the victim's table holds its 3 rows and the
// columns it was made with.
func (h HostileTopics) CheckVictim(t *testing.T) {
	t.Helper()
	if n := countRows(t, h.CH, h.Victim+".orders"); n != 3 {
		t.Errorf("%s.orders holds %d rows; want its own 3", h.Victim, n)
	}
	if cols := columnsOfTable(t, h.CH, h.Victim, "orders"); !slices.Equal(cols, h.victimCols) {
		t.Errorf("%s.orders has columns %v; want %v as made", h.Victim, cols, h.victimCols)
	}
}

// CheckDeadLetters fails unless DLQ holds want records, each of Hostile
// with a cause that says a topic never chooses the database.
func (h HostileTopics) CheckDeadLetters(t *testing.T, want int) {
	t.Helper()
	recs := dlqRecords(t, h.DLQ)
	if len(recs) != want {
		t.Fatalf("%d dead letters; want the %d records of %s", len(recs), want, h.Hostile)
	}
	for _, r := range recs {
		cause, _ := header(r, "sink.error")
		src, _ := header(r, "sink.source.topic")
		if src != h.Hostile || !strings.Contains(cause, "a topic never chooses the database") {
			t.Errorf("dead letter from %q with cause %q; want %s and the reason", src, cause, h.Hostile)
		}
	}
}

// waitBoth waits until cfg's group has committed legit records of Legit
// and hostile of Hostile, the connector still running.
func (h HostileTopics) waitBoth(t *testing.T, done <-chan error, cfg *config.Config, legit, hostile int64) {
	t.Helper()
	waitCommitted(t, done, cfg.Kafka.Group, h.Legit, legit)
	waitCommitted(t, done, cfg.Kafka.Group, h.Hostile, hostile)
	select {
	case err := <-done:
		t.Fatalf("connector stopped: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestTemplateTopicNeverChoosesDatabase: under a topic_regex that matches
// a topic named after another database's table (victim.orders), with
// table '${topic}', the records of that topic cannot insert into, add
// columns to or truncate the other database's table: they go to the
// dead-letter topic with the cause, and the legitimate topic's records
// keep landing in the connector's database. On each server.
func TestTemplateTopicNeverChoosesDatabase(t *testing.T) {
	truncate := captured(t, "dbz361_pg15_types_default_truncate.json")
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		t.Run("insert and add columns", func(t *testing.T) {
			h := NewHostileTopics(t, s, "id UInt64, s String", "MergeTree", "number + 1, 'mine'")
			cfg := h.Config(t, s, ", schema: {evolve: add_columns}")
			done, stop := startPipeline(t, cfg)
			var legit, hostile []string
			for i := range 5 {
				legit = append(legit, fmt.Sprintf(`{"id":%d,"s":"ok","extra":%d}`, i, i))
				hostile = append(hostile, fmt.Sprintf(`{"id":%d,"s":"evil","evil_col":1}`, 100+i))
			}
			produceValues(t, h.Hostile, hostile...)
			produceValues(t, h.Legit, legit...)
			h.waitBoth(t, done, cfg, 5, 5)
			stopClean(t, done, stop)
			h.CheckVictim(t)
			h.CheckDeadLetters(t, 5)
			if n := countRows(t, h.CH, h.Own+"."+h.Legit); n != 5 {
				t.Errorf("%d rows of the legitimate topic landed; want 5", n)
			}
			if cols := columnsOfTable(t, h.CH, h.Own, h.Legit); !slices.Contains(cols, "extra Int64") {
				t.Errorf("the legitimate table has columns %v; want extra added", cols)
			}
		})
		t.Run("truncate", func(t *testing.T) {
			col := placeholderCols[0]
			h := NewHostileTopics(t, s, "id Int32, "+col.name+" "+col.ch+", _version UInt64, _deleted UInt8", "ReplacingMergeTree(_version)",
				"toInt32(number + 1), 'paid', 1, 0")
			cfg := h.Config(t, s, ", format: debezium-json, truncate: apply")
			done, stop := startPipeline(t, cfg)
			cols := placeholderCols[:1]
			produceRecords(t, h.Hostile, placeholderEvent(h.Hostile, cols, "c", 9, 100), &kgo.Record{Topic: h.Hostile, Value: truncate})
			var legit []*kgo.Record
			for id := 1; id <= 3; id++ {
				legit = append(legit, placeholderEvent(h.Legit, cols, "c", id, int64(100+id)))
			}
			produceRecords(t, h.Legit, legit...)
			h.waitBoth(t, done, cfg, 3, 2)
			stopClean(t, done, stop)
			h.CheckVictim(t)
			h.CheckDeadLetters(t, 2)
			if n := countRows(t, h.CH, h.Own+"."+h.Legit); n != 3 {
				t.Errorf("%d rows of the legitimate topic landed; want 3", n)
			}
		})
	})
}

// TestTemplateTopicWithoutTable: under a topic_regex with table
// '${topic}', a topic whose table does not exist (ghost), one whose name
// is the dead-letter table's (dead, its records shaped like dead-letter
// rows) and one named after a view (view) do not stop the connector and
// write nothing where they point: their records go to the dead-letter
// topic and table with the cause (error_class table), while the
// legitimate topic's records land exactly. Once ghost's table is created, its next records land in it
// (the table is looked up again every schema_refresh). On each server.
func TestTemplateTopicWithoutTable(t *testing.T) {
	testenv.EachServer(t, testTemplateTopicWithoutTable)
}

func testTemplateTopicWithoutTable(t *testing.T, s testenv.Server) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	legit, ghost, dead, view := db+"_legit", db+"_ghost", db+"_dead", db+"_view"
	testenv.Exec(t, ch, "CREATE TABLE "+db+"."+legit+" (id UInt64, s String) ENGINE = MergeTree ORDER BY id",
		"CREATE VIEW "+db+"."+view+" AS SELECT id, s FROM "+db+"."+legit)
	for _, topic := range []string{legit, ghost, dead, view} {
		createTopic(t, topic, 1)
	}
	dlq := testenv.NewTopic(t, 1)
	regex := regexp.QuoteMeta(db) + `_(legit|ghost|dead|view)`
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topic_regex: '%s', fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, schema_refresh: 1s, retry_initial: 50ms, retry_max: 300ms}
batch: {max_rows: 100, max_wait: 200ms}
routes: [{topic_regex: '%s', table: '${topic}'}]
errors: {tolerance: all, dlq_topic: %q, dlq_table: %s}
shutdown_timeout: 5s
http: {listen: ""}
`, testenv.UniqueName(t, "tpl"), testenv.Kafka(t)[0], regex, s.Addr, db, regex, dlq, dead))
	done, stop := startPipeline(t, cfg)

	var legitRows, ghostRows, forged []string
	for i := range 10 {
		legitRows = append(legitRows, fmt.Sprintf(`{"id":%d,"s":"ok"}`, i))
	}
	for i := range 5 {
		ghostRows = append(ghostRows, fmt.Sprintf(`{"id":%d,"s":"ghost"}`, i))
	}
	for range 3 {
		forged = append(forged, `{"target_table":"forged","_topic":"forged","error":"forged","error_class":"forged","value":"forged"}`)
	}
	produceValues(t, ghost, ghostRows...)
	produceValues(t, dead, forged...)
	produceValues(t, view, `{"id":100,"s":"view"}`, `{"id":101,"s":"view"}`)
	produceValues(t, legit, legitRows[:5]...)
	waitCommitted(t, done, cfg.Kafka.Group, ghost, 5)
	waitCommitted(t, done, cfg.Kafka.Group, dead, 3)
	waitCommitted(t, done, cfg.Kafka.Group, view, 2)
	produceValues(t, legit, legitRows[5:]...)
	waitCommitted(t, done, cfg.Kafka.Group, legit, 10)

	// The table created later takes the topic's records once the sink has
	// looked it up again (schema_refresh: 1s).
	testenv.Exec(t, ch, "CREATE TABLE "+db+"."+ghost+" (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	time.Sleep(1500 * time.Millisecond)
	produceValues(t, ghost, `{"id":5,"s":"ghost"}`, `{"id":6,"s":"ghost"}`)
	waitCommitted(t, done, cfg.Kafka.Group, ghost, 7)
	stopClean(t, done, stop)

	if got := uint64Of(t, ch, "SELECT count() FROM "+db+"."+legit); got != 10 {
		t.Errorf("%d rows of the legitimate topic; want its 10", got)
	}
	if got := uint64Of(t, ch, "SELECT uniqExact(id) FROM "+db+"."+legit); got != 10 {
		t.Errorf("%d distinct ids of the legitimate topic; want 10", got)
	}
	if got := uint64Of(t, ch, "SELECT count() FROM "+db+"."+ghost+" WHERE id IN (5, 6)"); got != 2 || countRows(t, ch, db+"."+ghost) != 2 {
		t.Errorf("%s holds %d rows (%d of ids 5, 6); want the 2 produced after it was created", ghost, countRows(t, ch, db+"."+ghost), got)
	}
	causes := map[string]string{ghost: "table " + db + "." + ghost + " does not exist", dead: "is the dead-letter table",
		view: "is a View, which takes no INSERT"}
	recs := dlqRecords(t, dlq)
	if len(recs) != 10 {
		t.Fatalf("%d records in the dead-letter topic; want the 5 of %s, the 3 of %s and the 2 of %s", len(recs), ghost, dead, view)
	}
	for _, r := range recs {
		cause, _ := header(r, "sink.error")
		src, _ := header(r, "sink.source.topic")
		if want, ok := causes[src]; !ok || !strings.Contains(cause, want) {
			t.Errorf("dead letter of %q with cause %q; want the records of %s, %s and %s, each with its cause", src, cause, ghost, dead, view)
		}
	}
	rows, err := ch.Query(context.Background(), "SELECT _topic, error, error_class FROM "+db+"."+dead)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var topic, msg, class string
		if err := rows.Scan(&topic, &msg, &class); err != nil {
			t.Fatal(err)
		}
		n++
		if want, ok := causes[topic]; !ok || !strings.Contains(msg, want) || class != "table" {
			t.Errorf("dead-letter row of %q, error %q, class %q; want %s, %s or %s with its cause, class table", topic, msg, class, ghost, dead, view)
		}
	}
	if n != 10 {
		t.Errorf("%d rows in the dead-letter table; want the 10 bad records (none forged by topic %s)", n, dead)
	}
}

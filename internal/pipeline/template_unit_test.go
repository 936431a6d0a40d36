package pipeline

// Unit tests of tables named after their topic under a broad topic_regex:
// a topic's name never chooses the database. A topic whose name gives no
// table by the template is a bad record with its cause, and the other
// topics keep landing.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// describingSink records every table the pipeline reads.
type describingSink struct {
	*fakeSink
	mu        sync.Mutex
	described []string
}

func (k *describingSink) Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error) {
	k.mu.Lock()
	k.described = append(k.described, db+"."+table)
	k.mu.Unlock()
	return k.fakeSink.Describe(ctx, db, table)
}

// causeSource records the cause of every dead-letter produce.
type causeSource struct {
	*fakeSource
	mu     sync.Mutex
	causes []string
}

func (s *causeSource) ProduceDLQ(ctx context.Context, topic string, rec *kgo.Record, cause error, exhausted bool, done func(error)) {
	s.mu.Lock()
	s.causes = append(s.causes, rec.Topic+": "+cause.Error())
	s.mu.Unlock()
	s.fakeSource.ProduceDLQ(ctx, topic, rec, cause, exhausted, done)
}

// TestUnitTemplateTopicNeverChoosesDatabase: with table '${topic}' (and
// '${topic}_x') under topic_regex '.*', the records of topics prod.orders
// and a.b.c go to the dead-letter topic with the cause, no table of
// database prod (or any but db) is read or written, and the records of
// topic orders land in db.orders.
func TestUnitTemplateTopicNeverChoosesDatabase(t *testing.T) {
	for _, table := range []string{"${topic}", "${topic}_x"} {
		t.Run(table, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testUnitTemplateTopic(t, table) })
		})
	}
}

func testUnitTemplateTopic(t *testing.T, table string) {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
name: unit
kafka: {topic_regex: '[a-z.]+'}
clickhouse: {database: db}
routes: [{topic_regex: '[a-z.]+', table: '%s'}]
errors: {tolerance: all, dlq_topic: dead-letters}
`, table)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Batch.MaxRows = 2
	cfg.Batch.MaxWait = time.Hour
	cfg.Kafka.CommitInterval = 50 * time.Millisecond // as unitConfig's
	sink := &describingSink{fakeSink: newFakeSink(nil)}
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := &causeSource{fakeSource: newFakeSource()}
	r := launch(t, p, src.fakeSource, src, sink.fakeSink)
	legit := strings.ReplaceAll(table, "${topic}", "orders")
	send := func(topic string, from, n int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			off := int64(from + i)
			recs[i] = &kgo.Record{Topic: topic, Offset: off, Value: fmt.Appendf(nil, `{"id":%d,"s":"x"}`, off), Timestamp: time.Now()}
		}
		src.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{{HighWatermark: int64(from + n), Records: recs}}}}}}
	}
	send("orders", 0, 2)
	send("prod.orders", 0, 2)
	send("a.b.c", 0, 1)
	send("orders", 2, 2)
	eventually(t, 2*time.Second, "every topic committed", func() bool {
		return src.committed(tpOf("orders")) == 4 && src.committed(tpOf("prod.orders")) == 2 && src.committed(tpOf("a.b.c")) == 1
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	sink.mu.Lock()
	described := slices.Clone(sink.described)
	sink.mu.Unlock()
	if !slices.Equal(described, []string{"db." + legit}) {
		t.Errorf("tables read %q, want only db.%s", described, legit)
	}
	if n := sink.inserted("db." + legit); n != 4 {
		t.Errorf("%d rows in db.%s, want 4", n, legit)
	}
	src.mu.Lock()
	causes := slices.Clone(src.causes)
	src.mu.Unlock()
	if len(causes) != 3 {
		t.Fatalf("dead letters %q, want the 3 records of prod.orders and a.b.c", causes)
	}
	for _, c := range causes {
		if !strings.Contains(c, "a topic never chooses the database") {
			t.Errorf("dead-letter cause %q does not say why", c)
		}
	}
}

func tpOf(topic string) offsets.TP { return offsets.TP{Topic: topic} }

// tableSink is a dlqSink whose tables in missing do not exist (Describe
// answers chtable.ErrNoTable, as the writer does), whose tables in cols
// have those columns, whose tables in unfit have a column the driver
// cannot carry (chtable.UnfitError, as the writer answers), whose tables
// in engines have that engine (MergeTree otherwise), and which counts the
// Describe calls per table.
type tableSink struct {
	*dlqSink
	mu        sync.Mutex
	missing   map[string]bool
	unfit     map[string]bool
	cols      map[string][]chschema.ColumnSchema
	engines   map[string]string
	described map[string]int
}

func (k *tableSink) TableEngine(_ context.Context, db, table string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.engines[db+"."+table]; ok {
		return e, nil
	}
	return "MergeTree", nil
}

func newTableSink(dlq string, missing ...string) *tableSink {
	k := &tableSink{dlqSink: newDLQSink(dlq), missing: map[string]bool{}, unfit: map[string]bool{},
		cols: map[string][]chschema.ColumnSchema{}, engines: map[string]string{}, described: map[string]int{}}
	for _, m := range missing {
		k.missing[m] = true
	}
	return k
}

func (k *tableSink) Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error) {
	name := db + "." + table
	k.mu.Lock()
	k.described[name]++
	missing, unfit, cols := k.missing[name], k.unfit[name], k.cols[name]
	k.mu.Unlock()
	switch {
	case missing:
		return nil, fmt.Errorf("clickhouse: table %s %w", name, chtable.ErrNoTable)
	case unfit:
		return nil, &chtable.UnfitError{Err: fmt.Errorf("clickhouse: table %s: column \"a(b)\" cannot be inserted into", name)}
	case cols != nil:
		return cols, nil
	}
	return k.dlqSink.Describe(ctx, db, table)
}

// create makes table exist from now on.
func (k *tableSink) create(table string) {
	k.mu.Lock()
	delete(k.missing, table)
	k.mu.Unlock()
}

func (k *tableSink) describes(table string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.described[table]
}

// templateConfig is a connector over every topic of [a-z_.]+ with one
// route into '${topic}' of database db, its bad records going where
// errors says (a YAML flow map); schema_refresh is the re-check period
// of a missing table.
func templateConfig(t *testing.T, errors, route string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
name: unit
kafka: {topic_regex: '[a-z_.]+'}
clickhouse: {database: db, schema_refresh: 30s}
routes: [{topic_regex: '[a-z_.]+', table: '${topic}'%s}]
errors: %s
`, route, errors)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Batch.MaxRows = 2
	cfg.Batch.MaxWait = 50 * time.Millisecond
	cfg.Kafka.CommitInterval = 50 * time.Millisecond
	return cfg
}

// launchTemplate runs a connector of cfg over sink, its dead-letter
// produces recorded with their causes.
func launchTemplate(t *testing.T, cfg *config.Config, sink *tableSink) (*running, *causeSource) {
	t.Helper()
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := &causeSource{fakeSource: newFakeSource()}
	return launch(t, p, src.fakeSource, src, sink.fakeSink), src
}

// sendJSON hands n records of topic, offsets from..from+n-1, to src, as
// one fetch.
func sendJSON(src *fakeSource, topic string, from, n int) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		off := int64(from + i)
		recs[i] = &kgo.Record{Topic: topic, Offset: off, Value: fmt.Appendf(nil, `{"id":%d,"s":"x"}`, off), Timestamp: time.Now()}
	}
	src.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{{HighWatermark: int64(from + n), Records: recs}}}}}}
}

// TestUnitTemplateMissingTable: under topic_regex with table '${topic}', a
// topic whose table does not exist (ghost) does not stop the connector:
// its records go to the dead-letter topic with the cause, and its
// partition is committed past them, while the records of a topic whose
// table exists (orders) land exactly. The missing table is looked up once
// per schema_refresh, not per record; once it exists, the topic's next
// records land in it.
func TestUnitTemplateMissingTable(t *testing.T) { synctest.Test(t, testUnitTemplateMissingTable) }

func testUnitTemplateMissingTable(t *testing.T) {
	cfg := templateConfig(t, "{tolerance: all, dlq_topic: dead-letters}", "")
	sink := newTableSink("db.unused", "db.ghost")
	r, src := launchTemplate(t, cfg, sink)
	sendJSON(src.fakeSource, "orders", 0, 2)
	for i := range 5 {
		sendJSON(src.fakeSource, "ghost", 4*i, 4)
	}
	sendJSON(src.fakeSource, "orders", 2, 2)
	eventually(t, 2*time.Second, "both topics committed", func() bool {
		return src.committed(tpOf("orders")) == 4 && src.committed(tpOf("ghost")) == 20
	})
	if n := sink.describes("db.ghost"); n != 1 {
		t.Errorf("the missing table was described %d times for 20 records within schema_refresh; want once", n)
	}
	src.mu.Lock()
	causes := slices.Clone(src.causes)
	src.mu.Unlock()
	if len(causes) != 20 {
		t.Fatalf("%d dead letters, want the 20 records of ghost: %q", len(causes), causes)
	}
	for _, c := range causes {
		if !strings.HasPrefix(c, "ghost: ") || !strings.Contains(c, "table db.ghost does not exist") || !strings.Contains(c, "looked up again every 30s") {
			t.Errorf("dead letter %q does not name the missing table and what becomes of its records", c)
		}
	}

	// Created later: picked up once schema_refresh has passed.
	sink.create("db.ghost")
	sendJSON(src.fakeSource, "ghost", 20, 2) // still within the period: bad
	eventually(t, time.Second, "ghost committed to 22", func() bool { return src.committed(tpOf("ghost")) == 22 })
	time.Sleep(cfg.ClickHouse.SchemaRefresh)
	sendJSON(src.fakeSource, "ghost", 22, 2)
	eventually(t, 2*time.Second, "ghost's records after the table was created landed", func() bool {
		return sink.inserted("db.ghost") == 2 && src.committed(tpOf("ghost")) == 24
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sortedIDs(sink.insertedIDs("db.orders")); !slices.Equal(got, []uint64{0, 1, 2, 3}) {
		t.Errorf("orders landed ids %v, want 0..3 once each (in any order: batches go in concurrently)", got)
	}
	if got := sortedIDs(sink.insertedIDs("db.ghost")); !slices.Equal(got, []uint64{22, 23}) {
		t.Errorf("ghost landed ids %v, want 22, 23 (those consumed after the table was created and re-checked)", got)
	}
	if n := sink.describes("db.ghost"); n != 2 {
		t.Errorf("the table was described %d times; want twice (missing, then once more after schema_refresh)", n)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.causes) != 22 {
		t.Errorf("%d dead letters; want 22 (ghost's records before the re-check)", len(src.causes))
	}
}

// TestUnitTemplateMissingTableStops: with errors.tolerance none, a
// topic whose table is missing stops the connector before its first
// record, saying which table and why; nothing of it is committed.
func TestUnitTemplateMissingTableStops(t *testing.T) {
	synctest.Test(t, testUnitTemplateMissingTableStops)
}

func testUnitTemplateMissingTableStops(t *testing.T) {
	cfg := templateConfig(t, "{tolerance: none}", "")
	sink := newTableSink("db.unused", "db.ghost")
	r, cs := launchTemplate(t, cfg, sink)
	src := cs.fakeSource
	sendJSON(src, "orders", 0, 2)
	eventually(t, time.Second, "orders committed", func() bool { return src.committed(tpOf("orders")) == 2 })
	sendJSON(src, "ghost", 0, 2)
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "table db.ghost does not exist") || !strings.Contains(err.Error(), "errors.tolerance is none") {
		t.Fatalf("Run: %v; want the missing table and the tolerance named", err)
	}
	if c := src.committed(tpOf("ghost")); c > 0 {
		t.Errorf("ghost committed to %d; want nothing of it", c)
	}
}

// TestUnitTemplateRefusesJobTables: a topic whose name gives the
// dead-letter table (errors.dlq_table, a route's dlq_table) is refused:
// its records are bad records with the cause, in the route's dead-letter
// table and never as rows of the records' shape; a table the route cannot
// fill (no column the records give) makes bad records too.
func TestUnitTemplateRefusesJobTables(t *testing.T) {
	for _, c := range []struct{ name, errors, route, dlq string }{
		{"errors.dlq_table", "{tolerance: all, dlq_table: dead}", "", "db.dead"},
		{"the route's dlq_table", "{tolerance: all}", ", dlq_table: dead", "db.dead"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testUnitTemplateJobTable(t, c.errors, c.route, c.dlq) })
		})
	}
}

func testUnitTemplateJobTable(t *testing.T, errs, route, dlq string) {
	cfg := templateConfig(t, errs, route)
	sink := newTableSink(dlq)
	r, cs := launchTemplate(t, cfg, sink)
	src := cs.fakeSource
	sendJSON(src, "orders", 0, 2)
	sendJSON(src, "dead", 0, 3)
	sendJSON(src, "orders", 2, 2)
	eventually(t, 2*time.Second, "both topics committed", func() bool {
		return src.committed(tpOf("orders")) == 4 && src.committed(tpOf("dead")) == 3
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sortedIDs(sink.insertedIDs("db.orders")); !slices.Equal(got, []uint64{0, 1, 2, 3}) {
		t.Errorf("orders landed ids %v, want 0..3 once each (in any order: batches go in concurrently)", got)
	}
	rows := sink.rowsIn()
	if len(rows) != 3 {
		t.Fatalf("%d dead-letter rows, want the 3 records of topic dead: %+v", len(rows), rows)
	}
	for _, row := range rows {
		if row.topic != "dead" || row.class != tables.ClassTable || !strings.Contains(row.errText, "is the dead-letter table") {
			t.Errorf("dead-letter row of %s, class %q, error %q; want topic dead, class %q and the cause", row.topic, row.class, row.errText, tables.ClassTable)
		}
	}
}

// TestUnitTemplateUnfitTable: a topic whose name gives a table that the
// route cannot fill (stats: a column of a type no format fills; odd: a
// column the driver cannot carry) or that takes no INSERT (summary: a
// View) does not stop the connector: its records are dead-lettered with
// the cause, the other topic lands.
func TestUnitTemplateUnfitTable(t *testing.T) { synctest.Test(t, testUnitTemplateUnfitTable) }

func testUnitTemplateUnfitTable(t *testing.T) {
	cfg := templateConfig(t, "{tolerance: all, dlq_topic: dead-letters}", "")
	sink := newTableSink("db.unused")
	sink.cols["db.stats"] = []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "total", Type: "AggregateFunction(sum, UInt64)"}}
	sink.unfit["db.odd"] = true
	sink.engines["db.summary"] = "View"
	r, src := launchTemplate(t, cfg, sink)
	sendJSON(src.fakeSource, "stats", 0, 3)
	sendJSON(src.fakeSource, "odd", 0, 1)
	sendJSON(src.fakeSource, "summary", 0, 2)
	sendJSON(src.fakeSource, "orders", 0, 2)
	eventually(t, 2*time.Second, "every topic committed", func() bool {
		return src.committed(tpOf("orders")) == 2 && src.committed(tpOf("stats")) == 3 &&
			src.committed(tpOf("odd")) == 1 && src.committed(tpOf("summary")) == 2
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sortedIDs(sink.insertedIDs("db.orders")); !slices.Equal(got, []uint64{0, 1}) {
		t.Errorf("orders landed ids %v, want 0, 1", got)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.causes) != 6 {
		t.Fatalf("dead letters %q; want the 3 records of stats, 1 of odd, 2 of summary", src.causes)
	}
	want := map[string]string{
		"stats":   `table db.stats for topic "stats"): column "total" has type AggregateFunction`,
		"odd":     `column "a(b)" cannot be inserted into`,
		"summary": `table db.summary (for topic "summary") is a View, which takes no INSERT`,
	}
	for _, c := range src.causes {
		topic, _, _ := strings.Cut(c, ": ")
		if w, ok := want[topic]; !ok || !strings.Contains(c, w) {
			t.Errorf("dead letter %q; want its topic's table and why (%q)", c, w)
		}
	}
}

// sortedIDs sorts ids in place and returns them.
func sortedIDs(ids []uint64) []uint64 {
	slices.Sort(ids)
	return ids
}

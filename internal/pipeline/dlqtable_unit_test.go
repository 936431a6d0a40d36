package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/tables"
)

// dlqRow is one row a dead-letter table got, by its columns.
type dlqRow struct {
	table, topic, key, value, errText, class string
	partition                                int32
	offset                                   int64
	valueLen                                 uint64
	hkeys, hvals                             []string
}

// dlqSink is the fakeSink with a dead-letter table: Describe gives it
// DLQTableSpec's columns, and its INSERTs are recorded row by row (after
// gate, when set, is closed; failing for good with fail, when set).
type dlqSink struct {
	*fakeSink
	name string // db.table of the dead-letter table

	mu      sync.Mutex
	gate    chan struct{}
	fail    error
	dlqRows []dlqRow
	inserts int
}

func newDLQSink(name string) *dlqSink { return &dlqSink{fakeSink: newFakeSink(nil), name: name} }

func (k *dlqSink) Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error) {
	if db+"."+table == k.name {
		return tables.DLQTableSpec(db, table, chschema.ServerTypes{DateTime64: true}, 0, "").Columns, nil
	}
	return k.fakeSink.Describe(ctx, db, table)
}

func (k *dlqSink) Insert(ctx context.Context, t *chtable.Table, block chschema.Block, id uint64,
	onRetry func(chtable.Attempt), refresh chtable.Refresh) error {
	if t.FullName() != k.name {
		return k.fakeSink.Insert(ctx, t, block, id, onRetry, refresh)
	}
	k.mu.Lock()
	gate, fail := k.gate, k.fail
	k.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		return fail
	}
	col := map[string]any{}
	for i, c := range block.Columns() {
		col[c.Name] = block.ColumnData(i)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inserts++
	for i := range block.Rows() {
		k.dlqRows = append(k.dlqRows, dlqRow{
			table: col[tables.ColTargetTable].([]string)[i], topic: col["_topic"].([]string)[i],
			partition: col["_partition"].([]int32)[i], offset: col["_offset"].([]int64)[i],
			key: col["_key"].([]string)[i], value: col[tables.ColValue].([]string)[i],
			valueLen: col[tables.ColValueLength].([]uint64)[i], errText: col[tables.ColError].([]string)[i],
			class: col[tables.ColErrorClass].([]string)[i],
			hkeys: col[tables.ColHeaderKeys].([][]string)[i], hvals: col[tables.ColHeaderValues].([][]string)[i],
		})
	}
	return nil
}

func (k *dlqSink) rowsIn() []dlqRow {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]dlqRow(nil), k.dlqRows...)
}

func startDLQ(t *testing.T, extra string, sink *dlqSink) *running {
	t.Helper()
	cfg := unitConfig(t, extra)
	cfg.Batch.MaxRows = 100
	cfg.Batch.MaxWait = 50 * time.Millisecond
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	return launch(t, p, src, src, sink.fakeSink)
}

// TestUnitDLQTableRows: bad records become rows of the dead-letter table,
// in batches (one INSERT for several), with their coordinates, their
// value byte for byte (cut at dlq_value_max, with the original length),
// headers, error and class; the good records go to their table, and the
// committed offset passes everything once both INSERTs are in.
func TestUnitDLQTableRows(t *testing.T) { synctest.Test(t, testUnitDLQTableRows) }

func testUnitDLQTableRows(t *testing.T) {
	sink := newDLQSink("db.t_dead")
	r := startDLQ(t, "errors: {tolerance: all, dlq_table: t_dead, dlq_value_max: 16}\n", sink)
	binary := "\xff\x00\"\\\n\x1f\xc3(ok"        // not UTF-8, control bytes, JSON's specials
	long := `{"id":1,` + strings.Repeat(" ", 40) // malformed, 48 bytes
	vals := append(rows(0, 2), binary, `{"id":"seven"}`, long)
	vals = append(vals, rows(5, 3)...)
	r.src.send(unitTP, 0, vals...)
	eventually(t, 2*time.Second, "offset 8 committed", func() bool { return r.src.committed(unitTP) == 8 })
	eventually(t, 2*time.Second, "the counts in the status snapshot", func() bool {
		ts := r.p.Status().Tables
		return len(ts) == 2 && ts[0].Table == "db.t" && ts[0].DeadLettered == 3 && !ts[0].DeadLetterTable &&
			ts[1].Table == "db.t_dead" && ts[1].DeadLetterTable && ts[1].Rows15m == 3
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.sink.inserted("db.t"); got != 5 {
		t.Fatalf("%d rows in db.t, want 5", got)
	}
	got := sink.rowsIn()
	if len(got) != 3 || sink.inserts != 1 {
		t.Fatalf("dead-letter rows %+v in %d INSERTs, want 3 rows in 1", got, sink.inserts)
	}
	want := []struct {
		offset   int64
		value    string
		valueLen int
		class    string
	}{
		{2, binary, len(binary), tables.ClassMalformed},
		{3, `{"id":"seven"}`, 14, tables.ClassColumn},
		{4, long[:16], len(long), tables.ClassMalformed},
	}
	for i, w := range want {
		g := got[i]
		if g.offset != w.offset || g.value != w.value || g.valueLen != uint64(w.valueLen) || g.class != w.class ||
			g.topic != unitTopic || g.partition != 0 || g.table != "db.t" || !strings.Contains(g.errText, fmt.Sprintf("offset %d", w.offset)) {
			t.Errorf("row %d: %+v, want offset %d value %q (%d bytes) class %s", i, g, w.offset, w.value, w.valueLen, w.class)
		}
	}
	if st := r.p.Stats(); st.DLQ != 3 || r.p.cat.DeadLetters().Counted("db.t") != 3 {
		t.Errorf("stats %+v, dead-lettered for db.t %d; want 3", st, r.p.cat.DeadLetters().Counted("db.t"))
	}
}

// TestUnitDLQTableHoldsOffsets: while the dead-letter row's INSERT has not
// succeeded, the committed offset stays at the bad record, though the
// records after it are in their table; once it is in, it passes.
func TestUnitDLQTableHoldsOffsets(t *testing.T) { synctest.Test(t, testUnitDLQTableHoldsOffsets) }

func testUnitDLQTableHoldsOffsets(t *testing.T) {
	sink := newDLQSink("db.t_dead")
	sink.gate = make(chan struct{})
	r := startDLQ(t, "errors: {tolerance: all, dlq_table: t_dead}\n", sink)
	r.src.send(unitTP, 0, rows(0, 1)[0], `not json`, rows(2, 1)[0], rows(3, 1)[0])
	eventually(t, 2*time.Second, "the good rows inserted", func() bool { return r.sink.inserted("db.t") == 3 })
	time.Sleep(200 * time.Millisecond) // commit_interval passes several times
	if got := r.src.committed(unitTP); got > 1 {
		t.Fatalf("committed offset %d while the dead-letter row of offset 1 is not in", got)
	}
	close(sink.gate)
	eventually(t, 2*time.Second, "offset 4 committed", func() bool { return r.src.committed(unitTP) == 4 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnitDLQTableFails: a dead-letter INSERT that fails for good stops the
// connector, and nothing from the bad record on is committed.
func TestUnitDLQTableFails(t *testing.T) { synctest.Test(t, testUnitDLQTableFails) }

func testUnitDLQTableFails(t *testing.T) {
	sink := newDLQSink("db.t_dead")
	sink.fail = errors.New("code: 60, UNKNOWN_TABLE")
	r := startDLQ(t, "errors: {tolerance: all, dlq_table: t_dead}\n", sink)
	r.src.send(unitTP, 0, rows(0, 1)[0], `not json`, rows(2, 1)[0])
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "UNKNOWN_TABLE") {
		t.Fatalf("Run returned %v, want the dead-letter INSERT's error", err)
	}
	if got := r.src.committed(unitTP); got > 1 {
		t.Fatalf("committed offset %d, past the record whose row is not in", got)
	}
}

// TestUnitDLQTableAndTopic: with dlq_topic and a route's dlq_table, a bad
// record goes to both, and is committed past only once both have it; the
// route's table wins over errors.dlq_table.
func TestUnitDLQTableAndTopic(t *testing.T) { synctest.Test(t, testUnitDLQTableAndTopic) }

func testUnitDLQTableAndTopic(t *testing.T) {
	sink := newDLQSink("db.t_route_dead")
	sink.gate = make(chan struct{})
	cfg := unitConfig(t, "errors: {tolerance: all, dlq_topic: dead}\n")
	cfg.Routes[0].DLQTable = "t_route_dead"
	cfg.Batch.MaxRows, cfg.Batch.MaxWait = 100, 50*time.Millisecond
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	r := launch(t, p, src, src, sink.fakeSink)
	r.src.send(unitTP, 0, rows(0, 1)[0], `not json`, rows(2, 1)[0])
	eventually(t, 2*time.Second, "the produce to the topic", func() bool {
		r.src.mu.Lock()
		defer r.src.mu.Unlock()
		return len(r.src.dlqSent) == 1
	})
	time.Sleep(200 * time.Millisecond)
	if got := r.src.committed(unitTP); got > 1 {
		t.Fatalf("committed offset %d: the topic has the record, the table not yet", got)
	}
	close(sink.gate)
	eventually(t, 2*time.Second, "offset 3 committed", func() bool { return r.src.committed(unitTP) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.rowsIn(); len(got) != 1 || got[0].offset != 1 {
		t.Fatalf("dead-letter rows %+v, want offset 1", got)
	}
}

// TestUnitDLQTableFanout: with fanout: all, a record bad for its routes is
// one dead-letter row (meant for the first route that refused it), and the
// records around it go to every table.
func TestUnitDLQTableFanout(t *testing.T) { synctest.Test(t, testUnitDLQTableFanout) }

func testUnitDLQTableFanout(t *testing.T) {
	sink := newDLQSink("db.t_dead")
	r := startDLQ(t, "  - topic: events\n    table: u\nfanout: all\nerrors: {tolerance: all, dlq_table: t_dead}\n", sink)
	r.src.send(unitTP, 0, rows(0, 1)[0], `not json`, rows(2, 1)[0])
	eventually(t, 2*time.Second, "offset 3 committed", func() bool { return r.src.committed(unitTP) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if a, b := r.sink.inserted("db.t"), r.sink.inserted("db.u"); a != 2 || b != 2 {
		t.Fatalf("%d rows in db.t, %d in db.u; want 2 each", a, b)
	}
	if got := sink.rowsIn(); len(got) != 1 || got[0].offset != 1 || got[0].table != "db.t" || got[0].class != tables.ClassMalformed {
		t.Fatalf("dead-letter rows %+v, want offset 1 meant for db.t", got)
	}
}

package pipeline

// Unit tests of the records held for a table's new column (evolve.go,
// held.go): held from the first record carrying the field until the ALTER
// is applied, with fetching paused and nothing committed past them, then
// decoded with the column; let go without the field when the ALTER is
// refused; dropped with their partition on a revoke; and a column a
// person added found by a re-read before the first record carrying it.
// Each runs in a testing/synctest bubble: the pipeline's timers and the
// waits of eventually run on the bubble's fake clock.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/offsets"
)

// cityRows are records id from..from+n-1 that carry the field city.
func cityRows(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":%d,"city":"city %d"}`, from+i, from+i)
	}
	return out
}

// bareRows are records id from..from+n-1 without any other field.
func bareRows(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":%d}`, from+i)
	}
	return out
}

// startEvolving runs a pipeline over sink (whose table starts as id
// UInt64) with the route's extra config.
func startEvolving(t *testing.T, extra string, sink *evolvingSink) *running {
	t.Helper()
	if sink.cols == nil {
		sink.cols = []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}
	}
	p, err := New(context.Background(), unitConfig(t, extra), zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	t.Cleanup(sink.openGate)
	return launch(t, p, src, src, sink.fakeSink)
}

// checkCities fails unless every id in [from, to) was inserted once, with
// city "city N" for ids at or past withCity and "" (the column's default,
// or no column) before.
func checkCities(t *testing.T, sink *evolvingSink, from, to, withCity int) {
	t.Helper()
	got, n := sink.rowsByID()
	if n != to-from {
		t.Fatalf("%d rows inserted, want %d", n, to-from)
	}
	for id := from; id < to; id++ {
		r, ok := got[fmt.Sprint(id)]
		if !ok {
			t.Fatalf("id %d not inserted", id)
		}
		want := ""
		if id >= withCity {
			want = fmt.Sprintf("city %d", id)
		}
		if r["city"] != want {
			t.Fatalf("id %d: city %q, want %q (row %v)", id, r["city"], want, r)
		}
	}
}

// TestUnitEvolveHoldsUntilColumn: the first record carrying a new field is
// held with the rest of its partition while its ALTER runs: no fetch is
// requested (the buffer's records wait in memory, fetching pauses) and
// nothing past it is committed, while the records before it are inserted.
// When the ALTER ends, the held records are decoded with the new column:
// every value arrives.
func TestUnitEvolveHoldsUntilColumn(t *testing.T) { synctest.Test(t, testUnitEvolveHoldsUntilColumn) }

func testUnitEvolveHoldsUntilColumn(t *testing.T) {
	sink := &evolvingSink{fakeSink: newFakeSink(nil), gate: make(chan struct{})}
	r := startEvolving(t, "    schema: {evolve: add_columns}\n", sink)
	r.src.send(unitTP, 0, append(bareRows(0, 2), cityRows(2, 5)...)...)
	eventually(t, 2*time.Second, "offset 2 committed (the records before the field)", func() bool { return r.src.committed(unitTP) == 2 })
	eventually(t, 2*time.Second, "5 records held", func() bool { return r.p.in.Held().Now() == 5 })
	polls := r.src.polls.Load()
	time.Sleep(200 * time.Millisecond)
	if got := r.src.committed(unitTP); got != 2 {
		t.Fatalf("committed %d while offset 2 waits for its column", got)
	}
	if got := r.src.polls.Load(); got != polls {
		t.Fatalf("%d polls started while records were held, want none", got-polls)
	}
	if got := r.p.in.Held().Now(); got != 5 {
		t.Fatalf("%d records held, want 5", got)
	}
	sink.openGate()
	eventually(t, 2*time.Second, "the held records decoded", func() bool { return r.p.in.Held().Now() == 0 })
	eventually(t, 2*time.Second, "fetching resumed", func() bool { return r.src.polls.Load() > polls })
	r.src.send(unitTP, 7, cityRows(7, 1)...)
	eventually(t, 2*time.Second, "offset 8 committed", func() bool { return r.src.committed(unitTP) == 8 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkCities(t, sink, 0, 8, 2)
	if got := sink.added(); len(got) != 1 || got[0] != "ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `city` String" {
		t.Fatalf("ALTERs %q, want the one for city", got)
	}
}

// TestUnitEvolveRefusedNotHeld: an ALTER the server refuses (no
// permission) lets the held records go on without the field, and is not
// tried again for the records after them; a denied field is never held
// for an ALTER. Nothing stays held, every record is committed.
func TestUnitEvolveRefusedNotHeld(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		refuse      error
		tries       int
	}{
		{"permission", "    schema: {evolve: add_columns}\n",
			&clickhouse.Exception{Code: 497, Message: "ACCESS_DENIED: Not enough privileges"}, 1},
		{"deny list", "    schema: {evolve: add_columns, deny: [city]}\n", nil, 0},
		{"no evolution", "", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := &evolvingSink{fakeSink: newFakeSink(nil), refuse: tc.refuse}
				r := startEvolving(t, tc.extra, sink)
				r.src.send(unitTP, 0, append(bareRows(0, 2), cityRows(2, 4)...)...)
				eventually(t, 2*time.Second, "offset 6 committed", func() bool { return r.src.committed(unitTP) == 6 })
				r.src.send(unitTP, 6, cityRows(6, 2)...)
				eventually(t, 2*time.Second, "offset 8 committed", func() bool { return r.src.committed(unitTP) == 8 })
				if n := r.p.in.Held().Now(); n != 0 {
					t.Fatalf("%d records still held", n)
				}
				if err := r.stop(t); err != nil {
					t.Fatalf("Run: %v", err)
				}
				checkCities(t, sink, 0, 8, 8) // no city column: every row without it
				sink.mu.Lock()
				tries, describes := sink.tries, sink.describes
				sink.mu.Unlock()
				if tries != tc.tries {
					t.Fatalf("%d ALTERs tried, want %d", tries, tc.tries)
				}
				// The table is read at the start and re-read once for the
				// field (schema_refresh is 0 here: once per field).
				if describes != 2 {
					t.Fatalf("%d table reads, want 2 (the start, one re-read for the field)", describes)
				}
			})
		})
	}
}

// TestUnitEvolveTransientRetried: an ALTER that fails on the way (the
// network) is tried again while its records stay held, and then fills
// every value.
func TestUnitEvolveTransientRetried(t *testing.T) { synctest.Test(t, testUnitEvolveTransientRetried) }

func testUnitEvolveTransientRetried(t *testing.T) {
	sink := &evolvingSink{fakeSink: newFakeSink(nil), refuse: fmt.Errorf("dial: %w", errors.Join(context.DeadlineExceeded)), fail: 2}
	r := startEvolving(t, "    schema: {evolve: add_columns}\n", sink)
	r.src.send(unitTP, 0, cityRows(0, 4)...)
	eventually(t, 5*time.Second, "offset 4 committed", func() bool { return r.src.committed(unitTP) == 4 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkCities(t, sink, 0, 4, 0)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.tries != 3 {
		t.Fatalf("%d ALTERs tried, want 3 (two failures, then the one that worked)", sink.tries)
	}
}

// TestUnitEvolveRevokeDropsHeld: a revoked partition's records held for a
// column are dropped uncommitted (its next owner reads them from the
// committed offset), fetching goes on, and the ALTER's end, arriving
// after, changes nothing but the table.
func TestUnitEvolveRevokeDropsHeld(t *testing.T) { synctest.Test(t, testUnitEvolveRevokeDropsHeld) }

func testUnitEvolveRevokeDropsHeld(t *testing.T) {
	sink := &evolvingSink{fakeSink: newFakeSink(nil), gate: make(chan struct{})}
	r := startEvolving(t, "    schema: {evolve: add_columns}\n", sink)
	polls := r.src.polls.Load()
	r.src.send(unitTP, 0, append(bareRows(0, 2), cityRows(2, 3)...)...)
	eventually(t, 2*time.Second, "3 records held", func() bool { return r.p.in.Held().Now() == 3 })
	eventually(t, 2*time.Second, "offset 2 committed", func() bool { return r.src.committed(unitTP) == 2 })
	revoke(r, unitTP)
	eventually(t, 2*time.Second, "nothing held after the revoke", func() bool { return r.p.in.Held().Now() == 0 })
	eventually(t, 2*time.Second, "fetching resumed after the revoke", func() bool { return r.src.polls.Load() > polls })
	sink.openGate()
	eventually(t, 2*time.Second, "the ALTER ran", func() bool { return len(sink.added()) == 1 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.src.committed(unitTP); got != 2 {
		t.Fatalf("committed %d, want 2 (the held records are the next owner's)", got)
	}
	if _, n := sink.rowsByID(); n != 2 {
		t.Fatalf("%d rows inserted, want 2", n)
	}
}

// TestUnitPersonAddedColumn: without schema evolution, a column a person
// added after the table was read is found by the re-read that the first
// record carrying its field triggers, before that record is decoded: every
// value arrives. The re-read is bounded: once per field (schema_refresh is
// 0 here), not per record.
func TestUnitPersonAddedColumn(t *testing.T) { synctest.Test(t, testUnitPersonAddedColumn) }

func testUnitPersonAddedColumn(t *testing.T) {
	sink := &evolvingSink{fakeSink: newFakeSink(nil)}
	r := startEvolving(t, "", sink)
	r.src.send(unitTP, 0, bareRows(0, 2)...)
	eventually(t, 2*time.Second, "offset 2 committed", func() bool { return r.src.committed(unitTP) == 2 })
	sink.addColumn("city", "String")
	r.src.send(unitTP, 2, cityRows(2, 4)...)
	eventually(t, 2*time.Second, "offset 6 committed", func() bool { return r.src.committed(unitTP) == 6 })
	r.src.send(unitTP, 6, `{"id":6,"city":"city 6","zip":1}`, `{"id":7,"city":"city 7","zip":2}`)
	eventually(t, 2*time.Second, "offset 8 committed", func() bool { return r.src.committed(unitTP) == 8 })
	r.src.send(unitTP, 8, `{"id":8,"city":"city 8","zip":3}`, `{"id":9,"city":"city 9","zip":4}`)
	eventually(t, 2*time.Second, "offset 10 committed", func() bool { return r.src.committed(unitTP) == 10 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got, n := sink.rowsByID()
	if n != 10 {
		t.Fatalf("%d rows, want 10", n)
	}
	for id := 2; id < 10; id++ {
		if c := got[fmt.Sprint(id)]["city"]; c != fmt.Sprintf("city %d", id) {
			t.Fatalf("id %d: city %q", id, c)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.describes != 3 {
		t.Fatalf("%d table reads, want 3 (the start, one for city, one for zip)", sink.describes)
	}
}

// TestUnitEvolveTypeFromHeldRecords: the type of a field typed by its
// values comes from the held records too, not from the first one alone:
// an integer first and fractions after make a Float64 column, and every
// value fits it.
func TestUnitEvolveTypeFromHeldRecords(t *testing.T) {
	synctest.Test(t, testUnitEvolveTypeFromHeldRecords)
}

func testUnitEvolveTypeFromHeldRecords(t *testing.T) {
	sink := &evolvingSink{fakeSink: newFakeSink(nil)}
	r := startEvolving(t, "    schema: {evolve: add_columns}\n", sink)
	r.src.send(unitTP, 0, `{"id":0,"x":1}`, `{"id":1,"x":1.5}`, `{"id":2,"x":2.25}`, `{"id":3,"x":3}`)
	eventually(t, 2*time.Second, "offset 4 committed", func() bool { return r.src.committed(unitTP) == 4 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.added(); len(got) != 1 || got[0] != "ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `x` Float64" {
		t.Fatalf("ALTERs %q, want x as Float64", got)
	}
	got, n := sink.rowsByID()
	if n != 4 {
		t.Fatalf("%d rows, want 4", n)
	}
	for id, want := range []string{"1", "1.5", "2.25", "3"} {
		if x := got[fmt.Sprint(id)]["x"]; x != want {
			t.Fatalf("id %d: x %q, want %s", id, x, want)
		}
	}
}

// TestUnitEvolveOtherRouteWaitsToo: two routes into one table, only the
// second adding columns. The first route's records carried field x before
// (went on without it: no column, no ALTER of theirs); once the second
// route's record starts the ALTER for x, the first route's records with x
// wait for it as well, and fill it.
func TestUnitEvolveOtherRouteWaitsToo(t *testing.T) {
	synctest.Test(t, testUnitEvolveOtherRouteWaitsToo)
}

func testUnitEvolveOtherRouteWaitsToo(t *testing.T) {
	sink := &evolvingSink{fakeSink: newFakeSink(nil), gate: make(chan struct{}), cols: []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}}
	cfg := unitConfigTopics(t, unitTopic+", other", "  - topic: other\n    table: t\n    schema: {evolve: add_columns}\n")
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	t.Cleanup(sink.openGate)
	r := launch(t, p, src, src, sink.fakeSink)
	other := offsetsTP("other")
	r.src.send(unitTP, 0, `{"id":0,"x":"a0"}`, `{"id":1,"x":"a1"}`)
	eventually(t, 2*time.Second, "the first route's records committed without x", func() bool { return r.src.committed(unitTP) == 2 })
	// One fetch (no other is asked for while records are held): the
	// second route's record first, then more of the first route's.
	rec := func(tp offsets.TP, off int64, v string) *kgo.Record {
		return &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: off, Value: []byte(v), Timestamp: time.Now()}
	}
	r.src.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{
		{Topic: "other", Partitions: []kgo.FetchPartition{{HighWatermark: 1, Records: []*kgo.Record{rec(other, 0, `{"id":100,"x":"b100"}`)}}}},
		{Topic: unitTopic, Partitions: []kgo.FetchPartition{{HighWatermark: 4, Records: []*kgo.Record{
			rec(unitTP, 2, `{"id":2,"x":"a2"}`), rec(unitTP, 3, `{"id":3,"x":"a3"}`)}}}},
	}}}
	eventually(t, 2*time.Second, "both routes' records held for the ALTER", func() bool { return r.p.in.Held().Now() == 3 })
	time.Sleep(100 * time.Millisecond)
	if got := r.src.committed(unitTP); got != 2 {
		t.Fatalf("committed %d while offset 2 waits", got)
	}
	sink.openGate()
	eventually(t, 2*time.Second, "the held records decoded", func() bool { return r.p.in.Held().Now() == 0 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.src.committed(unitTP); got != 4 {
		t.Fatalf("committed %d after the stop, want 4", got)
	}
	got, n := sink.rowsByID()
	if n != 5 {
		t.Fatalf("%d rows, want 5", n)
	}
	for id, want := range map[string]string{"0": "", "1": "", "2": "a2", "3": "a3", "100": "b100"} {
		if x := got[id]["x"]; x != want {
			t.Fatalf("id %s: x %q, want %q", id, x, want)
		}
	}
}

// offsetsTP is partition 0 of topic.
func offsetsTP(topic string) offsets.TP { return offsets.TP{Topic: topic, Partition: 0} }

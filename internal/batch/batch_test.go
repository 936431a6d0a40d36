package batch

import (
	"testing"
	"time"

	"sink/internal/offsets"
)

// rows is a Data whose size the test controls.
type rows struct{ n, bytes int }

func (r *rows) Rows() int  { return r.n }
func (r *rows) Bytes() int { return r.bytes }

var t0 = time.Unix(1_700_000_000, 0)

// checkFull appends n rows to a (add puts row i into its data first) and
// checks at which row it first reports full and why (0: never).
func checkFull[D Data](t *testing.T, a *Accumulator[D], n int, add func(i int), wantFullAt int, wantWhy Reason) {
	t.Helper()
	for i := 1; i <= n; i++ {
		add(i)
		full, why := a.Add(t0, offsets.TP{Topic: "t", Partition: int32(i % 3)}, int64(i), 0)
		if full {
			if i != wantFullAt || why != wantWhy {
				t.Fatalf("policy %+v: full at row %d (%v), want row %d (%v)", a.Policy(), i, why, wantFullAt, wantWhy)
			}
			return
		}
	}
	if wantFullAt != 0 {
		t.Fatalf("policy %+v: never full, want full at row %d", a.Policy(), wantFullAt)
	}
}

func TestTriggers(t *testing.T) {
	// f appends n rows of size each, one per partition in turn.
	f := func(p Policy, n, size int, wantFullAt int, wantWhy Reason) {
		t.Helper()
		d := &rows{}
		checkFull(t, NewAccumulator(p, d), n, func(int) { d.n++; d.bytes += size }, wantFullAt, wantWhy)
	}
	f(Policy{MaxRows: 10}, 100, 1, 10, ReasonRows)
	f(Policy{MaxRows: 1}, 5, 1, 1, ReasonRows)
	f(Policy{MaxBytes: 100}, 100, 30, 4, ReasonBytes) // crosses 100 at 120
	f(Policy{MaxRows: 10, MaxBytes: 100}, 100, 50, 2, ReasonBytes)
	f(Policy{MaxRows: 3, MaxBytes: 100}, 100, 1, 3, ReasonRows)
	f(Policy{}, 1000, 1000, 0, 0) // no triggers: only max_wait or a forced seal
}

// parts is a Parted Data: rows go to the parts in turn by a pattern the
// test sets (a cluster's shards, placed by a key).
type parts struct {
	rows, bytes []int
}

func (p *parts) Rows() int  { return sum(p.rows) }
func (p *parts) Bytes() int { return sum(p.bytes) }
func (p *parts) Largest() (rows, bytes int) {
	for i := range p.rows {
		rows, bytes = max(rows, p.rows[i]), max(bytes, p.bytes[i])
	}
	return rows, bytes
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

func TestTriggersPerPart(t *testing.T) {
	// f appends n rows of size each, row i to part place(i).
	f := func(p Policy, nparts, n, size int, place func(i int) int, wantFullAt int, wantWhy Reason) {
		t.Helper()
		d := &parts{rows: make([]int, nparts), bytes: make([]int, nparts)}
		checkFull(t, NewAccumulator(p, d), n, func(i int) { d.rows[place(i)]++; d.bytes[place(i)] += size }, wantFullAt, wantWhy)
	}
	even := func(i int) int { return i % 2 }
	hot := func(i int) int { return 0 } // one key: every row on one shard
	third := func(i int) int { return min(i%4, 1) }
	// Even parts: each INSERT as large as max_rows, so the batch holds twice.
	f(Policy{MaxRows: 10, PerPart: true}, 2, 100, 1, even, 19, ReasonRows) // the odd rows' part has 10 at row 19
	// One hot shard: its part fills first, whatever the others hold.
	f(Policy{MaxRows: 10, PerPart: true}, 2, 100, 1, hot, 10, ReasonRows)
	f(Policy{MaxRows: 9, PerPart: true}, 2, 100, 1, third, 11, ReasonRows) // parts 2:9 at row 11
	// Bytes per part too, and the whole bounded by MaxDataBytes.
	f(Policy{MaxBytes: 100, PerPart: true}, 2, 100, 30, even, 7, ReasonBytes) // a part crosses 100 at 4 rows
	f(Policy{MaxBytes: 100, MaxDataBytes: 150, PerPart: true}, 4, 100, 30, func(i int) int { return i % 4 }, 5, ReasonBytes)
	// Without PerPart the whole batch counts, parts or not.
	f(Policy{MaxRows: 10}, 2, 100, 1, even, 10, ReasonRows)
	// A Data without parts: PerPart changes nothing.
	d := &rows{}
	a := NewAccumulator(Policy{MaxRows: 3, PerPart: true}, d)
	for i := 1; i <= 3; i++ {
		d.n++
		if full, _ := a.Add(t0, offsets.TP{Topic: "t"}, int64(i), 0); full != (i == 3) {
			t.Fatalf("plain data, PerPart: full %v at row %d", full, i)
		}
	}
}

func TestUntilNext(t *testing.T) {
	d := &rows{}
	a := NewAccumulator(Policy{MaxWait: 5 * time.Second}, d)
	if _, ok := a.UntilNext(t0); ok {
		t.Fatal("empty accumulator has nothing to wait for")
	}
	d.n++
	a.Add(t0.Add(time.Second), offsets.TP{Topic: "t"}, 1, 0)
	// the clock starts at the first row, not at creation
	if got, ok := a.UntilNext(t0.Add(2 * time.Second)); !ok || got != 4*time.Second {
		t.Fatalf("UntilNext = %v,%v want 4s", got, ok)
	}
	if got, _ := a.UntilNext(t0.Add(time.Minute)); got != 0 {
		t.Fatalf("overdue UntilNext = %v want 0", got)
	}
	if _, ok := NewAccumulator(Policy{}, d).UntilNext(t0); ok {
		t.Fatal("no max_wait: nothing to wait for")
	}
}

// TestSetPolicy: new triggers apply to the open batch at once: a shorter
// wait counts from its first row, and fewer rows seal it at the next Add.
func TestSetPolicy(t *testing.T) {
	d := &rows{}
	a := NewAccumulator(Policy{MaxRows: 100, MaxWait: 10 * time.Second}, d)
	for i := 1; i <= 5; i++ {
		d.n++
		if full, _ := a.Add(t0, offsets.TP{Topic: "t"}, int64(i), 0); full {
			t.Fatalf("full at row %d of 100", i)
		}
	}
	a.SetPolicy(Policy{MaxRows: 3, MaxWait: 2 * time.Second})
	if got, ok := a.UntilNext(t0.Add(time.Second)); !ok || got != time.Second {
		t.Fatalf("UntilNext after a shorter wait = %v,%v want 1s", got, ok)
	}
	d.n++
	if full, why := a.Add(t0, offsets.TP{Topic: "t"}, 6, 0); !full || why != ReasonRows {
		t.Fatalf("row 6 with max_rows 3: full %v (%v), want full by rows", full, why)
	}
	if a.Policy().MaxRows != 3 {
		t.Fatalf("Policy() = %+v", a.Policy())
	}
}

func TestSealRanges(t *testing.T) {
	d := &rows{}
	a := NewAccumulator(Policy{MaxRows: 100}, d)
	add := func(p int32, off int64) {
		d.n++
		a.Add(t0, offsets.TP{Topic: "t", Partition: p}, off, 2)
	}
	add(0, 10)
	add(0, 11)
	add(1, 5)
	add(0, 14) // back to a partition already seen, after another one
	add(2, 7)
	next := &rows{}
	b := a.Seal(t0.Add(time.Second), 42, ReasonWait, next)
	want := []Range{
		{TP: offsets.TP{Topic: "t", Partition: 0}, First: 10, Last: 14, LastEpoch: 2, Rows: 3},
		{TP: offsets.TP{Topic: "t", Partition: 1}, First: 5, Last: 5, LastEpoch: 2, Rows: 1},
		{TP: offsets.TP{Topic: "t", Partition: 2}, First: 7, Last: 7, LastEpoch: 2, Rows: 1},
	}
	if b.ID != 42 || b.Reason != ReasonWait || b.Rows() != 5 || b.Opened != t0 {
		t.Fatalf("batch %+v", b)
	}
	if len(b.Ranges) != len(want) {
		t.Fatalf("ranges %+v want %+v", b.Ranges, want)
	}
	for i := range want {
		if b.Ranges[i] != want[i] {
			t.Fatalf("range %d = %+v want %+v", i, b.Ranges[i], want[i])
		}
	}
	if !b.Holds(offsets.TP{Topic: "t", Partition: 2}) || b.Holds(offsets.TP{Topic: "t", Partition: 3}) {
		t.Fatal("Holds is wrong")
	}
	// after sealing: empty, appending into the new container, old batch untouched
	if !a.Empty() || a.Data() != next {
		t.Fatal("accumulator not reset onto next")
	}
	next.n++
	a.Add(t0, offsets.TP{Topic: "t", Partition: 9}, 1, 0)
	if len(b.Ranges) != 3 || b.Ranges[0].Last != 14 {
		t.Fatal("sealed batch changed after the accumulator moved on")
	}
	if a.Seal(t0, 43, ReasonRows, &rows{}) == nil {
		t.Fatal("non-empty seal returned nil")
	}
	if a.Seal(t0, 44, ReasonRows, &rows{}) != nil {
		t.Fatal("empty seal returned a batch")
	}
}

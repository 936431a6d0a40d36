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

func TestTriggers(t *testing.T) {
	// f appends n rows of size each, one per partition in turn, and checks
	// when the accumulator first reports full and why.
	f := func(p Policy, n, size int, wantFullAt int, wantWhy Reason) {
		t.Helper()
		d := &rows{}
		a := NewAccumulator(p, d)
		for i := 1; i <= n; i++ {
			d.n++
			d.bytes += size
			full, why := a.Add(t0, offsets.TP{Topic: "t", Partition: int32(i % 3)}, int64(i), 0)
			if full {
				if i != wantFullAt || why != wantWhy {
					t.Fatalf("policy %+v: full at row %d (%v), want row %d (%v)", p, i, why, wantFullAt, wantWhy)
				}
				return
			}
		}
		if wantFullAt != 0 {
			t.Fatalf("policy %+v: never full, want full at row %d", p, wantFullAt)
		}
	}
	f(Policy{MaxRows: 10}, 100, 1, 10, ReasonRows)
	f(Policy{MaxRows: 1}, 5, 1, 1, ReasonRows)
	f(Policy{MaxBytes: 100}, 100, 30, 4, ReasonBytes) // crosses 100 at 120
	f(Policy{MaxRows: 10, MaxBytes: 100}, 100, 50, 2, ReasonBytes)
	f(Policy{MaxRows: 3, MaxBytes: 100}, 100, 1, 3, ReasonRows)
	f(Policy{}, 1000, 1000, 0, 0) // no triggers: only max_wait or a forced seal
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

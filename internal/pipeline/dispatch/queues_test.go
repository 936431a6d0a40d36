package dispatch

// The batches' dispatch on its own (dispatch, dispatch.go): the open
// batches by key with the last answer remembered, and the sealed batches
// from seal to ack. The pipeline's use of it is tested in
// lastacc_unit_test.go and unit_test.go.

import (
	"slices"
	"testing"

	"sink/internal/offsets"
	"sink/internal/tables"
)

func TestUnitDispatchOpen(t *testing.T) {
	ts := &tables.Table{}
	k0 := key{table: ts, tp: offsets.TP{Topic: "t", Partition: 0}}
	k1 := key{table: ts, tp: offsets.TP{Topic: "t", Partition: 1}}
	var d queues
	if d.acc(k0) != nil || d.openBatches() != 0 || d.openBytes() != 0 {
		t.Fatal("the zero value has an open batch")
	}
	a0, a1 := &Open{key: k0, id: 1}, &Open{key: k1, id: 2}
	d.open(a0)
	d.open(a1)
	if d.acc(k0) != a0 || d.acc(k1) != a1 || d.last != a1 {
		t.Fatal("acc: want each key's batch, the last one asked for remembered")
	}
	tests := []struct {
		name string
		drop key
		want map[key]*Open
	}{
		{name: "the one remembered", drop: k1, want: map[key]*Open{k0: a0, k1: nil}},
		{name: "another", drop: k0, want: map[key]*Open{k0: nil, k1: a1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d queues
			d.open(a0)
			d.open(a1)
			d.drop(tt.drop)
			if d.last != nil && d.last.key == tt.drop {
				t.Fatal("drop left the dropped batch remembered")
			}
			for k, want := range tt.want {
				if got := d.acc(k); got != want {
					t.Errorf("acc(%v) = %p, want %p", k.tp, got, want)
				}
			}
		})
	}
}

func TestUnitDispatchFlights(t *testing.T) {
	var d queues
	if d.oldest() != nil || d.inFlight() != 0 || d.land(1) != nil {
		t.Fatal("the zero value has a sealed batch")
	}
	for _, id := range []uint64{7, 3, 5} {
		d.fly(&flight{b: &Batch{ID: id}, bytes: int(id) * 10})
	}
	if d.inFlight() != 3 || d.bytes() != 150 || d.oldest().b.ID != 3 {
		t.Fatalf("%d in flight, %d bytes, oldest %d: want 3, 150, 3", d.inFlight(), d.bytes(), d.oldest().b.ID)
	}
	if f := d.land(3); f == nil || f.b.ID != 3 {
		t.Fatalf("land(3) = %v", f)
	}
	if d.land(3) != nil || d.inFlight() != 2 || d.bytes() != 120 || d.oldest().b.ID != 5 {
		t.Fatalf("after land(3): %d in flight, %d bytes, oldest %d: want 2, 120, 5", d.inFlight(), d.bytes(), d.oldest().b.ID)
	}
}

// ids lists the batches waiting in ts's queue, head first.
func (d *queues) ids(ts *tables.Table) []uint64 {
	var out []uint64
	if q := d.queues[ts]; q != nil {
		for _, b := range q.waiting {
			out = append(out, b.ID)
		}
	}
	return out
}

// TestUnitDispatchQueues: each table's sealed batches wait in seal order;
// start takes the head into an insert slot, which land or withdraw frees;
// requeue puts a started batch back at the head; withdraw and
// withdrawQueued take batches out for good, keeping the others' order.
func TestUnitDispatchQueues(t *testing.T) {
	type step func(d *queues, a, b *tables.Table)
	start := func(d *queues, ts *tables.Table) uint64 {
		if f := d.start(ts); f != nil {
			return f.b.ID
		}
		return 0
	}
	tests := []struct {
		name         string
		steps        step // after batches 1, 2, 3 of table a and 4 of table b were sealed
		wantA, wantB []uint64
		inserting    [2]int // a's and b's
		flights      int
	}{
		{name: "sealed", steps: func(*queues, *tables.Table, *tables.Table) {},
			wantA: []uint64{1, 2, 3}, wantB: []uint64{4}, flights: 4},
		{name: "started", steps: func(d *queues, a, b *tables.Table) {
			if id := start(d, a); id != 1 {
				t.Errorf("start(a) = %d, want 1", id)
			}
			if id := start(d, b); id != 4 {
				t.Errorf("start(b) = %d, want 4", id)
			}
			if id := start(d, b); id != 0 {
				t.Errorf("start(b) on an empty queue = %d, want none", id)
			}
		}, wantA: []uint64{2, 3}, inserting: [2]int{1, 1}, flights: 4},
		{name: "landed", steps: func(d *queues, a, _ *tables.Table) {
			start(d, a)
			start(d, a)
			d.land(1)
		}, wantA: []uint64{3}, wantB: []uint64{4}, inserting: [2]int{1, 0}, flights: 3},
		{name: "requeued", steps: func(d *queues, a, _ *tables.Table) {
			start(d, a)
			start(d, a)
			d.requeue(a, d.flights[2].b)
		}, wantA: []uint64{2, 3}, wantB: []uint64{4}, inserting: [2]int{1, 0}, flights: 4},
		{name: "requeued and started again", steps: func(d *queues, a, _ *tables.Table) {
			start(d, a)
			d.requeue(a, d.flights[1].b)
			if id := start(d, a); id != 1 {
				t.Errorf("start(a) after requeue = %d, want 1", id)
			}
		}, wantA: []uint64{2, 3}, wantB: []uint64{4}, inserting: [2]int{1, 0}, flights: 4},
		{name: "withdrawn from the middle", steps: func(d *queues, _, _ *tables.Table) {
			if f, at := d.withdraw(2); f == nil || f.b.ID != 2 || at != 1 {
				t.Errorf("withdraw(2) = %v at %d, want batch 2 at 1", f, at)
			}
		}, wantA: []uint64{1, 3}, wantB: []uint64{4}, flights: 3},
		{name: "withdrawn at the head", steps: func(d *queues, _, _ *tables.Table) {
			if _, at := d.withdraw(1); at != 0 {
				t.Errorf("withdraw(1) at %d, want 0", at)
			}
		}, wantA: []uint64{2, 3}, wantB: []uint64{4}, flights: 3},
		{name: "withdrawn while inserting", steps: func(d *queues, a, _ *tables.Table) {
			start(d, a)
			if _, at := d.withdraw(1); at != -1 {
				t.Errorf("withdraw(1) at %d, want -1", at)
			}
			if d.land(1) != nil {
				t.Error("the withdrawn batch's ack still finds it")
			}
		}, wantA: []uint64{2, 3}, wantB: []uint64{4}, flights: 3},
		{name: "withdrawn when unknown", steps: func(d *queues, _, _ *tables.Table) {
			if f, at := d.withdraw(9); f != nil || at != -1 {
				t.Errorf("withdraw(9) = %v at %d, want none", f, at)
			}
		}, wantA: []uint64{1, 2, 3}, wantB: []uint64{4}, flights: 4},
		{name: "withdrawn by a test", steps: func(d *queues, a, _ *tables.Table) {
			start(d, a)
			d.withdrawQueued(a, func(b *Batch) bool { return b.ID == 3 })
		}, wantA: []uint64{2}, wantB: []uint64{4}, inserting: [2]int{1, 0}, flights: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d queues
			a, b := &tables.Table{}, &tables.Table{}
			for _, f := range []*flight{{b: &Batch{ID: 1}, table: a}, {b: &Batch{ID: 2}, table: a},
				{b: &Batch{ID: 3}, table: a}, {b: &Batch{ID: 4}, table: b}} {
				d.enqueue(f)
			}
			tt.steps(&d, a, b)
			if got := d.ids(a); !slices.Equal(got, tt.wantA) {
				t.Errorf("a's queue %v, want %v", got, tt.wantA)
			}
			if got := d.ids(b); !slices.Equal(got, tt.wantB) {
				t.Errorf("b's queue %v, want %v", got, tt.wantB)
			}
			if d.queued(a) != len(tt.wantA) || d.queued(b) != len(tt.wantB) {
				t.Errorf("queued %d and %d, want %d and %d", d.queued(a), d.queued(b), len(tt.wantA), len(tt.wantB))
			}
			if got := [2]int{d.inserting(a), d.inserting(b)}; got != tt.inserting {
				t.Errorf("inserting %v, want %v", got, tt.inserting)
			}
			if d.inFlight() != tt.flights {
				t.Errorf("%d sealed batches not acknowledged, want %d", d.inFlight(), tt.flights)
			}
			var next []uint64
			for _, ts := range []*tables.Table{a, b} {
				if n := d.next(ts); n != nil {
					next = append(next, n.ID)
				}
			}
			var heads []uint64
			for _, want := range [][]uint64{tt.wantA, tt.wantB} {
				if len(want) > 0 {
					heads = append(heads, want[0])
				}
			}
			if !slices.Equal(next, heads) {
				t.Errorf("next %v, want the heads %v", next, heads)
			}
		})
	}
	var d queues
	ts := &tables.Table{}
	if d.queued(ts) != 0 || d.inserting(ts) != 0 || d.next(ts) != nil || d.start(ts) != nil {
		t.Error("the zero value has a queue")
	}
	d.withdrawQueued(ts, func(*Batch) bool { return true }) // no queue: nothing to do
}

// TestUnitDispatchEach: eachOpen sees every open batch, eachOpenOf a
// table's, eachSealed every sealed one not acknowledged; eachOpen's fn
// may drop the batch it is given.
func TestUnitDispatchEach(t *testing.T) {
	a, b := &tables.Table{}, &tables.Table{}
	keyOf := func(ts *tables.Table, part int32) key {
		return key{table: ts, tp: offsets.TP{Topic: "t", Partition: part}}
	}
	tests := []struct {
		name string
		each func(d *queues, fn func(a *Open))
		want []uint64
	}{
		{name: "all", each: (*queues).eachOpen, want: []uint64{1, 2, 3}},
		{name: "table a", each: func(d *queues, fn func(*Open)) { d.eachOpenOf(a, fn) }, want: []uint64{1, 2}},
		{name: "table b", each: func(d *queues, fn func(*Open)) { d.eachOpenOf(b, fn) }, want: []uint64{3}},
		{name: "a table without one", each: func(d *queues, fn func(*Open)) { d.eachOpenOf(&tables.Table{}, fn) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d queues
			d.open(&Open{key: keyOf(a, 0), id: 1})
			d.open(&Open{key: keyOf(a, 1), id: 2})
			d.open(&Open{key: keyOf(b, 0), id: 3})
			var got []uint64
			tt.each(&d, func(x *Open) {
				got = append(got, x.id)
				d.drop(x.key)
			})
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("saw %v, want %v", got, tt.want)
			}
			for _, id := range tt.want {
				for _, k := range []key{keyOf(a, 0), keyOf(a, 1), keyOf(b, 0)} {
					if x := d.acc(k); x != nil && x.id == id {
						t.Errorf("batch %d not dropped", id)
					}
				}
			}
		})
	}
	var d queues
	for _, id := range []uint64{5, 6, 7} {
		d.enqueue(&flight{b: &Batch{ID: id}, table: a})
	}
	d.start(a)
	d.land(5)
	var got []uint64
	d.eachSealed(func(f *flight) { got = append(got, f.b.ID) })
	slices.Sort(got)
	if !slices.Equal(got, []uint64{6, 7}) {
		t.Errorf("eachSealed saw %v, want [6 7]", got)
	}
}

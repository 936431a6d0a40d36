package pipeline

// The batches' dispatch on its own (dispatch, dispatch.go): the open
// batches by key with the last answer remembered, and the sealed batches
// from seal to ack. The pipeline's use of it is tested in
// lastacc_unit_test.go and unit_test.go.

import (
	"testing"

	"sink/internal/offsets"
)

func TestUnitDispatchOpen(t *testing.T) {
	ts := &tableState{}
	k0 := accKey{table: ts, tp: offsets.TP{Topic: "t", Partition: 0}}
	k1 := accKey{table: ts, tp: offsets.TP{Topic: "t", Partition: 1}}
	var d dispatch
	if d.acc(k0) != nil || d.openBatches() != 0 || d.openBytes() != 0 {
		t.Fatal("the zero value has an open batch")
	}
	a0, a1 := &accState{key: k0, id: 1}, &accState{key: k1, id: 2}
	d.open(a0)
	d.open(a1)
	if d.acc(k0) != a0 || d.acc(k1) != a1 || d.last != a1 {
		t.Fatal("acc: want each key's batch, the last one asked for remembered")
	}
	tests := []struct {
		name string
		drop accKey
		want map[accKey]*accState
	}{
		{name: "the one remembered", drop: k1, want: map[accKey]*accState{k0: a0, k1: nil}},
		{name: "another", drop: k0, want: map[accKey]*accState{k0: nil, k1: a1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d dispatch
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
	var d dispatch
	if d.oldest() != nil || d.inFlight() != 0 || d.land(1) != nil {
		t.Fatal("the zero value has a sealed batch")
	}
	for _, id := range []uint64{7, 3, 5} {
		d.fly(&flight{b: &sealedBatch{ID: id}, bytes: int(id) * 10})
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

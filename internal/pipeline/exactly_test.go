package pipeline

import (
	"reflect"
	"testing"

	"sink/config"
	"sink/internal/batch"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/writer"
)

// TestCanonicalBatchOrder: rows that arrive interleaved across partitions
// are sent grouped by (topic, partition), each partition in arrival
// (offset) order, which is the order a rebuild reads them back in; the
// token is the one the ranges give.
func TestCanonicalBatchOrder(t *testing.T) {
	p := &Pipeline{cfg: &config.Config{Delivery: config.DeliveryExactlyOnce}}
	p.initExactly()
	ts := &tableState{t: writer.NewTable("db", "t", nil, nil)}
	a := &accState{key: accKey{table: ts}}
	a0, a1, b1 := offsets.TP{Topic: "a", Partition: 0}, offsets.TP{Topic: "a", Partition: 1}, offsets.TP{Topic: "b", Partition: 1}
	for _, tp := range []offsets.TP{b1, a0, b1, a0, a1} {
		p.eoRow(a, tp)
	}
	b := &sealedBatch{ID: 7, Ranges: []batch.Range{{TP: b1, First: 10, Last: 11}, {TP: a0, First: 3, Last: 4}, {TP: a1, First: 0, Last: 0}}}
	p.eoSealed(a, b)
	eb := p.eo.batches[7]
	// rows 0..4 are b1, a0, b1, a0, a1: a0's rows (1, 3), a1's (4), b1's (0, 2)
	if want := []int{1, 3, 4, 0, 2}; !reflect.DeepEqual(eb.perm, want) {
		t.Fatalf("perm %v, want %v", eb.perm, want)
	}
	want := eos.Token("db.t", []eos.Range{{TP: a0, First: 3, Last: 4}, {TP: a1, First: 0, Last: 0}, {TP: b1, First: 10, Last: 11}})
	if eb.token != want {
		t.Fatalf("token %s, want %s", eb.token, want)
	}
	if _, left := p.eo.rows[a]; left {
		t.Fatal("the open batch's row partitions were not reset at seal")
	}
	// One partition, or partitions already in order: no permutation.
	for _, tp := range []offsets.TP{a0, a0, a1} {
		p.eoRow(a, tp)
	}
	p.eoSealed(a, &sealedBatch{ID: 8, Ranges: []batch.Range{{TP: a0, First: 5, Last: 6}, {TP: a1, First: 1, Last: 1}}})
	if perm := p.eo.batches[8].perm; perm != nil {
		t.Fatalf("rows in order: perm %v, want none", perm)
	}
}

// TestGivenUpBeforeRecorded: a sealed batch not yet recorded that holds a
// partition the member gave up is never inserted, even if the partition
// comes back, and the member stops; a recorded one is left alone.
func TestGivenUpBeforeRecorded(t *testing.T) {
	p := &Pipeline{cfg: &config.Config{Delivery: config.DeliveryExactlyOnce}, flights: map[uint64]*flight{}, accs: map[accKey]*accState{}}
	p.initExactly()
	ts := &tableState{t: writer.NewTable("db", "t", nil, nil)}
	a0, a1 := offsets.TP{Topic: "a", Partition: 0}, offsets.TP{Topic: "a", Partition: 1}
	for id, tps := range map[uint64][]offsets.TP{1: {a0, a1}, 2: {a0}} {
		b := &sealedBatch{ID: id}
		for _, tp := range tps {
			b.Ranges = append(b.Ranges, batch.Range{TP: tp, First: 0, Last: 0})
		}
		p.flights[id] = &flight{b: b, table: ts}
		p.eoSealed(&accState{key: accKey{table: ts}}, b)
	}
	p.eo.batches[2].recorded = true
	p.eoRelease([]offsets.TP{a1})
	if !p.eo.batches[1].stale || p.eo.batches[2].stale || p.fatal == nil {
		t.Fatalf("stale %v/%v, fatal %v; want batch 1 stale, batch 2 not, and a stop", p.eo.batches[1].stale, p.eo.batches[2].stale, p.fatal)
	}
	// a1 assigned again: batch 1 is still refused.
	p.eo.ledgers[a0], p.eo.ledgers[a1] = &eos.Ledger{Offset: 0}, &eos.Ledger{Offset: 0}
	if _, _, err := p.eoIntent(nil, ts, p.flights[1].b); err == nil {
		t.Fatal("a stale batch was recorded")
	}
}

package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/offsets"
)

// lastAccPipeline is a pipeline of one route whose batches are sealed only
// by a table change or a revoke (max_rows far away), one batch per
// partition, and the open-batch key of unitTP.
func lastAccPipeline(t *testing.T) (*Pipeline, *evolvingSink, accKey) {
	t.Helper()
	cfg := unitConfig(t, "")
	cfg.Batch.MaxRows = 1000
	cfg.Batch.IgnorePartitions = false // a batch per partition: forget drops it
	sink := &evolvingSink{fakeSink: newFakeSink(nil), cols: []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}}}
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	p.Attach(newFakeSource())
	return p, sink, accKey{table: p.cat.Table("db.t"), tp: unitTP}
}

func lastAccRecord(offset int64) *kgo.Record {
	return &kgo.Record{Topic: unitTopic, Offset: offset, Value: []byte(rows(int(offset), 1)[0]), Timestamp: time.Now()}
}

// A table change in the middle of a partition's records seals the open
// batch and drops its accumulator: the next record of the same partition
// must start a new batch in the map, not go on filling the sealed one that
// accFor answered for the record before.
func TestAccForAfterSealMidChunk(t *testing.T) {
	p, sink, key := lastAccPipeline(t)
	ctx := context.Background()
	for i := range int64(3) {
		if err, held := p.handleRecord(ctx, time.Now(), unitTP, lastAccRecord(i)); err != nil || held {
			t.Fatalf("record %d: err %v, held %v", i, err, held)
		}
	}
	old := p.disp.accs[key]
	if old == nil || old.acc.Data().Rows() != 3 {
		t.Fatalf("open batch before the change: %v", old)
	}
	// The table gains a column; its re-read is applied.
	sink.addColumn("added", "Nullable(String)")
	p.cat.DescribeAll(ctx)
	(<-p.inbox).Apply(ctx) // the re-read, applied
	if p.fatal != nil {
		t.Fatal(p.fatal)
	}
	if _, ok := p.disp.accs[key]; ok {
		t.Fatal("the table change left the sealed batch's accumulator in the map")
	}
	if err, held := p.handleRecord(ctx, time.Now(), unitTP, lastAccRecord(3)); err != nil || held {
		t.Fatalf("record after the change: err %v, held %v", err, held)
	}
	cur := p.disp.accs[key]
	switch {
	case cur == nil:
		t.Fatal("the record after the change went to an accumulator no longer in the map")
	case cur == old:
		t.Fatal("the record after the change went to the sealed batch's accumulator")
	case cur.acc.Data().Rows() != 1:
		t.Fatalf("new batch holds %d rows, want 1", cur.acc.Data().Rows())
	case old.acc.Data().Rows() != 0:
		t.Fatalf("the sealed accumulator holds %d rows after the change, want 0", old.acc.Data().Rows())
	}
	var sealed int
	for _, f := range p.disp.flights {
		sealed += f.b.Rows()
	}
	if sealed != 3 {
		t.Fatalf("%d rows sealed by the change, want 3", sealed)
	}
}

// A revoked partition's empty accumulator leaves the map (forget); when
// the partition comes back, its records must fill an accumulator in the
// map, which the timer, the flush and the next seal see.
func TestAccForAfterForget(t *testing.T) {
	p, _, key := lastAccPipeline(t)
	ctx := context.Background()
	a := p.accFor(key.table, unitTP)
	if !a.acc.Empty() {
		t.Fatal("fresh accumulator not empty")
	}
	p.forget([]offsets.TP{unitTP})
	if _, ok := p.disp.accs[key]; ok {
		t.Fatal("forget kept the revoked partition's empty accumulator")
	}
	if err, held := p.handleRecord(ctx, time.Now(), unitTP, lastAccRecord(0)); err != nil || held {
		t.Fatalf("record: err %v, held %v", err, held)
	}
	if cur := p.disp.accs[key]; cur == nil || cur == a || cur.acc.Data().Rows() != 1 {
		t.Fatalf("after the partition came back, map holds %v (old %p), want a new batch of 1 row", cur, a)
	}
}

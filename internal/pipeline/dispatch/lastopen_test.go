package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/offsets"
	"sink/internal/tables"
)

var testTP = offsets.TP{Topic: "events", Partition: 0}

// lastOpenDispatch is the dispatch of one route into db.t whose batches
// are sealed only by a table change or a revoke (max_rows far away), one
// batch per partition, and the open-batch key of testTP. Its INSERTs are
// never started: a sealed batch stays in flight.
func lastOpenDispatch(t *testing.T) (*Dispatch, *tables.Route, key) {
	t.Helper()
	cfg, err := config.Parse([]byte(`
name: unit
kafka:
  topics: [events]
clickhouse:
  database: db
routes:
  - topic: events
    table: t
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Batch.MaxRows = 1000
	cfg.Batch.MaxWait = time.Hour
	cfg.Batch.IgnorePartitions = false // a batch per partition: Forget drops it
	d := New(cfg, Deps{Owner: &testOwner{}, Tracker: testTracker{}, Delivery: testDelivery{}, Log: zerolog.Nop(), Now: time.Now})
	cat, err := tables.Open(context.Background(), cfg, tables.Options{Sink: testDescriber{}, Owner: testTablesOwner{d},
		Log: zerolog.Nop(), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	d.Catalog = cat
	rs, err := cat.RouteFor(context.Background(), "events")
	if err != nil {
		t.Fatal(err)
	}
	return d, rs, key{table: rs.Table(), tp: testTP}
}

// add decodes a record at offset into its open batch, as the intake does.
func add(t *testing.T, d *Dispatch, rs *tables.Route, offset int64) {
	t.Helper()
	r := &kgo.Record{Topic: testTP.Topic, Offset: offset, Value: []byte(`{"id":1,"s":"x"}`), Timestamp: time.Now()}
	a := d.Open(rs.Table(), testTP)
	if err := rs.Plan().Append(a.Block(), r); err != nil {
		t.Fatalf("record %d: %v", offset, err)
	}
	d.Added(context.Background(), time.Now(), a, testTP, r)
}

// A table change in the middle of a partition's records seals the open
// batch and drops it: the next record of the same partition must start a
// new batch in the map, not go on filling the sealed one that Open
// answered for the record before.
func TestOpenAfterSealMidChunk(t *testing.T) {
	d, rs, k := lastOpenDispatch(t)
	ctx := context.Background()
	for i := range int64(3) {
		add(t, d, rs, i)
	}
	old := d.q.accs[k]
	if old == nil || old.acc.Data().Rows() != 3 {
		t.Fatalf("open batch before the change: %v", old)
	}
	// The table's columns change (the catalog reshapes its batches first).
	d.Reshape(ctx, rs.Table())
	if _, ok := d.q.accs[k]; ok {
		t.Fatal("the table change left the sealed batch in the map")
	}
	add(t, d, rs, 3)
	cur := d.q.accs[k]
	switch {
	case cur == nil:
		t.Fatal("the record after the change went to a batch no longer in the map")
	case cur == old:
		t.Fatal("the record after the change went to the sealed batch")
	case cur.acc.Data().Rows() != 1:
		t.Fatalf("new batch holds %d rows, want 1", cur.acc.Data().Rows())
	case old.acc.Data().Rows() != 0:
		t.Fatalf("the sealed batch holds %d rows after the change, want 0", old.acc.Data().Rows())
	}
	var sealed int
	for _, f := range d.q.flights {
		sealed += f.b.Rows()
	}
	if sealed != 3 {
		t.Fatalf("%d rows sealed by the change, want 3", sealed)
	}
}

// A revoked partition's empty open batch leaves the map (Forget); when
// the partition comes back, its records must fill a batch in the map,
// which the timer, the flush and the next seal see.
func TestOpenAfterForget(t *testing.T) {
	d, rs, k := lastOpenDispatch(t)
	a := d.Open(k.table, testTP)
	if !a.acc.Empty() {
		t.Fatal("fresh open batch not empty")
	}
	d.Forget([]offsets.TP{testTP})
	if _, ok := d.q.accs[k]; ok {
		t.Fatal("Forget kept the revoked partition's empty open batch")
	}
	add(t, d, rs, 0)
	if cur := d.q.accs[k]; cur == nil || cur == a || cur.acc.Data().Rows() != 1 {
		t.Fatalf("after the partition came back, map holds %v (old %p), want a new batch of 1 row", cur, a)
	}
}

// testOwner starts no goroutine: a batch sealed stays in flight.
type testOwner struct{ ids uint64 }

func (o *testOwner) Spawn(func())                                  {}
func (o *testOwner) Post(Event)                                    {}
func (o *testOwner) NewID() uint64                                 { o.ids++; return o.ids }
func (o *testOwner) Blocked(*Batch) bool                           { return false }
func (o *testOwner) Landed(context.Context, *tables.Table, uint64) {}
func (o *testOwner) Failed(uint64, error)                          {}

type testTracker struct{}

func (testTracker) Ack(uint64, []offsets.TP) {}

// testDelivery inserts each batch as it is.
type testDelivery struct{}

func (testDelivery) OnSeal(*tables.Table, *Batch) {}
func (testDelivery) Waiting(*tables.Table) bool   { return false }
func (testDelivery) OnAck(*tables.Table, uint64)  {}
func (testDelivery) BeforeInsert(ctx context.Context, _ *tables.Table, b *Batch) (context.Context, chschema.Block, bool, error) {
	return ctx, b.Data, false, nil
}

type testDescriber struct{}

func (testDescriber) Describe(context.Context, string, string) ([]chschema.ColumnSchema, error) {
	return []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}}, nil
}

// testTablesOwner tells the dispatch of its tables, as the pipeline does.
type testTablesOwner struct{ d *Dispatch }

func (o testTablesOwner) Spawn(func())                                 {}
func (o testTablesOwner) Described(tables.Result)                      {}
func (o testTablesOwner) Stopping() bool                               { return false }
func (o testTablesOwner) Reshape(ctx context.Context, t *tables.Table) { o.d.Reshape(ctx, t) }
func (o testTablesOwner) TableAdded(t *tables.Table)                   { o.d.TableAdded(t) }
func (o testTablesOwner) TableBounded(t *tables.Table)                 { o.d.Rebound(t) }

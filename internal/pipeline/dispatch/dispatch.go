// Package dispatch is the batches on their way to ClickHouse: the open
// batches the decoded rows go to (one per table, or per table and
// partition), their seal (at their triggers, or when the cadence says:
// cadence.go), each table's queue of sealed batches and its insert slots
// (clickhouse.max_in_flight), the INSERT of each on a goroutine of its own
// (retried by the Sink as the identical block), and what its outcome
// changes: the table's stats, the cadence, the next batches started; the
// offsets a batch held are then handled by the pipeline (Owner.Landed).
//
// Dispatch reaches the rest through the interfaces it declares: Inserter
// (the Sink's INSERT), Delivery (what the delivery guarantee adds before
// and after an INSERT), and Owner (goroutines, events, unit ids, the
// dead-letter produces a batch waits for, the offsets of a batch in or
// failed). The tables are internal/tables' Catalog.
//
// Concurrency: a Dispatch belongs to the pipeline's owner goroutine, which
// calls every method. The INSERTs (and the parts reads of adaptive
// batching) run on goroutines of their own (Owner.Spawn), touch nothing of
// the owner's but atomic counters, and hand their outcome back as an
// Event (Owner.Post), which the owner applies.
package dispatch

import (
	"context"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/backoff"
	"sink/internal/batch"
	"sink/internal/cdc"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/metrics"
	"sink/internal/offsets"
	"sink/internal/pace"
	"sink/internal/tables"
)

// Inserter is the Sink's INSERT: it writes block into t as one INSERT and
// retries the same block until it succeeds or fails for good, calling
// onRetry before each wait and refresh on schema errors (see
// writer.Writer.Insert). It returns nil, the permanent error, or ctx's
// error once ctx ends. Per-insert settings (the exactly-once
// deduplication token) come in ctx (chtable.WithInsertSettings). Called
// from one goroutine per batch in flight, concurrently.
type Inserter interface {
	Insert(ctx context.Context, t *chtable.Table, block chschema.Block, batchID uint64,
		onRetry func(chtable.Attempt), refresh chtable.Refresh) error
}

// Delivery is what the delivery guarantee adds around a batch's INSERT
// (the pipeline's delivery: at-least-once, or exactly-once's intents).
type Delivery interface {
	// OnSeal notes that the open batch of b's id, of table t, was sealed
	// as b.
	OnSeal(t *tables.Table, b *Batch)
	// Waiting reports whether t's next batch must wait before its INSERT.
	Waiting(t *tables.Table) bool
	// BeforeInsert is the context and block b's INSERT uses; later means
	// b waits (back at the head of its queue: Requeue), an error that it
	// is never inserted.
	BeforeInsert(ctx context.Context, t *tables.Table, b *Batch) (context.Context, chschema.Block, bool, error)
	// OnAck notes that batch id of t is in.
	OnAck(t *tables.Table, id uint64)
}

// Event is an outcome handed back to the owner goroutine, which applies
// it there.
type Event interface{ Apply(ctx context.Context) }

// Owner is what dispatch asks of the connector it is part of.
type Owner interface {
	// Spawn runs f on a goroutine that the connector joins before the
	// ClickHouse pool closes (f uses the Sink).
	Spawn(f func())
	// Post hands e to the owner goroutine (dropped once the connector has
	// made its last commit).
	Post(e Event)
	// NewID is a unit id the tracker knows a batch's records by (the
	// dead-letter produces draw from the same ids).
	NewID() uint64
	// Blocked reports whether b holds a record after one of the same
	// partition still on its way to the dead-letter topic: it waits.
	Blocked(b *Batch) bool
	// Landed is told that batch id of t is in, and its offsets handled
	// (Tracker.Ack). Failed, that it never will be (err; nil for an
	// INSERT canceled at shutdown, which is no failure of the connector).
	Landed(ctx context.Context, t *tables.Table, id uint64)
	Failed(id uint64, err error)
}

// Tracker is where the offsets of a batch's records are marked handled
// once it is in (offsets.Tracker).
type Tracker interface {
	Ack(unit uint64, tps []offsets.TP)
}

// Deps are what a Dispatch works with.
type Deps struct {
	Sink    Inserter // a ServerNamer, PartsReader and cdc.Store too, when it can
	Catalog *tables.Catalog
	Owner   Owner
	Tracker Tracker
	// Delivery is the guarantee's hooks around each INSERT.
	Delivery Delivery
	// Allowance is each server's budget of INSERTs per minute (nil:
	// clickhouse.max_inserts_per_minute, or none).
	Allowance pace.Allowance
	Metrics   *metrics.Metrics
	Log       zerolog.Logger
	Now       func() time.Time
}

// The reasons the pipeline seals every batch, or those of partitions
// given up (batch.Reason): the budget counts them, never as over it.
const (
	Shutdown = batch.ReasonShutdown
	Pause    = batch.ReasonPause
	Revoke   = batch.ReasonRevoke
)

// Allowance is the budget of INSERTs per minute of each server
// (pace.Allowance): a fixed one, or a share computed across the pods that
// write to the same servers (internal/budget).
type Allowance = pace.Allowance

// Dispatch is the batches on their way to ClickHouse.
type Dispatch struct {
	Deps
	cfg     *config.Config
	fill    *cdc.Filler // a batch's unchanged TOASTed values, before its INSERT
	q       queues
	cadence Cadence
	ins     *inserts
	// the run's totals (Totals)
	totalRows, totalInserts int64
	// tps is the scratch of a landed batch's partitions (inserted), kept
	// so that an INSERT's ack allocates nothing.
	tps []offsets.TP
}

// New is the dispatch of cfg's batches over d. The pipeline gives it its
// Catalog and Delivery before the first record (the catalog tells it of
// each table as it opens, and exactly-once's delivery asks it for its
// batches).
func New(cfg *config.Config, d Deps) *Dispatch {
	x := &Dispatch{Deps: d, cfg: cfg}
	x.fill = cdc.NewFiller(d.Sink, backoff.Policy{Initial: cfg.ClickHouse.RetryInitial, Max: cfg.ClickHouse.RetryMax, Jitter: backoff.EqualJitter}, d.Log)
	x.cadence = newCadence(cfg, x)
	x.ins = newInserts(cfg, x)
	return x
}

// Open is the open batch a record of ts from tp goes to, opened when
// there is none.
func (d *Dispatch) Open(ts *tables.Table, tp offsets.TP) *Open {
	k := key{table: ts}
	if !d.cfg.Batch.IgnorePartitions {
		k.tp = tp
	}
	if a := d.q.acc(k); a != nil {
		return a
	}
	a := &Open{acc: batch.NewAccumulator(d.cadence.Policy(ts), d.q.block(ts)), id: d.Owner.NewID(), key: k}
	d.q.open(a)
	return a
}

// ID is the unit id the open batch's records are tracked under.
func (a *Open) ID() uint64 { return a.id }

// Block is the open batch's rows.
func (a *Open) Block() *decode.Block { return a.acc.Data() }

// Table is the open batch's table.
func (a *Open) Table() *tables.Table { return a.key.table }

// Added accounts a record whose row was appended to a's block (and which
// the tracker knows): its timestamp for the batch's latency, and the
// batch's triggers, sealing it when full.
func (d *Dispatch) Added(ctx context.Context, now time.Time, a *Open, tp offsets.TP, r *kgo.Record) {
	if ts := r.Timestamp.UnixNano(); ts > 0 && (a.oldest == 0 || ts < a.oldest) {
		a.oldest = ts // a record without timestamp (at or before the epoch) does not count
	}
	opening := a.acc.Empty()
	if full, why := a.acc.Add(now, tp, r.Offset, r.LeaderEpoch); full {
		d.seal(ctx, a, why)
	} else if opening {
		d.cadence.Opened(a, now)
	}
}

// drop removes the open batch a, from the cadence too.
func (d *Dispatch) drop(a *Open) {
	d.q.drop(a.key)
	d.cadence.Forget(a)
}

// seal closes a's open batch and queues it for insert.
func (d *Dispatch) seal(ctx context.Context, a *Open, why batch.Reason) {
	ts := a.key.table
	b := a.acc.Seal(d.Now(), a.id, why, d.q.block(ts))
	if b == nil {
		return
	}
	a.id = d.Owner.NewID()
	d.cadence.Sealed(a, b)
	d.Delivery.OnSeal(ts, b)
	ts.Metrics().Sealed(why)
	// Drift first: the fields it notes name the likely source of a
	// column that FlushDefaults finds unfilled.
	d.Catalog.Evolution().FlushDrift(ts)
	d.Catalog.FlushDefaults(ts)
	d.q.enqueue(&flight{b: b, table: ts, tab: ts.Target(), bytes: b.Data.Bytes(), oldest: a.oldest})
	a.oldest = 0
	d.Pump(ctx, ts)
}

// SealAll seals every open batch (a shutdown, a pause).
func (d *Dispatch) SealAll(ctx context.Context, why batch.Reason) {
	d.q.eachOpen(func(a *Open) { d.seal(ctx, a, why) })
}

// SealHolding seals the open batches that hold records of tps (a revoke)
// and returns the ids of every sealed batch not yet acknowledged that
// holds some.
func (d *Dispatch) SealHolding(ctx context.Context, tps []offsets.TP, why batch.Reason) []uint64 {
	d.q.eachOpen(func(a *Open) {
		if slices.ContainsFunc(tps, a.acc.Holds) {
			d.seal(ctx, a, why)
		}
	})
	var ids []uint64
	d.q.eachSealed(func(f *flight) {
		if slices.ContainsFunc(tps, f.b.Holds) {
			ids = append(ids, f.b.ID)
		}
	})
	return ids
}

// SealTable seals t's open batches that hold rows (a TRUNCATE waits for
// them).
func (d *Dispatch) SealTable(ctx context.Context, t *tables.Table) {
	d.q.eachOpenOf(t, func(a *Open) {
		if !a.acc.Empty() {
			d.seal(ctx, a, batch.ReasonTruncate)
		}
	})
}

// Pending counts t's batches queued or in their INSERT.
func (d *Dispatch) Pending(t *tables.Table) int { return d.q.queued(t) + d.q.inserting(t) }

// Reshape seals t's open batches with the columns they were built for and
// forgets its reusable blocks: its columns change next.
func (d *Dispatch) Reshape(ctx context.Context, t *tables.Table) {
	d.q.eachOpenOf(t, func(a *Open) {
		d.seal(ctx, a, batch.ReasonSchema)
		d.drop(a)
	})
	d.q.forgetBlocks(t)
}

// Forget drops the empty open batches of tps, which this member no longer
// owns (with one batch per partition).
func (d *Dispatch) Forget(tps []offsets.TP) {
	if d.cfg.Batch.IgnorePartitions {
		return
	}
	for _, tp := range tps {
		d.q.eachOpen(func(a *Open) {
			if a.key.tp == tp && a.acc.Empty() {
				d.drop(a)
			}
		})
	}
}

// TableAdded gives a new table its cadence.
func (d *Dispatch) TableAdded(t *tables.Table) { d.cadence.Added(t) }

// Rebound follows t's latency bound, which a route resolved per topic
// tightened: the cadence is rebuilt with the new bound, and the open
// batches get the new triggers.
func (d *Dispatch) Rebound(t *tables.Table) {
	d.cadence.Bounded(t)
	pol := d.cadence.Policy(t)
	d.q.eachOpenOf(t, func(a *Open) { a.acc.SetPolicy(pol) })
}

// repolicy gives t's open batches their triggers now (the cadence
// changed them), and tells the cadence again of those that hold rows.
func (d *Dispatch) repolicy(t *tables.Table) {
	pol := d.cadence.Policy(t)
	d.q.eachOpenOf(t, func(a *Open) {
		a.acc.SetPolicy(pol)
		if !a.acc.Empty() {
			d.cadence.Opened(a, d.Now()) // the new wait; opened stays
		}
	})
}

// Due seals the open batches whose time has come (the cadence decides).
func (d *Dispatch) Due(ctx context.Context) {
	d.cadence.Due(d.Now(), func(a *Open, why batch.Reason) { d.seal(ctx, a, why) })
}

// Next is how long until an open batch is due.
func (d *Dispatch) Next(now time.Time) time.Duration { return d.cadence.Next(now) }

// Tick is the cadence's periodic look (adaptive batching reads the
// tables' parts).
func (d *Dispatch) Tick(ctx context.Context) { d.cadence.Tick(ctx) }

// Pump starts inserts while the table has free slots, in seal order. A
// batch that holds records after a bad record still on its way to the
// dead-letter topic waits for it (Owner.Blocked), and so do the batches
// queued behind it.
func (d *Dispatch) Pump(ctx context.Context, ts *tables.Table) {
	for d.q.inserting(ts) < d.cfg.ClickHouse.MaxInFlight && d.q.queued(ts) > 0 && !d.Delivery.Waiting(ts) {
		b := d.q.next(ts)
		if d.Owner.Blocked(b) {
			return
		}
		if d.q.inserting(ts) > 0 && len(b.Data.Unfilled()) > 0 {
			// Its missing values are read back from the table once every
			// earlier batch of it is in (internal/cdc).
			return
		}
		tab := d.q.start(ts).tab
		ictx, blk, later, err := d.Delivery.BeforeInsert(ctx, ts, b)
		if later {
			return // back at the head of the queue (Requeue), its slot free
		}
		if err != nil {
			// Never inserted: the batch fails (unless, under exactly-once,
			// a loss of one of its partitions drops it first).
			d.ins.refused(b.ID, err)
			continue
		}
		d.ins.start(ictx, ts, d.q.stats(ts), tab, b, blk)
	}
}

// PumpAll pumps every table (a dead-letter produce that batches waited
// for is settled).
func (d *Dispatch) PumpAll(ctx context.Context) {
	d.Catalog.EachTable(func(ts *tables.Table) { d.Pump(ctx, ts) })
}

// Requeue puts b back at the head of ts's queue, to be started again
// later; the insert slot it took is free again.
func (d *Dispatch) Requeue(ts *tables.Table, b *Batch) { d.q.requeue(ts, b) }

// EachSealed calls fn with every sealed batch not yet acknowledged.
func (d *Dispatch) EachSealed(fn func(t *tables.Table, b *Batch)) {
	d.q.eachSealed(func(f *flight) { fn(f.table, f.b) })
}

// EachOpen calls fn with the id and ranges of every open batch that holds
// rows.
func (d *Dispatch) EachOpen(fn func(id uint64, ranges []batch.Range)) {
	d.q.eachOpen(func(a *Open) {
		if !a.acc.Empty() {
			fn(a.id, a.acc.Ranges())
		}
	})
}

// Withdraw forgets sealed batch id, never to be inserted, and returns its
// table, its rows and its place in its table's queue (0 at the head, -1
// when it had left the queue for its INSERT).
func (d *Dispatch) Withdraw(id uint64) (*tables.Table, int, int) {
	f, at := d.q.withdraw(id)
	return f.table, f.b.Rows(), at
}

// Discard empties open batch id, which goes on under a new id, and returns
// the rows it held.
func (d *Dispatch) Discard(id uint64) int {
	var rows int
	d.q.eachOpen(func(a *Open) {
		if a.id != id {
			return
		}
		if b := a.acc.Seal(d.Now(), a.id, batch.ReasonRevoke, d.q.block(a.key.table)); b != nil {
			rows = b.Rows()
		}
		a.id = d.Owner.NewID()
		a.oldest = 0
	})
	return rows
}

// Abandon withdraws the queued batches that blocked picks, never to be
// inserted (their records wait for a dead-letter produce that failed for
// good; blocked names that record); they stay unacknowledged.
func (d *Dispatch) Abandon(blocked func(b *Batch) (after string, ok bool)) {
	d.Catalog.EachTable(func(ts *tables.Table) {
		d.q.withdrawQueued(ts, func(b *Batch) bool {
			after, ok := blocked(b)
			if ok {
				d.Log.Warn().Str("table", ts.Name()).Uint64("batch", b.ID).Int("rows", b.Rows()).
					Str("after", after).Msg("batch not inserted: it holds records after a record the dead-letter topic did not take")
			}
			return ok
		})
	})
}

// InFlight counts the sealed batches not yet acknowledged; OpenBatches,
// the open batches that hold rows; Bytes, the bytes of both.
func (d *Dispatch) InFlight() int    { return d.q.inFlight() }
func (d *Dispatch) OpenBatches() int { return d.q.openBatches() }
func (d *Dispatch) Bytes() int       { return d.q.bytes() }

package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/tables"
)

// inserts are the INSERTs of the sealed batches: each on a goroutine of
// its own (Owner.Spawn), at most chtable.InsertConns of them holding a
// ClickHouse connection at once, each handing its outcome back as an
// event: Inserted or Failed.
type inserts struct {
	d *Dispatch
	// conns are the INSERTs that may hold a ClickHouse connection at once
	// (chtable.InsertConns): the others wait for a slot here, in no hurry
	// and without an error, instead of timing out in the driver's pool.
	conns chan struct{}
}

func newInserts(cfg *config.Config, d *Dispatch) *inserts {
	return &inserts{d: d, conns: make(chan struct{}, chtable.InsertConns(cfg.ClickHouse.MaxInFlight))}
}

// Inserted is a batch whose INSERT succeeded: how long it took, and for a
// target local batch the INSERT of each shard part (none for a table
// written with one INSERT).
type Inserted struct {
	d      *Dispatch
	id     uint64
	took   time.Duration
	shards []shardPart
}

// Apply lands the batch (Dispatch.inserted).
func (e Inserted) Apply(ctx context.Context) { e.d.inserted(ctx, e) }

// shardPart is one shard's INSERT of a batch.
type shardPart struct{ shard, rows int }

// Failed is a batch whose INSERT failed for good (or was never made: its
// delivery refused it), or was canceled at shutdown.
type Failed struct {
	d   *Dispatch
	id  uint64
	err error
}

// Apply forgets the batch (Dispatch.failed).
func (e Failed) Apply(ctx context.Context) { e.d.failed(ctx, e) }

// refused fails batch id, which its delivery refused, as an event of its
// own (the pump goes on with the batches behind it).
func (in *inserts) refused(id uint64, err error) {
	in.d.Owner.Spawn(func() { in.d.Owner.Post(Failed{d: in.d, id: id, err: err}) })
}

// start runs b's INSERT on a goroutine of its own.
func (in *inserts) start(ctx context.Context, ts *tables.Table, st *tableStats, tab *chtable.Table, b *Batch, blk chschema.Block) {
	in.d.Owner.Spawn(func() { in.insert(ctx, ts, st, tab, b, blk) })
}

// insert runs on its own goroutine and touches nothing of the owner's but
// its outcome (Owner.Post, and the table's re-read through the catalog's
// Refresh) and atomic counters. tab is the table's layout the batch was
// decoded for.
func (in *inserts) insert(ctx context.Context, ts *tables.Table, st *tableStats, tab *chtable.Table, b *Batch, blk chschema.Block) {
	d := in.d
	// Wait for a connection slot first: the wait is the sink's own queue,
	// not the INSERT's, so it is neither an attempt nor part of the
	// insert's duration (which adaptive batching reads as the server's).
	select {
	case in.conns <- struct{}{}:
		defer func() { <-in.conns }()
	case <-ctx.Done():
		d.Owner.Post(Failed{d: d, id: b.ID, err: ctx.Err()})
		return
	}
	start := time.Now()
	if len(b.Data.Unfilled()) > 0 {
		if err := d.fill.Fill(ctx, tab, b.Data); err != nil {
			d.Owner.Post(Failed{d: d, id: b.ID, err: err})
			return
		}
	}
	// A target local route's batch is one INSERT per shard it has rows for:
	// the status page counts those, as the shards' query logs do.
	var (
		mu     sync.Mutex
		shards []shardPart
	)
	ctx = chtable.WithShardInserted(ctx, func(shard, rows int) {
		mu.Lock()
		shards = append(shards, shardPart{shard: shard, rows: rows})
		mu.Unlock()
	})
	err := d.Sink.Insert(ctx, tab, blk, b.ID, in.onRetry(ts, st, tab, b), d.Catalog.Refresh(ts))
	if err != nil {
		d.Owner.Post(Failed{d: d, id: b.ID, err: err})
		return
	}
	mu.Lock()
	e := Inserted{d: d, id: b.ID, took: time.Since(start), shards: shards}
	mu.Unlock()
	d.Owner.Post(e)
}

// onRetry counts and logs a failed attempt of b's INSERT into ts (on the
// INSERT's goroutine).
func (in *inserts) onRetry(ts *tables.Table, st *tableStats, tab *chtable.Table, b *Batch) func(chtable.Attempt) {
	return func(at chtable.Attempt) {
		st.retries.Add(1)
		st.lastFail.Store(newInsertFailure(at, time.Now()))
		ts.Metrics().Retry(at.Code)
		if at.Code == chtable.CodeTooManyParts {
			st.tooManyParts.Add(1)
		}
		in.d.Log.Warn().Str("table", tab.FullName()).Uint64("batch", b.ID).Int("rows", b.Rows()).
			Int("attempt", at.N).Int32("code", at.Code).Str("class", at.Class.String()).
			Dur("retry_in", at.Wait).Err(at.Err).Msg("insert failed, retrying the same block")
	}
}

// failed handles a batch whose INSERT failed for good: it stays
// unacknowledged in the tracker, so its offsets (and everything after
// them) are never committed, and it is consumed again on restart; the
// connector stops (a canceled INSERT is the shutdown's own doing).
func (d *Dispatch) failed(ctx context.Context, e Failed) {
	f := d.q.land(e.id)
	if f == nil {
		return
	}
	if errors.Is(e.err, context.Canceled) {
		e.err = nil
	}
	// The slot is free: start the batches queued behind this one, as the
	// flush after a failure does with every open batch. Left in the queue
	// they would hold the flush until shutdown_timeout.
	d.Pump(ctx, f.table)
	d.Owner.Failed(e.id, e.err)
}

// inserted handles a batch whose rows are in: the one path after an
// INSERT succeeds. The batch lands: its offsets are handled (the tracker,
// the delivery), its table's stats and the cadence told, its block kept
// for reuse, the next batches of the table started; then the owner
// commits and tells whoever waited for it (Owner.Landed).
func (d *Dispatch) inserted(ctx context.Context, e Inserted) {
	f := d.q.land(e.id)
	if f == nil {
		return
	}
	ts, rows := f.table, f.b.Rows()
	d.tps = d.tps[:0]
	for _, r := range f.b.Ranges {
		d.tps = append(d.tps, r.TP)
	}
	d.Tracker.Ack(e.id, d.tps)
	d.Delivery.OnAck(ts, e.id)
	st := d.q.stats(ts)
	now := d.Now()
	st.rows += int64(rows)
	st.inserts++
	st.lastInsert = now
	st.histAdd(now, rows, e.shards)
	d.totalRows += int64(rows)
	d.totalInserts++
	var oldest time.Time // zero: no record of the batch had a timestamp
	if f.oldest > 0 {
		oldest = time.Unix(0, f.oldest)
	}
	ts.Metrics().Inserted(rows, e.took, oldest)
	d.cadence.Inserted(ts, f.b, e.took, now)
	d.Log.Debug().Str("table", ts.Name()).Uint64("batch", e.id).Int("rows", rows).Int("bytes", f.bytes).
		Str("reason", f.b.Reason.String()).Int("partitions", len(f.b.Ranges)).Dur("took", e.took).
		Dur("age", d.Now().Sub(f.b.Opened)).Msg("inserted")
	if f.tab == ts.Target() { // a block of the current layout
		d.q.reuse(ts, f.b.Data, d.cfg.ClickHouse.MaxInFlight)
	}
	d.Pump(ctx, ts)
	d.Owner.Landed(ctx, ts, e.id)
}

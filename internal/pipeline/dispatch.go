package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"sink/internal/batch"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/offsets"
	"sink/internal/status"
	"sink/internal/tables"
)

// sealedBatch is a sealed batch of decoded rows, waiting for or in its INSERT.
type sealedBatch = batch.Batch[*decode.Block]

// insertStats are the INSERTs of one table so far, for the summary, the
// status snapshot (admin.go) and adaptive batching. Owned by the owner
// goroutine, but for the atomics, which insert goroutines write.
type insertStats struct {
	rows, inserts int64
	retries       atomic.Int64
	lastFail      atomic.Pointer[insertFailure] // the last retried INSERT error
	// tooManyParts counts the TOO_MANY_PARTS retries (adaptive.go reads it)
	tooManyParts atomic.Int64
	// the successful inserts of the last minutes and the last one's time
	hist       status.History
	lastInsert time.Time
	// shardHist splits hist per shard for a target local table (by shard
	// number); nil until its first batch went to shards.
	shardHist map[int]*status.History
}

// accKey names an accumulator: per table, or per table-partition when
// batch.ignore_partitions is false.
type accKey struct {
	table *tables.Table
	tp    offsets.TP
}

type accState struct {
	acc    *batch.Accumulator[*decode.Block]
	id     uint64 // the unit id the open batch's records are tracked under
	key    accKey
	oldest int64 // unix nanoseconds of the open batch's oldest record timestamp; 0: none known
	// active is when the batch last opened or was sealed, for the demand a
	// shared budget is told (budget.go); zero without a budget.
	active time.Time
}

type flight struct {
	b      *sealedBatch
	table  *tables.Table
	tab    *chtable.Table // the table's columns the batch was decoded for
	bytes  int
	oldest int64 // accState.oldest at seal time: the start of the batch's end-to-end latency
	// started: taken from its table's queue for its INSERT (start), so it
	// holds one of the table's insert slots until it lands
	started bool
}

// dispatch is the batches on their way to ClickHouse: the open ones, one
// accumulator per accKey; the sealed ones from their seal to their ack
// (flights); and each table's queue of sealed batches waiting for an
// insert slot, with the count of its batches out for their INSERT. The
// zero value is empty. Owned by the Run goroutine; every read and change
// goes through these calls.
type dispatch struct {
	accs map[accKey]*accState
	// last is acc's last answer (nil: none), the open batch of last.key;
	// drop clears it when that entry leaves accs, so it never hands out
	// an accumulator no longer in the map.
	last    *accState
	flights map[uint64]*flight // sealed batches not yet acknowledged
	queues  map[*tables.Table]*sealedQueue
}

// sealedQueue is one table's sealed batches on their way to an INSERT,
// with the blocks of the table's layout kept for reuse and the stats of
// its INSERTs.
type sealedQueue struct {
	waiting   []*sealedBatch  // sealed, waiting for an insert slot, in seal order
	inserting int             // taken from waiting (start), not landed yet
	free      []*decode.Block // reset blocks for reuse
	stats     insertStats
}

// acc is key's open batch, or nil.
func (d *dispatch) acc(key accKey) *accState {
	if a := d.last; a != nil && a.key == key {
		return a // the same partition's batch as the record before
	}
	a := d.accs[key]
	if a != nil {
		d.last = a
	}
	return a
}

// open adds a, the new open batch of a.key.
func (d *dispatch) open(a *accState) {
	if d.accs == nil {
		d.accs = map[accKey]*accState{}
	}
	d.accs[a.key] = a
	d.last = a
}

// drop removes the open batch of key.
func (d *dispatch) drop(key accKey) {
	delete(d.accs, key)
	if d.last != nil && d.last.key == key {
		d.last = nil
	}
}

// eachOpen calls fn with every open batch, empty or not, in no order. fn
// may seal its batch or drop it.
func (d *dispatch) eachOpen(fn func(a *accState)) {
	for _, a := range d.accs {
		fn(a)
	}
}

// eachOpenOf calls fn with every open batch of table ts, in no order. fn
// may seal its batch or drop it.
func (d *dispatch) eachOpenOf(ts *tables.Table, fn func(a *accState)) {
	for k, a := range d.accs {
		if k.table == ts {
			fn(a)
		}
	}
}

// fly adds f, a batch just sealed, to the ones not yet acknowledged.
func (d *dispatch) fly(f *flight) {
	if d.flights == nil {
		d.flights = map[uint64]*flight{}
	}
	d.flights[f.b.ID] = f
}

// enqueue adds f, a batch just sealed, at the tail of its table's queue.
func (d *dispatch) enqueue(f *flight) {
	d.fly(f)
	q := d.queue(f.table)
	q.waiting = append(q.waiting, f.b)
}

// block returns an empty block for ts, reusing a freed one when there is.
func (d *dispatch) block(ts *tables.Table) *decode.Block {
	q := d.queue(ts)
	if n := len(q.free); n > 0 {
		b := q.free[n-1]
		q.free = q.free[:n-1]
		return b
	}
	return ts.NewBlock()
}

// reuse keeps blk, a block of ts's current layout whose batch is in, for
// the next batches (at most keep blocks).
func (d *dispatch) reuse(ts *tables.Table, blk *decode.Block, keep int) {
	q := d.queue(ts)
	if len(q.free) <= keep {
		blk.Reset()
		q.free = append(q.free, blk)
	}
}

// forgetBlocks drops ts's blocks kept for reuse: its columns change.
func (d *dispatch) forgetBlocks(ts *tables.Table) { d.queue(ts).free = nil }

// stats is ts's INSERT stats.
func (d *dispatch) stats(ts *tables.Table) *insertStats { return &d.queue(ts).stats }

// queue is ts's queue, made on first use.
func (d *dispatch) queue(ts *tables.Table) *sealedQueue {
	q := d.queues[ts]
	if q == nil {
		if d.queues == nil {
			d.queues = map[*tables.Table]*sealedQueue{}
		}
		q = &sealedQueue{}
		d.queues[ts] = q
	}
	return q
}

// queued counts ts's batches waiting for an insert slot.
func (d *dispatch) queued(ts *tables.Table) int {
	if q := d.queues[ts]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// inserting counts ts's batches taken from its queue and not landed yet:
// the insert slots it uses.
func (d *dispatch) inserting(ts *tables.Table) int {
	if q := d.queues[ts]; q != nil {
		return q.inserting
	}
	return 0
}

// next is the batch at the head of ts's queue, the next to take an insert
// slot; nil when none waits.
func (d *dispatch) next(ts *tables.Table) *sealedBatch {
	if q := d.queues[ts]; q != nil && len(q.waiting) > 0 {
		return q.waiting[0]
	}
	return nil
}

// start takes the batch at the head of ts's queue for its INSERT: it
// holds an insert slot until it lands, or until requeue puts it back.
// It returns the batch's flight, nil when none waits.
func (d *dispatch) start(ts *tables.Table) *flight {
	q := d.queues[ts]
	if q == nil || len(q.waiting) == 0 {
		return nil
	}
	b := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	q.inserting++
	f := d.flights[b.ID]
	if f != nil {
		f.started = true
	}
	return f
}

// requeue puts b back at the head of ts's queue, to be started again
// later; its insert slot, when start gave it one, is free again.
func (d *dispatch) requeue(ts *tables.Table, b *sealedBatch) {
	q := d.queue(ts)
	if f := d.flights[b.ID]; f != nil && f.started {
		f.started = false
		q.inserting--
	}
	q.waiting = append([]*sealedBatch{b}, q.waiting...)
}

// land forgets sealed batch id, acknowledged or failed, and returns it,
// nil when it is not there; the insert slot it held is free.
func (d *dispatch) land(id uint64) *flight {
	f := d.flights[id]
	if f == nil {
		return nil
	}
	delete(d.flights, id)
	if f.started {
		d.queues[f.table].inserting--
	}
	return f
}

// withdraw forgets sealed batch id, never to be inserted, and returns it
// (nil when it is not there) with its place in its table's queue: 0 at
// the head, -1 when it had left the queue for its INSERT, whose slot is
// then free (what that INSERT answers lands nothing).
func (d *dispatch) withdraw(id uint64) (*flight, int) {
	f := d.land(id)
	if f == nil {
		return nil, -1
	}
	if f.started {
		return f, -1
	}
	q := d.queues[f.table]
	i := slices.Index(q.waiting, f.b)
	if i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
	}
	return f, i
}

// withdrawQueued forgets the batches of ts's queue that drop picks, never
// to be inserted; the others keep their order.
func (d *dispatch) withdrawQueued(ts *tables.Table, drop func(b *sealedBatch) bool) {
	q := d.queues[ts]
	if q == nil {
		return
	}
	kept := q.waiting[:0]
	for _, b := range q.waiting {
		if drop(b) {
			delete(d.flights, b.ID)
			continue
		}
		kept = append(kept, b)
	}
	clear(q.waiting[len(kept):])
	q.waiting = kept
}

// inFlight counts the sealed batches not yet acknowledged.
func (d *dispatch) inFlight() int { return len(d.flights) }

// eachSealed calls fn with every sealed batch not yet acknowledged, in no
// order.
func (d *dispatch) eachSealed(fn func(f *flight)) {
	for _, f := range d.flights {
		fn(f)
	}
}

// oldest is the sealed batch of the smallest id, nil when none is.
func (d *dispatch) oldest() *flight {
	var first *flight
	for _, f := range d.flights {
		if first == nil || f.b.ID < first.b.ID {
			first = f
		}
	}
	return first
}

// openBytes is the bytes of the open batches.
func (d *dispatch) openBytes() int {
	n := 0
	for _, a := range d.accs {
		n += a.acc.Data().Bytes()
	}
	return n
}

// bytes is the bytes of the open and the unacknowledged batches.
func (d *dispatch) bytes() int {
	n := d.openBytes()
	for _, f := range d.flights {
		n += f.bytes
	}
	return n
}

// openBatches counts the open batches that hold a record.
func (d *dispatch) openBatches() int {
	n := 0
	for _, a := range d.accs {
		if !a.acc.Empty() {
			n++
		}
	}
	return n
}

// accFor is the open batch a record of ts from tp goes to, opened when
// there is none.
func (p *Pipeline) accFor(ts *tables.Table, tp offsets.TP) *accState {
	key := accKey{table: ts}
	if !p.cfg.Batch.IgnorePartitions {
		key.tp = tp
	}
	if a := p.disp.acc(key); a != nil {
		return a
	}
	a := &accState{acc: batch.NewAccumulator(p.policy(ts), p.disp.block(ts)), id: p.newID(), key: key}
	p.disp.open(a)
	return a
}

// dropAcc removes the open batch of key, from the budget too.
func (p *Pipeline) dropAcc(key accKey) {
	p.disp.drop(key)
	if p.sched != nil {
		p.sched.Forget(key)
	}
}

// seal closes a's open batch and queues it for insert.
func (p *Pipeline) seal(writeCtx context.Context, a *accState, why batch.Reason) {
	ts := a.key.table
	b := a.acc.Seal(p.now(), a.id, why, p.disp.block(ts))
	if b == nil {
		return
	}
	a.id = p.newID()
	if p.sched != nil {
		p.budgetSealed(a, b.Sealed, why)
	}
	p.dlv.OnSeal(ts, b)
	ts.Metrics().Sealed(why)
	p.adaptSealed(ts, b)
	// Drift first: the fields it notes name the likely source of a
	// column that FlushDefaults finds unfilled.
	p.cat.Evolution().FlushDrift(ts)
	p.cat.FlushDefaults(ts)
	p.disp.enqueue(&flight{b: b, table: ts, tab: ts.Target(), bytes: b.Data.Bytes(), oldest: a.oldest})
	a.oldest = 0
	p.pump(writeCtx, ts)
}

// pump starts inserts while the table has free slots, in seal order. A
// batch that holds records after a bad record still on its way to the
// dead-letter topic waits for it (blockedBy), and so do the batches queued
// behind it.
func (p *Pipeline) pump(writeCtx context.Context, ts *tables.Table) {
	for p.disp.inserting(ts) < p.cfg.ClickHouse.MaxInFlight && p.disp.queued(ts) > 0 && !p.dlv.Waiting(ts) {
		b := p.disp.next(ts)
		if p.dlq.blockedBy(b, false) != nil {
			return
		}
		if p.disp.inserting(ts) > 0 && len(b.Data.Unfilled()) > 0 {
			// Its missing values are read back from the table once every
			// earlier batch of it is in (internal/cdc).
			return
		}
		tab := p.disp.start(ts).tab
		ctx, blk, later, err := p.dlv.BeforeInsert(writeCtx, ts, b)
		if later {
			return // back at the head of the queue (requeue), its slot free
		}
		if err != nil {
			// Never inserted: the batch fails (unless, under exactly-once,
			// a loss of one of its partitions drops it first).
			id := b.ID
			p.spawn(func() { p.post(insertFailed{p: p, id: id, err: err}) })
			continue
		}
		st := p.disp.stats(ts)
		p.spawn(func() { p.insert(ctx, ts, st, tab, b, blk) })
	}
}

// insert runs on its own goroutine (spawn) and touches nothing of the
// owner's but the inbox (post, and the table's re-read through the
// catalog's Refresh) and atomic counters. tab is the table's layout the
// batch was decoded for.
func (p *Pipeline) insert(ctx context.Context, ts *tables.Table, st *insertStats, tab *chtable.Table, b *sealedBatch, blk chschema.Block) {
	// Wait for a connection slot first: the wait is the sink's own queue,
	// not the INSERT's, so it is neither an attempt nor part of the
	// insert's duration (which adaptive batching reads as the server's).
	select {
	case p.conns <- struct{}{}:
		defer func() { <-p.conns }()
	case <-ctx.Done():
		p.post(insertFailed{p: p, id: b.ID, err: ctx.Err()})
		return
	}
	start := time.Now()
	onRetry := func(at chtable.Attempt) {
		st.retries.Add(1)
		st.lastFail.Store(newInsertFailure(at, time.Now()))
		ts.Metrics().Retry(at.Code)
		if at.Code == chtable.CodeTooManyParts {
			st.tooManyParts.Add(1)
		}
		p.log.Warn().Str("table", tab.FullName()).Uint64("batch", b.ID).Int("rows", b.Rows()).
			Int("attempt", at.N).Int32("code", at.Code).Str("class", at.Class.String()).
			Dur("retry_in", at.Wait).Err(at.Err).Msg("insert failed, retrying the same block")
	}
	if len(b.Data.Unfilled()) > 0 {
		if err := p.fill.Fill(ctx, tab, b.Data); err != nil {
			p.post(insertFailed{p: p, id: b.ID, err: err})
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
	err := p.w.Insert(ctx, tab, blk, b.ID, onRetry, p.cat.Refresh(ts))
	if err != nil {
		p.post(insertFailed{p: p, id: b.ID, err: err})
		return
	}
	mu.Lock()
	e := inserted{p: p, id: b.ID, took: time.Since(start), shards: shards}
	mu.Unlock()
	p.post(e)
}

// insertFailed handles a batch whose INSERT failed for good: it stays
// unacknowledged in the tracker, so its offsets (and everything after
// them) are never committed, and it is consumed again on restart; the
// connector stops (a canceled INSERT is the shutdown's own doing).
func (p *Pipeline) insertFailed(writeCtx context.Context, e insertFailed) {
	f := p.disp.land(e.id)
	if f == nil {
		return
	}
	if !errors.Is(e.err, context.Canceled) {
		p.failIf(e.err)
	}
	// The slot is free: start the batches queued behind this one, as
	// the flush after a failure does with every open batch. Left in
	// the queue they would hold the flush until shutdown_timeout.
	p.pump(writeCtx, f.table)
	p.revokeDone(e.id)
}

// inserted handles a batch whose rows are in: the one path after an
// INSERT succeeds. Dispatch lands it (its table's stats, the cadence, the
// block kept for reuse, the next batches of the table started), then the
// offsets it held are handled (the tracker, the delivery, a TRUNCATE
// waiting for the table's earlier rows), committed at once, and a revoke
// waiting for it is told.
func (p *Pipeline) inserted(writeCtx context.Context, e inserted) {
	f := p.disp.land(e.id)
	if f == nil {
		return
	}
	ts := f.table
	p.landed(writeCtx, f, e)
	p.tracker.Ack(e.id, f.b.TPs())
	p.dlv.OnAck(ts, e.id)
	p.failIf(p.truncs.Step(writeCtx, ts))
	// Commit at once: inserts are few by design, so one commit round trip
	// per insert is cheap, and it shrinks what a crash replays to the
	// batches still in flight (commit_interval still covers DLQ and skips).
	if p.revoke == nil {
		p.committer.commit()
	}
	p.revokeDone(e.id)
}

// landed records f's INSERT, which e says succeeded, and starts the next
// batches of its table.
func (p *Pipeline) landed(writeCtx context.Context, f *flight, e inserted) {
	ts, rows := f.table, f.b.Rows()
	st := p.disp.stats(ts)
	st.rows += int64(rows)
	st.inserts++
	st.lastInsert = p.now()
	p.budgetInserted(ts, f.b.Sealed, st.lastInsert)
	st.histAdd(st.lastInsert, rows, e.shards)
	p.stats.Rows += int64(rows)
	p.stats.Inserts++
	var oldest time.Time // zero: no record of the batch had a timestamp
	if f.oldest > 0 {
		oldest = time.Unix(0, f.oldest)
	}
	ts.Metrics().Inserted(rows, e.took, oldest)
	p.adaptInserted(ts, e.took)
	p.log.Debug().Str("table", ts.Name()).Uint64("batch", e.id).Int("rows", rows).Int("bytes", f.bytes).
		Str("reason", f.b.Reason.String()).Int("partitions", len(f.b.Ranges)).Dur("took", e.took).
		Dur("age", p.now().Sub(f.b.Opened)).Msg("inserted")
	if f.tab == ts.Target() { // a block of the current layout
		p.disp.reuse(ts, f.b.Data, p.cfg.ClickHouse.MaxInFlight)
	}
	p.pump(writeCtx, ts)
}

// histAdd counts an acknowledged batch of rows in the status history: as
// one INSERT, or as the INSERTs of its shard parts, each in its shard's
// history too.
func (st *insertStats) histAdd(at time.Time, rows int, shards []shardPart) {
	if len(shards) == 0 {
		st.hist.Add(at, rows)
		return
	}
	if st.shardHist == nil {
		st.shardHist = map[int]*status.History{}
	}
	for _, sp := range shards {
		st.hist.Add(at, sp.rows)
		h := st.shardHist[sp.shard]
		if h == nil {
			h = &status.History{}
			st.shardHist[sp.shard] = h
		}
		h.Add(at, sp.rows)
	}
}

// sealExpired seals every batch whose max_wait has passed.
func (p *Pipeline) sealExpired(writeCtx context.Context) {
	if p.sched != nil {
		p.budgetDue(writeCtx) // the budget decides (budget.go)
		return
	}
	now := p.now()
	p.disp.eachOpen(func(a *accState) {
		if d, ok := a.acc.UntilNext(now); ok && d <= 0 {
			p.seal(writeCtx, a, batch.ReasonWait)
		}
	})
}

// memUsed is the bytes held by open and unacknowledged batches, by bad
// records waiting for the dead-letter topic and by records waiting for the
// schema registry.
func (p *Pipeline) memUsed() int {
	return p.dlq.weight + p.held.bytes + p.disp.bytes()
}

package dispatch

import (
	"slices"
	"sync/atomic"
	"time"

	"sink/internal/batch"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/offsets"
	"sink/internal/status"
	"sink/internal/tables"
)

// Batch is a sealed batch of decoded rows, waiting for or in its INSERT.
type Batch = batch.Batch[*decode.Block]

// tableStats are the INSERTs of one table so far, for the summary, the
// status snapshot (status.go) and adaptive batching. Owned by the owner
// goroutine, but for the atomics, which insert goroutines write.
type tableStats struct {
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

// key names an accumulator: per table, or per table-partition when
// batch.ignore_partitions is false.
type key struct {
	table *tables.Table
	tp    offsets.TP
}

// Open is an open batch: the rows of one table (and partition, when
// batch.ignore_partitions is false) accumulated until the batch is sealed.
type Open struct {
	acc    *batch.Accumulator[*decode.Block]
	id     uint64 // the unit id the open batch's records are tracked under
	key    key
	oldest int64 // unix nanoseconds of the open batch's oldest record timestamp; 0: none known
	// active is when the batch last opened or was sealed, for the demand a
	// shared budget is told (budget.go); zero without a budget.
	active time.Time
}

type flight struct {
	b      *Batch
	table  *tables.Table
	tab    *chtable.Table // the table's columns the batch was decoded for
	bytes  int
	oldest int64 // Open.oldest at seal time: the start of the batch's end-to-end latency
	// started: taken from its table's queue for its INSERT (start), so it
	// holds one of the table's insert slots until it lands
	started bool
}

// queues is the batches on their way to ClickHouse: the open ones, one
// accumulator per key; the sealed ones from their seal to their ack
// (flights); and each table's queue of sealed batches waiting for an
// insert slot, with the count of its batches out for their INSERT. The
// zero value is empty. Owned by the owner goroutine; every read and
// change goes through these calls.
type queues struct {
	accs map[key]*Open
	// last is acc's last answer (nil: none), the open batch of last.key;
	// drop clears it when that entry leaves accs, so it never hands out
	// an accumulator no longer in the map.
	last    *Open
	flights map[uint64]*flight // sealed batches not yet acknowledged
	queues  map[*tables.Table]*tableQueue
}

// tableQueue is one table's sealed batches on their way to an INSERT,
// with the blocks of the table's layout kept for reuse and the stats of
// its INSERTs.
type tableQueue struct {
	waiting   []*Batch        // sealed, waiting for an insert slot, in seal order
	inserting int             // taken from waiting (start), not landed yet
	free      []*decode.Block // reset blocks for reuse
	stats     tableStats
}

// acc is key's open batch, or nil.
func (d *queues) acc(k key) *Open {
	if a := d.last; a != nil && a.key == k {
		return a // the same partition's batch as the record before
	}
	a := d.accs[k]
	if a != nil {
		d.last = a
	}
	return a
}

// open adds a, the new open batch of a.key.
func (d *queues) open(a *Open) {
	if d.accs == nil {
		d.accs = map[key]*Open{}
	}
	d.accs[a.key] = a
	d.last = a
}

// drop removes the open batch of key.
func (d *queues) drop(k key) {
	delete(d.accs, k)
	if d.last != nil && d.last.key == k {
		d.last = nil
	}
}

// eachOpen calls fn with every open batch, empty or not, in no order. fn
// may seal its batch or drop it.
func (d *queues) eachOpen(fn func(a *Open)) {
	for _, a := range d.accs {
		fn(a)
	}
}

// eachOpenOf calls fn with every open batch of table ts, in no order. fn
// may seal its batch or drop it.
func (d *queues) eachOpenOf(ts *tables.Table, fn func(a *Open)) {
	for k, a := range d.accs {
		if k.table == ts {
			fn(a)
		}
	}
}

// fly adds f, a batch just sealed, to the ones not yet acknowledged.
func (d *queues) fly(f *flight) {
	if d.flights == nil {
		d.flights = map[uint64]*flight{}
	}
	d.flights[f.b.ID] = f
}

// enqueue adds f, a batch just sealed, at the tail of its table's queue.
func (d *queues) enqueue(f *flight) {
	d.fly(f)
	q := d.queue(f.table)
	q.waiting = append(q.waiting, f.b)
}

// block returns an empty block for ts, reusing a freed one when there is.
func (d *queues) block(ts *tables.Table) *decode.Block {
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
func (d *queues) reuse(ts *tables.Table, blk *decode.Block, keep int) {
	q := d.queue(ts)
	if len(q.free) <= keep {
		blk.Reset()
		q.free = append(q.free, blk)
	}
}

// forgetBlocks drops ts's blocks kept for reuse: its columns change.
func (d *queues) forgetBlocks(ts *tables.Table) { d.queue(ts).free = nil }

// stats is ts's INSERT stats.
func (d *queues) stats(ts *tables.Table) *tableStats { return &d.queue(ts).stats }

// queue is ts's queue, made on first use.
func (d *queues) queue(ts *tables.Table) *tableQueue {
	q := d.queues[ts]
	if q == nil {
		if d.queues == nil {
			d.queues = map[*tables.Table]*tableQueue{}
		}
		q = &tableQueue{}
		d.queues[ts] = q
	}
	return q
}

// queued counts ts's batches waiting for an insert slot.
func (d *queues) queued(ts *tables.Table) int {
	if q := d.queues[ts]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// inserting counts ts's batches taken from its queue and not landed yet:
// the insert slots it uses.
func (d *queues) inserting(ts *tables.Table) int {
	if q := d.queues[ts]; q != nil {
		return q.inserting
	}
	return 0
}

// next is the batch at the head of ts's queue, the next to take an insert
// slot; nil when none waits.
func (d *queues) next(ts *tables.Table) *Batch {
	if q := d.queues[ts]; q != nil && len(q.waiting) > 0 {
		return q.waiting[0]
	}
	return nil
}

// start takes the batch at the head of ts's queue for its INSERT: it
// holds an insert slot until it lands, or until requeue puts it back.
// It returns the batch's flight, nil when none waits.
func (d *queues) start(ts *tables.Table) *flight {
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
func (d *queues) requeue(ts *tables.Table, b *Batch) {
	q := d.queue(ts)
	if f := d.flights[b.ID]; f != nil && f.started {
		f.started = false
		q.inserting--
	}
	q.waiting = append([]*Batch{b}, q.waiting...)
}

// land forgets sealed batch id, acknowledged or failed, and returns it,
// nil when it is not there; the insert slot it held is free.
func (d *queues) land(id uint64) *flight {
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
func (d *queues) withdraw(id uint64) (*flight, int) {
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
func (d *queues) withdrawQueued(ts *tables.Table, drop func(b *Batch) bool) {
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
func (d *queues) inFlight() int { return len(d.flights) }

// eachSealed calls fn with every sealed batch not yet acknowledged, in no
// order.
func (d *queues) eachSealed(fn func(f *flight)) {
	for _, f := range d.flights {
		fn(f)
	}
}

// oldest is the sealed batch of the smallest id, nil when none is.
func (d *queues) oldest() *flight {
	var first *flight
	for _, f := range d.flights {
		if first == nil || f.b.ID < first.b.ID {
			first = f
		}
	}
	return first
}

// openBytes is the bytes of the open batches.
func (d *queues) openBytes() int {
	n := 0
	for _, a := range d.accs {
		n += a.acc.Data().Bytes()
	}
	return n
}

// bytes is the bytes of the open and the unacknowledged batches.
func (d *queues) bytes() int {
	n := d.openBytes()
	for _, f := range d.flights {
		n += f.bytes
	}
	return n
}

// openBatches counts the open batches that hold a record.
func (d *queues) openBatches() int {
	n := 0
	for _, a := range d.accs {
		if !a.acc.Empty() {
			n++
		}
	}
	return n
}

// Package batch accumulates decoded rows into large batches and seals them
// by the policy's triggers (max_rows, max_bytes, max_wait). A sealed Batch
// is immutable and remembers, per topic-partition, the offset range it
// holds, which is what the offsets tracker acknowledges once ClickHouse has
// the rows.
//
// The package does no I/O, reads no clock and takes no locks: callers pass
// the time in, and Add/UntilNext tell them when to seal (the benthos batch
// policy shape). Concurrency: an Accumulator is owned by one goroutine; a
// sealed Batch may be read by any number of goroutines.
package batch

import (
	"time"

	"sink/internal/offsets"
)

// Data is the row container a batch carries (a *decode.Block in
// production). Accumulator and Batch are generic in it, so the caller gets
// its own type back without assertions.
type Data interface {
	Rows() int
	Bytes() int
}

// Policy says when an accumulator is full. Zero fields disable a trigger.
type Policy struct {
	MaxRows  int
	MaxBytes int
	MaxWait  time.Duration
	// PerPart applies MaxRows and MaxBytes to the largest part of a Data
	// inserted as one INSERT per part (Parted: a batch placed on a
	// cluster's shards by a sharding key), so that each INSERT is as
	// large as a whole batch's would be. MaxDataBytes bounds the whole.
	PerPart bool
	// MaxDataBytes bounds a batch's bytes in all, whatever its parts (0:
	// none). With PerPart it keeps a parted batch within its share of
	// batch.buffer_memory.
	MaxDataBytes int
}

// Parted is a Data inserted as one INSERT per part.
type Parted interface {
	Data
	// Largest is the rows and the bytes of its largest part (of the whole
	// when it has no parts).
	Largest() (rows, bytes int)
}

// Reason says why a batch was sealed; it is reported in logs and metrics.
type Reason uint8

const (
	ReasonRows Reason = iota + 1
	ReasonBytes
	ReasonWait
	ReasonRevoke
	ReasonShutdown
	// ReasonSchema: the table's columns changed, so the open batch (built
	// for the old columns) is closed and the next one uses the new ones.
	ReasonSchema
	// ReasonPause: POST /pause flushes the open batches before the
	// connector stops inserting.
	ReasonPause
	// ReasonTruncate: a TRUNCATE event is applied to the table (a CDC
	// route's truncate: apply), after every earlier row is inserted.
	ReasonTruncate
	// ReasonBudget: the batch's wait had passed and the server's budget
	// of INSERTs per minute had room (clickhouse.max_inserts_per_minute).
	ReasonBudget
	// ReasonDeadline: the budget held the batch until its table's latency
	// bound, which sealed it.
	ReasonDeadline
	// ReasonMemory: the budget held batches until they took half of
	// batch.buffer_memory; the largest was sealed.
	ReasonMemory
)

func (r Reason) String() string {
	switch r {
	case ReasonRows:
		return "rows"
	case ReasonBytes:
		return "bytes"
	case ReasonWait:
		return "wait"
	case ReasonRevoke:
		return "revoke"
	case ReasonShutdown:
		return "shutdown"
	case ReasonSchema:
		return "schema"
	case ReasonPause:
		return "pause"
	case ReasonTruncate:
		return "truncate"
	case ReasonBudget:
		return "budget"
	case ReasonDeadline:
		return "deadline"
	case ReasonMemory:
		return "memory"
	}
	return "unknown"
}

// Range is the span of offsets of one partition inside a batch. Records of
// the partition between First and Last that are not in the batch went
// elsewhere (another table, the DLQ) and are tracked there.
type Range struct {
	TP          offsets.TP
	First, Last int64
	LastEpoch   int32
	Rows        int
}

// Batch is a sealed, immutable set of rows for one table.
type Batch[D Data] struct {
	ID     uint64
	Data   D
	Ranges []Range
	Reason Reason
	Opened time.Time // when the first row arrived
	Sealed time.Time
}

// Rows is the number of rows in the batch.
func (b *Batch[D]) Rows() int { return b.Data.Rows() }

// TPs lists the partitions the batch holds records of.
func (b *Batch[D]) TPs() []offsets.TP {
	out := make([]offsets.TP, len(b.Ranges))
	for i, r := range b.Ranges {
		out[i] = r.TP
	}
	return out
}

// Holds reports whether the batch holds records of tp.
func (b *Batch[D]) Holds(tp offsets.TP) bool {
	for _, r := range b.Ranges {
		if r.TP == tp {
			return true
		}
	}
	return false
}

// Accumulator collects rows for one table (or, with ignore_partitions
// false, one table-partition) until the policy says it is full.
type Accumulator[D Data] struct {
	policy Policy
	data   D
	parted Parted // data, when it is inserted in parts (nil otherwise)
	opened time.Time
	ranges []Range
	// last is the index in ranges of the previous Add: records arrive in runs
	// from one partition, so this avoids most map lookups.
	last  int
	index map[offsets.TP]int
}

// NewAccumulator starts an empty accumulator appending into data.
func NewAccumulator[D Data](p Policy, data D) *Accumulator[D] {
	a := &Accumulator[D]{policy: p, index: make(map[offsets.TP]int)}
	a.use(data)
	return a
}

// SetPolicy changes the triggers from now on, the open batch included
// (batch.mode adaptive retunes them between batches and while one fills);
// the next Add or UntilNext applies them.
func (a *Accumulator[D]) SetPolicy(p Policy) { a.policy = p }

// Policy is the accumulator's current triggers.
func (a *Accumulator[D]) Policy() Policy { return a.policy }

// Data is the container the caller appends the next row to before Add.
func (a *Accumulator[D]) Data() D { return a.data }

// Empty reports whether no row was added since the last seal.
func (a *Accumulator[D]) Empty() bool { return len(a.ranges) == 0 }

// Add records that the row just appended to Data came from offset of tp,
// and reports whether the accumulator is now full by rows or bytes.
func (a *Accumulator[D]) Add(now time.Time, tp offsets.TP, offset int64, epoch int32) (full bool, why Reason) {
	if len(a.ranges) == 0 {
		a.opened = now
	}
	i := a.last
	if i >= len(a.ranges) || a.ranges[i].TP != tp {
		var ok bool
		if i, ok = a.index[tp]; !ok {
			i = len(a.ranges)
			a.ranges = append(a.ranges, Range{TP: tp, First: offset})
			a.index[tp] = i
		}
		a.last = i
	}
	r := &a.ranges[i]
	r.Last, r.LastEpoch = offset, epoch
	r.Rows++
	rows, bytes := a.size()
	if a.policy.MaxRows > 0 && rows >= a.policy.MaxRows {
		return true, ReasonRows
	}
	if a.policy.MaxBytes > 0 && bytes >= a.policy.MaxBytes {
		return true, ReasonBytes
	}
	if a.policy.MaxDataBytes > 0 && a.data.Bytes() >= a.policy.MaxDataBytes {
		return true, ReasonBytes
	}
	return false, 0
}

// use makes data the container rows are appended to, noting once whether
// it is inserted in parts, so Add asks no type question per row.
func (a *Accumulator[D]) use(data D) {
	a.data = data
	a.parted, _ = any(data).(Parted)
}

// size is what MaxRows and MaxBytes are compared with: the open batch's
// rows and bytes, or its largest part's (Policy.PerPart).
func (a *Accumulator[D]) size() (rows, bytes int) {
	if a.policy.PerPart && a.parted != nil {
		return a.parted.Largest()
	}
	return a.data.Rows(), a.data.Bytes()
}

// UntilNext returns how long until max_wait seals the open batch; ok is
// false when there is nothing to wait for (empty, or no max_wait).
func (a *Accumulator[D]) UntilNext(now time.Time) (d time.Duration, ok bool) {
	if len(a.ranges) == 0 || a.policy.MaxWait <= 0 {
		return 0, false
	}
	d = a.opened.Add(a.policy.MaxWait).Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}

// Seal hands out the rows added so far as an immutable batch and continues
// with next (an empty container, typically a reused one). Seal on an empty
// accumulator returns nil and keeps its data.
func (a *Accumulator[D]) Seal(now time.Time, id uint64, reason Reason, next D) *Batch[D] {
	if len(a.ranges) == 0 {
		return nil
	}
	b := &Batch[D]{
		ID:     id,
		Data:   a.data,
		Ranges: a.ranges,
		Reason: reason,
		Opened: a.opened,
		Sealed: now,
	}
	a.use(next)
	a.ranges = make([]Range, 0, len(b.Ranges))
	clear(a.index)
	a.last = 0
	return b
}

// Ranges is the open batch's span per partition so far (read only; valid
// until the next Add or Seal).
func (a *Accumulator[D]) Ranges() []Range { return a.ranges }

// Holds reports whether the open batch has records of tp.
func (a *Accumulator[D]) Holds(tp offsets.TP) bool {
	_, ok := a.index[tp]
	return ok
}

// Package offsets tracks, per topic-partition, which consumed records are
// durably handled (inserted into ClickHouse, or produced to the dead-letter
// topic) and computes the offsets that are safe to commit: for each partition,
// the offset just past the longest contiguous prefix of handled records.
//
// Records are grouped into units (a batch, a DLQ produce, or unit 0 for
// records that need no work: skipped records, and the commit and abort
// markers of transactions, whose offsets must be committed past too).
// Offsets need not be contiguous: the gaps of a compacted topic and the
// aborted records before an abort marker, which a read_committed consumer
// never sees, are passed over. Consecutive records of one partition in the
// same unit collapse into one segment, so the cost is per batch, not per
// record.
//
// A record that several units hold (fan-out routing: one record inserted
// into several tables, each through its own batch) is added with
// AddShared: it belongs to a group of those units and is handled only once
// every one of them is acknowledged. Consecutive records held by the same
// units share one group and one segment.
//
// Concurrency: a Tracker is not safe for concurrent use; one goroutine (the
// pipeline's owner) owns it.
package offsets

import (
	"encoding/binary"
	"slices"
)

// groupBit marks the ids of groups, so that they never collide with the
// caller's unit ids (which count up from 1).
const groupBit = uint64(1) << 63

// Done is the unit for records that need no further work (skipped records):
// they count as handled as soon as they are added.
const Done uint64 = 0

// TP names a topic-partition.
type TP struct {
	Topic     string
	Partition int32
}

// Commit is a committable position: Offset is the next offset to consume,
// Epoch the leader epoch of the last handled record (-1 when unknown).
type Commit struct {
	Offset int64
	Epoch  int32
}

type segment struct {
	unit  uint64
	last  int64 // offset of the last record in the segment
	epoch int32 // leader epoch of that record
	done  bool
}

type partition struct {
	segs     []segment // oldest first; segs[head:] are live
	head     int
	pending  Commit // the furthest handled position
	handled  bool   // pending is meaningful: some record was handled
	reported int64  // the Offset last returned by Committable (or -1)
}

// Tracker is the per-partition ledger. The zero value is not usable; use New.
type Tracker struct {
	parts map[TP]*partition
	// last is the partition Add saw last: records come in runs of one
	// partition, and this saves hashing the topic name per record.
	lastTP TP
	last   *partition

	// Groups of units that share records (AddShared).
	groups    map[uint64]*group   // group id -> group
	groupOf   map[string]uint64   // the units' key -> open group id
	unitGroup map[uint64][]uint64 // unit -> the open groups it is in
	nextGroup uint64
	keyBuf    []byte // scratch for the units' key
	unitBuf   []uint64
}

// group is a set of units that hold the same records.
type group struct {
	key     string
	pending int // units not yet acknowledged
}

// New returns an empty tracker.
func New() *Tracker {
	return &Tracker{
		parts:     make(map[TP]*partition),
		groups:    make(map[uint64]*group),
		groupOf:   make(map[string]uint64),
		unitGroup: make(map[uint64][]uint64),
	}
}

// AddShared records that the record at offset of tp is held by every unit
// of units: it is handled once all of them are acknowledged. A unit listed
// twice counts once, Done not at all; a single unit is the same as Add.
// units is not kept.
func (t *Tracker) AddShared(tp TP, offset int64, epoch int32, units []uint64) {
	u := append(t.unitBuf[:0], units...)
	slices.Sort(u)
	u = slices.Compact(u)
	if len(u) > 0 && u[0] == Done {
		u = u[1:] // a unit that needs no work holds nothing back
	}
	t.unitBuf = u
	switch len(u) {
	case 0:
		if len(units) > 0 {
			t.Add(tp, offset, epoch, Done)
		}
		return
	case 1:
		t.Add(tp, offset, epoch, u[0])
		return
	}
	key := t.keyBuf[:0]
	for _, id := range u {
		key = binary.LittleEndian.AppendUint64(key, id)
	}
	t.keyBuf = key
	id, ok := t.groupOf[string(key)] // no allocation for the lookup
	if !ok {
		t.nextGroup++
		id = groupBit | t.nextGroup
		g := &group{key: string(key), pending: len(u)}
		t.groups[id] = g
		t.groupOf[g.key] = id
		for _, unit := range u {
			t.unitGroup[unit] = append(t.unitGroup[unit], id)
		}
	}
	t.Add(tp, offset, epoch, id)
}

// Add records that the record at offset of tp belongs to unit. Offsets of a
// partition must be added in increasing order; an offset at or below the last
// added one (a replay after a seek) is ignored, because the earlier copy is
// already accounted for.
func (t *Tracker) Add(tp TP, offset int64, epoch int32, unit uint64) {
	p := t.last
	if p == nil || tp != t.lastTP {
		if p = t.parts[tp]; p == nil {
			p = &partition{reported: -1}
			t.parts[tp] = p
		}
		t.lastTP, t.last = tp, p
	}
	if n := len(p.segs); n > p.head {
		s := &p.segs[n-1]
		if offset <= s.last {
			return
		}
		if s.unit == unit && !s.done {
			s.last, s.epoch = offset, epoch
			return
		}
	} else if p.handled && offset < p.pending.Offset {
		return
	}
	p.segs = append(p.segs, segment{unit: unit, last: offset, epoch: epoch, done: unit == Done})
	if unit == Done {
		p.advance()
	}
}

// Ack marks every record of unit in the given partitions as handled, and
// the records unit shares with other units (AddShared) once those are
// acknowledged too. tps must include every partition of unit's records.
func (t *Tracker) Ack(unit uint64, tps []TP) {
	if gs, ok := t.unitGroup[unit]; ok {
		delete(t.unitGroup, unit)
		for _, id := range gs {
			g := t.groups[id]
			g.pending--
			if g.pending > 0 {
				continue
			}
			delete(t.groups, id)
			delete(t.groupOf, g.key)
			t.ack(id, tps)
		}
	}
	t.ack(unit, tps)
}

func (t *Tracker) ack(unit uint64, tps []TP) {
	for _, tp := range tps {
		p := t.parts[tp]
		if p == nil {
			continue // forgotten (revoked or lost) since the unit was sealed
		}
		for i := p.head; i < len(p.segs); i++ {
			if p.segs[i].unit == unit {
				p.segs[i].done = true
			}
		}
		p.advance()
	}
}

// advance pops the handled prefix and moves the pending commit past it.
func (p *partition) advance() {
	for p.head < len(p.segs) && p.segs[p.head].done {
		s := p.segs[p.head]
		p.pending = Commit{Offset: s.last + 1, Epoch: s.epoch}
		p.handled = true
		p.head++
	}
	// Compact once the dead prefix dominates, so the slice does not grow forever.
	if p.head > 32 && p.head*2 > len(p.segs) {
		n := copy(p.segs, p.segs[p.head:])
		p.segs = p.segs[:n]
		p.head = 0
	}
	if p.head == len(p.segs) {
		p.segs, p.head = p.segs[:0], 0
	}
}

// Committable returns, for every partition whose safe position moved since
// the previous call, that position. The caller commits it; positions are
// never reported twice, so a failed commit is simply superseded by the next
// one (or replayed, which is at-least-once).
func (t *Tracker) Committable() map[TP]Commit {
	var out map[TP]Commit
	for tp, p := range t.parts {
		if !p.handled || p.pending.Offset == p.reported {
			continue
		}
		if out == nil {
			out = make(map[TP]Commit)
		}
		out[tp] = p.pending
		p.reported = p.pending.Offset
	}
	return out
}

// Position returns the safe position of tp and whether any record of tp was
// handled; used by tests and status reporting.
func (t *Tracker) Position(tp TP) (Commit, bool) {
	p := t.parts[tp]
	if p == nil || !p.handled {
		return Commit{}, false
	}
	return p.pending, true
}

// Pending reports how many units are still unacknowledged in tp.
func (t *Tracker) Pending(tp TP) int {
	p := t.parts[tp]
	if p == nil {
		return 0
	}
	n := 0
	for i := p.head; i < len(p.segs); i++ {
		if !p.segs[i].done {
			n++
		}
	}
	return n
}

// Forget drops all state of tp: after a revoke (once committed) or a loss
// (never committed). Later acks for it are ignored.
func (t *Tracker) Forget(tp TP) {
	delete(t.parts, tp)
	if tp == t.lastTP {
		t.last = nil
	}
}

// Truncate forgets every record of tp added at or after offset from, as if
// they had never been consumed, and returns the offset after the last record
// added before (ok false when tp has no records at or after from). It is for
// a partition whose consumer is sought back to from: the records arrive
// again and are added anew. from must be the first offset of a unit's run in
// tp (a record added right after a record of another unit), and no record
// at or after it may be handled yet; the pipeline only truncates at the
// first record of a batch that was never inserted, so both hold.
func (t *Tracker) Truncate(tp TP, from int64) (next int64, ok bool) {
	p := t.parts[tp]
	if p == nil || len(p.segs) == p.head || p.segs[len(p.segs)-1].last < from {
		return 0, false
	}
	next = p.segs[len(p.segs)-1].last + 1
	i := len(p.segs)
	for i > p.head && p.segs[i-1].last >= from {
		i--
	}
	p.segs = p.segs[:i]
	if p.head == len(p.segs) {
		p.segs, p.head = p.segs[:0], 0
	}
	return next, true
}

// Partitions returns the tracked partitions.
func (t *Tracker) Partitions() []TP {
	out := make([]TP, 0, len(t.parts))
	for tp := range t.parts {
		out = append(out, tp)
	}
	return out
}

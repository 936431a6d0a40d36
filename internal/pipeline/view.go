package pipeline

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/offsets"
	"sink/internal/status"
)

// view is the operator's view of the connector (admin.go): its state and
// since when, why Run ended, the pause and resume requests and whether Run
// started to take them, the last published snapshot (which the HTTP
// goroutines read: snap is the one field safe from any goroutine), and
// what the fetches, the commits and the positions probe said per assigned
// partition. The owner goroutine writes it.
type view struct {
	state      status.State
	stateSince time.Time
	failure    error // why Run ended, once it did
	controls   chan controlReq
	started    chan struct{} // closed when Run starts
	snap       atomic.Pointer[status.Snapshot]
	snapEvery  time.Duration // snapshotInterval
	posEvery   time.Duration // positionsInterval
	seen       map[offsets.TP]*partSeen
	probing    bool // a positions probe is running
}

func newView() view {
	return view{state: status.Starting, controls: make(chan controlReq), started: make(chan struct{}),
		snapEvery: snapshotInterval, posEvery: positionsInterval, seen: map[offsets.TP]*partSeen{}}
}

// set enters s at p's now, in the metric and the next snapshot.
func (v *view) set(p *Pipeline, s status.State) {
	if v.state == s {
		return
	}
	v.state, v.stateSince = s, p.now()
	p.m.SetState(string(s), stateNames)
}

var stateNames = func() []string {
	out := make([]string, len(status.States))
	for i, s := range status.States {
		out[i] = string(s)
	}
	return out
}()

// partSeen is what the fetches, the commits and the positions probe said
// of an assigned partition.
type partSeen struct {
	hasEnd, hasLag bool
	hwm, lag       int64
	next           int64     // the offset after the last one fetched; -1: none fetched
	last           time.Time // the last fetched record's timestamp
	committed      int64     // the group's committed offset; -1: none known
}

func newPartSeen() *partSeen { return &partSeen{next: -1, committed: -1} }

// assigned starts tracking newly assigned partitions.
func (v *view) assigned(tps []offsets.TP) {
	for _, tp := range tps {
		if _, ok := v.seen[tp]; !ok {
			v.seen[tp] = newPartSeen()
		}
	}
}

// forget stops tracking partitions this member no longer owns.
func (v *view) forget(tps []offsets.TP) {
	for _, tp := range tps {
		delete(v.seen, tp)
	}
}

// fetched notes what the last fetch of tp said.
func (v *view) fetched(tp offsets.TP, hwm, lag int64, last time.Time) {
	s := v.seen[tp]
	if s == nil {
		s = newPartSeen()
		v.seen[tp] = s
	}
	s.hasEnd, s.hasLag, s.hwm, s.lag, s.next, s.last = true, true, hwm, lag, hwm-lag, last
}

// committed notes a successful commit.
func (v *view) committed(c map[offsets.TP]offsets.Commit) {
	for tp, pos := range c {
		if s := v.seen[tp]; s != nil && pos.Offset > s.committed {
			s.committed = pos.Offset
		}
	}
}

// topics is into plus the topics of the partitions tracked that into does
// not name.
func (v *view) topics(into []string) []string {
	for tp := range v.seen {
		if !slices.Contains(into, tp.Topic) {
			into = append(into, tp.Topic)
		}
	}
	return into
}

// positionsRead is the status's read of the group's committed offsets and
// the partitions' log ends.
type positionsRead struct {
	v   *view
	log zerolog.Logger
	r   positionsResult
}

// Apply merges the probe's answer (view.merge).
func (e positionsRead) Apply(context.Context) {
	if e.r.err != nil {
		e.log.Debug().Err(e.r.err).Msg("status: positions probe failed; partitions show what the fetches said")
	}
	e.v.merge(e.r)
}

type positionsResult struct {
	committed, ends map[offsets.TP]int64
	err             error
}

// merge merges a positions probe's answer: committed offsets only move
// forward, and the log end is taken when it is ahead of the last fetch's.
// A failed probe changes nothing: the partitions show what the fetches
// said.
func (v *view) merge(r positionsResult) {
	v.probing = false
	if r.err != nil {
		return
	}
	for tp, s := range v.seen {
		if c, ok := r.committed[tp]; ok && c > s.committed {
			s.committed = c
		}
		end, ok := r.ends[tp]
		if !ok || (s.hasEnd && end < s.hwm) {
			continue
		}
		s.hasEnd, s.hwm = true, end
		next := s.next
		if next < 0 {
			next = s.committed // nothing fetched: the group goes on from its commit
		}
		if next >= 0 {
			s.hasLag, s.lag = true, max(end-next, 0)
		}
	}
}

// partitions is the snapshot of every partition tracked, sorted, each
// under backpressure as backpressure says.
func (v *view) partitions(backpressure func(tp offsets.TP) bool) []status.Partition {
	out := make([]status.Partition, 0, len(v.seen))
	for tp, seen := range v.seen {
		pt := status.Partition{Topic: tp.Topic, Partition: tp.Partition, Backpressure: backpressure(tp)}
		if seen.committed >= 0 {
			c := seen.committed
			pt.Committed = &c
		}
		if seen.hasEnd {
			hwm := seen.hwm
			pt.LogEnd = &hwm
		}
		if seen.hasLag {
			lag := seen.lag
			pt.LagRecords, pt.LastFetched = &lag, seen.last
		}
		out = append(out, pt)
	}
	slices.SortFunc(out, func(a, b status.Partition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

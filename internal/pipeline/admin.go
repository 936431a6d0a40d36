package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sink/internal/offsets"
	"sink/internal/pipeline/dispatch"
	"sink/internal/status"
)

// The operator's controls and view (internal/status): the connector's
// state, POST /pause and /resume, and the snapshot GET /status serves.
//
// Pause stops the work without leaving the consumer group, for ClickHouse
// maintenance. The owner pauses fetching of every consumed topic in the
// Kafka client (PauseFetchTopics: what is buffered for them is dropped and
// fetched again after the resume, so nothing is skipped), goes on decoding
// what was polled before, seals every open batch, waits until every batch
// is inserted and every position committed (PAUSING), and only then
// reports PAUSED. While paused the loop keeps running: group events
// (revokes, assignments, losses) are handled at once and the poller keeps
// its poll open, so the member keeps its partitions and no rebalance is
// started or held by the pause. Resume lifts the fetch pause.
//
// The snapshot is built by the owner from its own state, once a second and
// at each change of state, and published through an atomic pointer; the
// HTTP goroutines read only published snapshots.

// snapshotInterval is how often the owner publishes a snapshot (tests
// shorten Pipeline.snapEvery).
const snapshotInterval = time.Second

type controlOp uint8

const (
	opPause controlOp = iota + 1
	opResume
)

func (o controlOp) String() string {
	if o == opPause {
		return "pause"
	}
	return "resume"
}

// controlReq is a pause or resume handed to the owner; it answers on reply.
type controlReq struct {
	op    controlOp
	reply chan controlReply
}

type controlReply struct {
	state status.State
	err   error
}

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

// positionsInterval is how often the positions probe runs (tests shorten
// Pipeline.posEvery): a partition
// that fetches nothing (idle, or the connector paused) still shows its
// committed offset, its log end, and its lag growing.
const positionsInterval = 5 * time.Second

type positionsResult struct {
	committed, ends map[offsets.TP]int64
	err             error
}

// probePositions starts the positions probe unless one is running.
func (p *Pipeline) probePositions() {
	ps, ok := p.cons.(positionsSource)
	if !ok || p.probingPos || len(p.seen) == 0 {
		return
	}
	var topics []string
	for tp := range p.seen {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	p.probingPos = true
	go func() {
		c, e, err := ps.Positions(context.Background(), topics)
		p.post(positionsRead{p: p, r: positionsResult{committed: c, ends: e, err: err}})
	}()
}

// handlePositions merges a probe's answer: committed offsets only move
// forward, and the log end is taken when it is ahead of the last fetch's.
func (p *Pipeline) handlePositions(r positionsResult) {
	p.probingPos = false
	if r.err != nil {
		p.log.Debug().Err(r.err).Msg("status: positions probe failed; partitions show what the fetches said")
		return
	}
	for tp, s := range p.seen {
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

// Status returns the last published snapshot (nil before Run started).
// Safe from any goroutine.
func (p *Pipeline) Status() *status.Snapshot { return p.snap.Load() }

// Pause asks the owner to stop fetching and inserting; it returns the state
// the connector is in once the owner took the request (PAUSING until the
// open batches are committed, then PAUSED). Safe from any goroutine.
func (p *Pipeline) Pause(ctx context.Context) (status.State, error) {
	return p.control(ctx, opPause)
}

// Resume asks the owner to fetch and insert again. Safe from any goroutine.
func (p *Pipeline) Resume(ctx context.Context) (status.State, error) {
	return p.control(ctx, opResume)
}

func (p *Pipeline) control(ctx context.Context, op controlOp) (status.State, error) {
	req := controlReq{op: op, reply: make(chan controlReply, 1)}
	select {
	case <-p.started:
	default:
		return status.Starting, fmt.Errorf("%w: the connector is starting", status.ErrConflict)
	}
	select {
	case p.controls <- req:
	case <-p.stopped:
		return p.Status().State, fmt.Errorf("%w: the connector has stopped", status.ErrConflict)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	r := <-req.reply // the owner answers at once
	return r.state, r.err
}

// setState enters s, in the log, the metric and the next snapshot.
func (p *Pipeline) setState(s status.State) {
	if p.state == s {
		return
	}
	p.state, p.stateSince = s, p.now()
	p.m.SetState(string(s), stateNames)
}

var stateNames = func() []string {
	out := make([]string, len(status.States))
	for i, s := range status.States {
		out[i] = string(s)
	}
	return out
}()

// pausing reports whether POST /pause holds the connector (PAUSING or PAUSED).
func (p *Pipeline) pausing() bool { return p.state == status.Pausing || p.state == status.Paused }

// handleControl answers a pause or resume. In STOPPING or FAILED it is
// refused: the process is on its way out.
func (p *Pipeline) handleControl(writeCtx context.Context, req controlReq) {
	var err error
	switch {
	case p.state != status.Running && !p.pausing():
		err = fmt.Errorf("%w: the connector is %s", status.ErrConflict, p.state)
	case req.op == opPause && p.state == status.Running:
		p.setState(status.Pausing)
		p.pauseFetch()
		p.log.Info().Int("open_batches", p.disp.OpenBatches()).Int("in_flight", p.disp.InFlight()).
			Msg("pausing: fetching stopped; inserting and committing the open batches")
		p.advancePause(writeCtx)
	case req.op == opResume && p.pausing():
		if ps, ok := p.cons.(pauseSource); ok {
			ps.ResumeFetch()
		}
		p.log.Info().Str("was", string(p.state)).Msg("resumed: fetching and inserting again")
		p.setState(status.Running)
	}
	p.publish()
	req.reply <- controlReply{state: p.state, err: err}
}

// pauseFetch pauses fetching of every topic this member consumes or owns
// partitions of (a topic_regex may have matched topics the config does not
// name); called again when partitions are assigned while paused.
func (p *Pipeline) pauseFetch() {
	ps, ok := p.cons.(pauseSource)
	if !ok {
		return
	}
	topics := slices.Clone(p.cfg.Kafka.Topics)
	for tp := range p.seen {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	ps.PauseFetch(topics)
}

// advancePause turns PAUSING into PAUSED once everything polled before the
// pause is decoded, every batch is inserted, and every position committed.
// Records waiting for the schema registry stay held (and uncommitted).
func (p *Pipeline) advancePause(writeCtx context.Context) {
	if p.state != status.Pausing || p.fatal != nil || p.in.HasPending() {
		return
	}
	p.disp.SealAll(writeCtx, dispatch.Pause)
	if p.unacked() > 0 || p.revoke != nil {
		return
	}
	if !p.committer.commitNow() {
		return // the commit failed: retried at the next commit tick
	}
	p.setState(status.Paused)
	p.log.Info().Dur("took", p.now().Sub(p.stateSince)).Str("committed", p.committer.summary()).
		Msg("paused: every batch inserted and committed; still a member of the group")
}

// assignedSeen starts tracking newly assigned partitions for the snapshot.
func (p *Pipeline) assignedSeen(tps []offsets.TP) {
	for _, tp := range tps {
		if _, ok := p.seen[tp]; !ok {
			p.seen[tp] = newPartSeen()
		}
	}
	p.probePositions()
	if p.pausing() && len(tps) > 0 {
		p.pauseFetch()
	}
}

// fetchedSeen notes what the last fetch of tp said.
func (p *Pipeline) fetchedSeen(tp offsets.TP, hwm, lag int64, last time.Time) {
	s := p.seen[tp]
	if s == nil {
		s = newPartSeen()
		p.seen[tp] = s
	}
	s.hasEnd, s.hasLag, s.hwm, s.lag, s.next, s.last = true, true, hwm, lag, hwm-lag, last
}

// committedSeen notes a successful commit.
func (p *Pipeline) committedSeen(c map[offsets.TP]offsets.Commit) {
	for tp, pos := range c {
		if s := p.seen[tp]; s != nil && pos.Offset > s.committed {
			s.committed = pos.Offset
		}
	}
}

// publish builds a snapshot of the owner's state and publishes it.
func (p *Pipeline) publish() {
	now := p.now()
	s := &status.Snapshot{At: now, State: p.state, Since: p.stateSince}
	if p.fatal != nil {
		s.Error = p.fatal.Error()
	} else if p.failure != nil {
		s.Error = p.failure.Error()
	}
	backpressure := p.paused || p.in.Held().Holding()
	s.Backpressure = backpressure
	if g, ok := p.cons.(protocolSource); ok {
		s.GroupProtocol = g.GroupProtocol()
	}
	for _, name := range p.cat.Names() {
		ts := p.cat.Table(name)
		t := status.Table{
			Table:           name,
			DeadLettered:    p.cat.DeadLetters().Counted(name),
			DeadLetterTable: ts.DeadLetter(),
		}
		p.disp.Status(ts, now, &t)
		s.Tables = append(s.Tables, t)
	}
	for tp, seen := range p.seen {
		pt := status.Partition{Topic: tp.Topic, Partition: tp.Partition, Backpressure: backpressure || p.in.Held().Holds(tp)}
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
		s.Partitions = append(s.Partitions, pt)
	}
	p.disp.Budgets(s)
	slices.SortFunc(s.Partitions, func(a, b status.Partition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	p.snap.Store(s)
}

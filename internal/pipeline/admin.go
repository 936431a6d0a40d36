package pipeline

import (
	"context"
	"fmt"
	"slices"
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
// shorten view.snapEvery).
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

// positionsInterval is how often the positions probe runs (tests shorten
// view.posEvery): a partition
// that fetches nothing (idle, or the connector paused) still shows its
// committed offset, its log end, and its lag growing.
const positionsInterval = 5 * time.Second

// probePositions starts the positions probe unless one is running.
func (p *Pipeline) probePositions() {
	ps, ok := p.cons.(positionsSource)
	if !ok || p.view.probing || len(p.view.seen) == 0 {
		return
	}
	topics := p.view.topics(nil)
	p.view.probing = true
	go func() {
		c, e, err := ps.Positions(context.Background(), topics)
		p.post(positionsRead{v: &p.view, log: p.log, r: positionsResult{committed: c, ends: e, err: err}})
	}()
}

// Status returns the last published snapshot (nil before Run started).
// Safe from any goroutine.
func (p *Pipeline) Status() *status.Snapshot { return p.view.snap.Load() }

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
	case <-p.view.started:
	default:
		return status.Starting, fmt.Errorf("%w: the connector is starting", status.ErrConflict)
	}
	select {
	case p.view.controls <- req:
	case <-p.calls.stopped:
		return p.Status().State, fmt.Errorf("%w: the connector has stopped", status.ErrConflict)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	r := <-req.reply // the owner answers at once
	return r.state, r.err
}

// pausing reports whether POST /pause holds the connector (PAUSING or PAUSED).
func (p *Pipeline) pausing() bool {
	return p.view.state == status.Pausing || p.view.state == status.Paused
}

// handleControl answers a pause or resume. In STOPPING or FAILED it is
// refused: the process is on its way out.
func (p *Pipeline) handleControl(writeCtx context.Context, req controlReq) {
	var err error
	switch {
	case p.view.state != status.Running && !p.pausing():
		err = fmt.Errorf("%w: the connector is %s", status.ErrConflict, p.view.state)
	case req.op == opPause && p.view.state == status.Running:
		p.view.set(p, status.Pausing)
		p.pauseFetch()
		p.log.Info().Int("open_batches", p.disp.OpenBatches()).Int("in_flight", p.disp.InFlight()).
			Msg("pausing: fetching stopped; inserting and committing the open batches")
		p.advancePause(writeCtx)
	case req.op == opResume && p.pausing():
		if ps, ok := p.cons.(pauseSource); ok {
			ps.ResumeFetch()
		}
		p.log.Info().Str("was", string(p.view.state)).Msg("resumed: fetching and inserting again")
		p.view.set(p, status.Running)
	}
	p.publish()
	req.reply <- controlReply{state: p.view.state, err: err}
}

// pauseFetch pauses fetching of every topic this member consumes or owns
// partitions of (a topic_regex may have matched topics the config does not
// name); called again when partitions are assigned while paused.
func (p *Pipeline) pauseFetch() {
	ps, ok := p.cons.(pauseSource)
	if !ok {
		return
	}
	ps.PauseFetch(p.view.topics(slices.Clone(p.cfg.Kafka.Topics)))
}

// advancePause turns PAUSING into PAUSED once everything polled before the
// pause is decoded, every batch is inserted, and every position committed.
// Records waiting for the schema registry stay held (and uncommitted).
func (p *Pipeline) advancePause(writeCtx context.Context) {
	if p.view.state != status.Pausing || p.fatal != nil || p.in.HasPending() {
		return
	}
	p.disp.SealAll(writeCtx, dispatch.Pause)
	if p.unacked() > 0 || p.revoke != nil {
		return
	}
	if !p.committer.commitNow() {
		return // the commit failed: retried at the next commit tick
	}
	p.view.set(p, status.Paused)
	p.log.Info().Dur("took", p.now().Sub(p.view.stateSince)).Str("committed", p.committer.summary()).
		Msg("paused: every batch inserted and committed; still a member of the group")
}

// assignedSeen starts tracking newly assigned partitions for the snapshot.
func (p *Pipeline) assignedSeen(tps []offsets.TP) {
	p.view.assigned(tps)
	p.probePositions()
	if p.pausing() && len(tps) > 0 {
		p.pauseFetch()
	}
}

// publish builds a snapshot of the owner's state and publishes it.
func (p *Pipeline) publish() {
	now := p.now()
	s := &status.Snapshot{At: now, State: p.view.state, Since: p.view.stateSince}
	if p.fatal != nil {
		s.Error = p.fatal.Error()
	} else if p.view.failure != nil {
		s.Error = p.view.failure.Error()
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
	s.Partitions = p.view.partitions(func(tp offsets.TP) bool { return backpressure || p.in.Held().Holds(tp) })
	p.disp.Budgets(s)
	p.view.snap.Store(s)
}

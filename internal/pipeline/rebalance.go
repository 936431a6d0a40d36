package pipeline

import (
	"context"
	"time"

	"sink/internal/offsets"
	"sink/internal/pipeline/dispatch"
)

// eventKind is a change of this member's partitions, as the group's
// callbacks report it.
type eventKind uint8

const (
	eventAssigned eventKind = iota + 1
	eventRevoked
	eventLost
)

func (k eventKind) String() string {
	switch k {
	case eventAssigned:
		return "assigned"
	case eventRevoked:
		return "revoked"
	case eventLost:
		return "lost"
	}
	return "unknown"
}

// groupEvent is one group callback handed to the owner; the callback
// waits until done is closed.
type groupEvent struct {
	kind  eventKind
	parts map[string][]int32
	done  chan struct{}
}

// revokeWait is a revoke being handled: the units (batches, dead-letter
// produces) of the revoked partitions still unacknowledged, and when to
// give up waiting for them.
type revokeWait struct {
	tps      []offsets.TP
	waiting  map[uint64]bool
	done     chan struct{}
	start    time.Time
	deadline time.Time
}

// Assigned, Revoked and Lost are the group callbacks (main
// hands them to the consumer with consumer.HooksOf): each hands the owner
// the change of this member's partitions, parts being topic → partitions,
// and waits until it is handled.
func (p *Pipeline) Assigned(ctx context.Context, parts map[string][]int32) {
	p.groupEvent(ctx, eventAssigned, parts)
}

// Revoked is the callback of partitions revoked (see Assigned).
func (p *Pipeline) Revoked(ctx context.Context, parts map[string][]int32) {
	p.groupEvent(ctx, eventRevoked, parts)
}

// Lost is the callback of partitions lost (see Assigned).
func (p *Pipeline) Lost(ctx context.Context, parts map[string][]int32) {
	p.groupEvent(ctx, eventLost, parts)
}

// groupEvent hands a membership change to the owner and waits until it is
// handled: for a revoke, until the revoked partitions' rows are in
// ClickHouse and their offsets committed. Once the loop has stopped (it
// already flushed and committed everything it could), it returns at once.
func (p *Pipeline) groupEvent(ctx context.Context, kind eventKind, m map[string][]int32) {
	ev := groupEvent{kind: kind, parts: m, done: make(chan struct{})}
	select {
	case p.events <- ev:
	case <-p.calls.stopped:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-ev.done:
	case <-p.calls.stopped:
	}
}

// handleEvent routes a group callback to its handler; each closes
// ev.done when the callback may return.
func (p *Pipeline) handleEvent(writeCtx context.Context, ev groupEvent) {
	var tps []offsets.TP
	for t, parts := range ev.parts {
		for _, part := range parts {
			tps = append(tps, offsets.TP{Topic: t, Partition: part})
		}
	}
	switch ev.kind {
	case eventAssigned:
		p.assigned(writeCtx, tps)
		close(ev.done)
	case eventLost:
		p.lost(tps)
		close(ev.done)
	case eventRevoked:
		p.revoked(writeCtx, tps, ev.done)
	}
}

// assigned starts tracking newly assigned partitions; the delivery
// prepares them (exactly-once recovery) before the callback returns.
func (p *Pipeline) assigned(writeCtx context.Context, tps []offsets.TP) {
	// Cooperative rebalances call back with empty sets too; those are
	// worth no info line.
	if len(tps) > 0 {
		p.log.Info().Int("partitions", len(tps)).Msg("partitions assigned")
	}
	p.m.Assigned(len(tps))
	p.assignedSeen(tps)
	p.dlv.OnAssign(writeCtx, tps)
}

// lost drops lost partitions' state: another member may already own them,
// so nothing of them is committed.
func (p *Pipeline) lost(tps []offsets.TP) {
	p.log.Warn().Int("partitions", len(tps)).Msg("partitions lost; dropping their uncommitted state")
	p.forget(tps)
	p.m.Left()
	// A revoke still waiting may have waited for batches the loss
	// dropped (exactly-once): it may be complete now.
	p.revokeDone(0)
}

// revoked seals the revoked partitions' open batches and waits (revokeWait)
// for their batches and dead-letter produces before it commits and closes
// done.
func (p *Pipeline) revoked(writeCtx context.Context, tps []offsets.TP, done chan struct{}) {
	p.m.Revoked(len(tps))
	if len(tps) == 0 {
		close(done)
		return
	}
	p.log.Info().Int("partitions", len(tps)).Msg("partitions revoked: flushing before giving them up")
	p.in.Drop(tps)
	w := &revokeWait{tps: tps, waiting: map[uint64]bool{}, done: done,
		start: p.now(), deadline: p.now().Add(p.cfg.Kafka.RebalanceTimeout / 2)}
	for _, id := range p.disp.SealHolding(writeCtx, tps, dispatch.Revoke) {
		w.waiting[id] = true
	}
	for _, id := range p.in.DeadLetters().Of(tps) {
		w.waiting[id] = true
	}
	p.revoke = w
	p.revokeDone(0)
}

// settled notes that unit id is acknowledged (or dropped) and reports
// whether nothing of the revoked partitions is in flight any more.
func (w *revokeWait) settled(id uint64) bool {
	delete(w.waiting, id)
	return len(w.waiting) == 0
}

// revokeDone notes that unit id is acknowledged and finishes a pending
// revoke once nothing of the revoked partitions is in flight.
func (p *Pipeline) revokeDone(id uint64) {
	w := p.revoke
	if w == nil || !w.settled(id) {
		return
	}
	p.committer.commitNow()
	p.forget(w.tps)
	p.revoke = nil
	p.log.Info().Int("partitions", len(w.tps)).Dur("took", p.now().Sub(w.start)).
		Msg("revoked partitions flushed and committed")
	close(w.done)
}

// checkRevokeDeadline gives up waiting for a revoke's inserts before the
// group's rebalance timeout expels us: the partitions are released without
// a commit for what is still in flight, so the new owner replays it
// (duplicates, never loss).
func (p *Pipeline) checkRevokeDeadline() {
	w := p.revoke
	if w == nil || p.now().Before(w.deadline) {
		return
	}
	p.log.Warn().Int("batches", len(w.waiting)).Msg("revoke: inserts still running at half the rebalance timeout; releasing partitions without committing them")
	p.committer.commitNow()
	p.forget(w.tps)
	p.revoke = nil
	close(w.done)
}

// forget drops every trace of partitions this member no longer owns.
func (p *Pipeline) forget(tps []offsets.TP) {
	p.committer.settle()
	p.dlv.OnRelease(tps)
	p.in.Drop(tps)
	p.committer.forget(tps)
	p.in.Forget(tps)
	p.disp.Forget(tps)
	p.view.forget(tps)
}

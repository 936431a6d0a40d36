package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/batch"
	"sink/internal/decode"
	"sink/internal/offsets"
	"sink/internal/status"
)

// Run consumes until ctx is canceled, then shuts down cleanly: it stops
// fetching, seals and inserts every open batch, commits, and returns nil
// (or an error if shutdown_timeout passed first). It returns early with the
// error when something is fatal: a permanent insert error, a bad record
// with errors.tolerance none, a failed dead-letter produce. Offsets are
// never committed past a record that is not in ClickHouse or the DLQ.
func (p *Pipeline) Run(ctx context.Context) error {
	if p.cons == nil {
		return errors.New("pipeline: Attach a consumer before Run")
	}
	if err := p.dlv.check(ctx); err != nil {
		return err
	}
	defer p.stop()
	defer p.m.Left()
	p.setState(status.Running)
	p.publish()
	close(p.started)
	if p.look != nil {
		p.look.begin(p.lookups, p.stopped)
		defer p.look.end(0) // shutdown waited for them; an early return cancels them
	}
	p.committer = newCommitter()
	go p.committer.run(p.commitOffsets)
	defer p.stopCommitter()
	// Inserts outlive ctx: on SIGTERM the open batches must still be written.
	writeCtx, cancelWrites := context.WithCancel(context.Background())
	defer cancelWrites()
	stopPoller := p.startPoller(writeCtx)
	defer stopPoller()
	c := p.newClocks(writeCtx)
	defer c.stop()
	p.loop(ctx, writeCtx, c)
	return p.finish(writeCtx, cancelWrites, stopPoller)
}

// startPoller starts the poller's goroutine and returns what stops it.
// The poller must be gone before the client closes: a poll still in
// flight would hold the group's rebalance (and so the leave) forever.
// Meanwhile a group callback may be waiting for the owner (a loss
// noticed as the process stops, e.g. after a pause past the session
// timeout), and franz-go does not end the poll until the callback
// returns: the stop handles such events while it waits, and the acks and
// the deadline a revoke begun before the stop waits for.
func (p *Pipeline) startPoller(writeCtx context.Context) (stop func()) {
	pollCtx, cancelPoll := context.WithCancel(context.Background())
	pollerDone := make(chan struct{})
	go func() { defer close(pollerDone); p.poller(pollCtx) }()
	return func() {
		cancelPoll()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			// Checked first: called again (deferred) after the shutdown, a
			// select would pick an ack still buffered as often as the
			// closed pollerDone, and handling it could start the next
			// batch's INSERT after the shutdown joined the INSERTs.
			select {
			case <-pollerDone:
				return
			default:
			}
			select {
			case <-pollerDone:
				return
			case ev := <-p.events:
				p.handleEvent(writeCtx, ev)
			case a := <-p.acks:
				p.handleAck(writeCtx, a)
			case r := <-p.committer.results:
				p.handleCommit(writeCtx, r)
			case req := <-p.controls:
				p.handleControl(writeCtx, req)
			case <-tick.C:
				p.checkRevokeDeadline()
				p.dlv.retryDue(writeCtx)
			}
		}
	}
}

// clocks are the loop's timers: the next deadline (armTimer), and the
// periodic work. A nil channel never fires (schema refresh off, fixed
// batches).
type clocks struct {
	timer                    *time.Timer
	commit, stats, snap, pos *time.Ticker
	schema, parts            <-chan time.Time
	stops                    []func()
	lastStatsAt              time.Time
	lastStats                Stats
}

func (p *Pipeline) newClocks(writeCtx context.Context) *clocks {
	c := &clocks{timer: time.NewTimer(time.Hour), commit: time.NewTicker(p.cfg.Kafka.CommitInterval),
		stats: time.NewTicker(statsInterval), snap: time.NewTicker(p.snapEvery), pos: time.NewTicker(p.posEvery),
		lastStatsAt: p.now()}
	c.stops = []func(){func() { c.timer.Stop() }, c.commit.Stop, c.stats.Stop, c.snap.Stop, c.pos.Stop}
	if d := p.cfg.ClickHouse.SchemaRefresh; d > 0 {
		t := time.NewTicker(d)
		c.stops, c.schema = append(c.stops, t.Stop), t.C
	}
	if p.adaptive() {
		t := time.NewTicker(partsInterval)
		c.stops, c.parts = append(c.stops, t.Stop), t.C
		p.probeParts(writeCtx)
	}
	return c
}

func (c *clocks) stop() {
	for _, f := range c.stops {
		f()
	}
}

// loop routes events to their handlers until ctx is canceled or something
// is fatal.
func (p *Pipeline) loop(ctx, writeCtx context.Context, c *clocks) {
	p.requestPoll()
	for p.fatal == nil && ctx.Err() == nil {
		p.armTimer(c.timer)
		select {
		case <-ctx.Done():
		case f := <-p.fetches:
			p.polling = false
			p.takeFetches(f)
			p.cons.AllowRebalance()
		case <-p.decodable():
			p.decodeSome(writeCtx)
		case a := <-p.acks:
			p.handleAck(writeCtx, a)
		case r := <-p.committer.results:
			p.handleCommit(writeCtx, r)
		case ev := <-p.events:
			p.handleEvent(writeCtx, ev)
			p.publish() // a change of partitions shows at once
		case req := <-p.controls:
			p.handleControl(writeCtx, req)
		case <-c.snap.C:
			p.publish()
		case <-c.pos.C:
			p.probePositions()
		case r := <-p.positions:
			p.handlePositions(r)
		case <-c.timer.C:
			p.due(writeCtx)
		case <-c.commit.C:
			p.commit()
		case <-c.schema:
			p.describeTables(writeCtx)
		case r := <-p.schemas:
			p.handleSchema(writeCtx, r)
		case r := <-p.lookups:
			p.handleLookup(r)
		case <-c.parts:
			p.probeParts(writeCtx)
		case r := <-p.parts:
			p.handleParts(r)
		case <-c.stats.C:
			now := p.now()
			p.logStats(now.Sub(c.lastStatsAt), c.lastStats)
			c.lastStatsAt, c.lastStats = now, p.stats
		}
		if p.state == status.Pausing {
			p.advancePause(writeCtx)
		}
		if p.fatal == nil {
			p.requestPoll()
		}
	}
}

// due does the work whose time has come (armTimer's deadline): batches
// past max_wait, held records to try again, the revoke deadline, the
// delivery's retries.
func (p *Pipeline) due(writeCtx context.Context) {
	p.sealExpired(writeCtx)
	p.retryHeld(writeCtx)
	p.checkRevokeDeadline()
	p.dlv.retryDue(writeCtx)
}

// finish ends a Run whose loop stopped: after a failure it flushes what
// came before it and returns the failure; on ctx's cancel it shuts down
// cleanly (shutdown) and returns what that says.
func (p *Pipeline) finish(writeCtx context.Context, cancelWrites context.CancelFunc, stopPoller func()) error {
	if cause := p.fatal; cause != nil {
		p.failure = cause
		p.setState(status.Failed)
	} else {
		p.setState(status.Stopping)
	}
	p.publish()
	stopPoller()
	if cause := p.fatal; cause != nil {
		// Insert what came before the failure, so a restart after the fix
		// replays as little as possible; nothing past it is committed,
		// because the tracker never saw it acknowledged.
		p.fatal = nil
		p.log.Error().Err(cause).Msg("connector stopping: flushing what came before the failure")
		if err := p.shutdown(writeCtx, cancelWrites); err != nil {
			p.log.Error().Err(err).Msg("flush after the failure was incomplete")
		}
		p.publish()
		return cause
	}
	err := p.shutdown(writeCtx, cancelWrites)
	if err != nil {
		p.failure = err
		p.setState(status.Failed)
	} else {
		p.setState(status.Stopped)
	}
	p.publish()
	return err
}

// shutdown flushes (flush), then cancels what still uses ClickHouse (the
// INSERTs shutdown_timeout cut off, table and parts reads) and joins those
// goroutines, so that when Run returns nothing uses the ClickHouse pool the
// caller closes next. Their results come after the last commit and are
// dropped.
func (p *Pipeline) shutdown(writeCtx context.Context, cancelWrites context.CancelFunc) error {
	err := p.flush(writeCtx, cancelWrites)
	p.stop()
	cancelWrites()
	if jerr := p.join(); jerr != nil {
		p.log.Error().Err(jerr).Msg("shutdown: ClickHouse calls did not end when canceled")
		if err == nil {
			err = jerr
		}
	}
	if p.look != nil && !p.look.end(p.cancelGrace) {
		// They hold nothing the caller closes; their answers are dropped.
		p.log.Warn().Dur("grace", p.cancelGrace).Msg("shutdown: schema registry look-ups did not end when canceled")
	}
	return err
}

// flush seals every open batch, waits for all inserts up to
// shutdown_timeout, and commits. A batch that fails for good while it waits
// is left unacknowledged and reported.
func (p *Pipeline) flush(writeCtx context.Context, cancelWrites context.CancelFunc) error {
	start := p.now()
	p.log.Info().Int("open_batches", p.disp.openBatches()).Int("in_flight", p.disp.inFlight()).
		Msg("shutting down: flushing open batches")
	if n := p.pendingRecords(); n > 0 {
		p.log.Info().Int("records", n).Msg("shutting down with fetched records not decoded yet; they stay uncommitted and are read again on restart")
	}
	if n := p.held.records(); n > 0 {
		p.log.Warn().Int("records", n).Msg("shutting down with held records (waiting for the schema registry or for a table's new column); they stay uncommitted and are read again on restart")
	}
	p.disp.eachOpen(func(a *accState) { p.seal(writeCtx, a, batch.ReasonShutdown) })
	p.abandonBlocked()
	deadline := time.NewTimer(p.cfg.ShutdownTimeout)
	defer deadline.Stop()
	// Intents that wait for a retry (exactly_once, Kafka unreachable) are
	// tried again while the shutdown waits.
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	retrySnap := time.NewTicker(p.snapEvery)
	defer retrySnap.Stop()
	for p.unacked() > 0 {
		select {
		case <-retry.C:
			p.dlv.retryDue(writeCtx)
		case a := <-p.acks:
			p.handleAck(writeCtx, a)
			p.abandonBlocked()
		case r := <-p.committer.results:
			p.handleCommit(writeCtx, r)
		case r := <-p.schemas:
			p.handleSchema(writeCtx, r)
		case ev := <-p.events:
			p.handleEvent(writeCtx, ev)
		case req := <-p.controls:
			p.handleControl(writeCtx, req)
		case <-retrySnap.C:
			p.publish()
		case <-deadline.C:
			stuck := p.stuckOn()
			cancelWrites()
			p.commitNow()
			return fmt.Errorf("shutdown_timeout (%s) passed with %d batches not inserted and %d records not in the dead-letter topic, stuck on %s; committed %s; the rest is consumed again on restart",
				p.cfg.ShutdownTimeout, p.disp.inFlight(), p.dlq.unsettled(), stuck, p.committedSummary())
		}
	}
	p.commitNow()
	if p.fatal != nil {
		return p.fatal
	}
	p.log.Info().Dur("took", p.now().Sub(start)).Int64("rows", p.stats.Rows).Int64("inserts", p.stats.Inserts).
		Msg("flushed and committed")
	return nil
}

// stopCommitter waits for the commit still out, if any, and ends the
// committer's goroutine; later commits are made on the owner.
func (p *Pipeline) stopCommitter() {
	p.settle()
	close(p.committer.jobs)
	<-p.committer.done
	p.committer = nil
}

// unacked counts the batches and dead-letter produces that may still
// succeed (those that failed for good never will).
func (p *Pipeline) unacked() int { return p.disp.inFlight() + p.dlq.unsettled() }

// stuckOn says what the oldest unfinished work is waiting for: a dead-letter
// produce being retried, or a table's INSERT being retried, with the last
// error seen.
func (p *Pipeline) stuckOn() string {
	if oldest := p.dlq.oldest(); oldest != nil {
		msg := fmt.Sprintf("the dead-letter produce of %s to %q", oldest.where(), p.cfg.Errors.DLQTopic)
		if oldest.lastErr != nil {
			msg += fmt.Sprintf(" (%d attempts, last error: %v)", oldest.attempt, oldest.lastErr)
		}
		return msg
	}
	if s := p.dlv.stuckOn(); s != "" {
		return s
	}
	first := p.disp.oldest()
	if first == nil {
		return "nothing"
	}
	msg := fmt.Sprintf("the INSERT of %d rows into %s", first.b.Rows(), first.table.t.FullName())
	if e := first.table.lastFail.Load(); e != nil {
		msg += fmt.Sprintf(" (%d retries, last error: %s)", first.table.retries.Load(), e.msg)
	}
	return msg
}

// poller polls only when asked, so the owner decides how much is buffered.
// Each poll takes everything franz-go has buffered (fetched.go says why).
func (p *Pipeline) poller(ctx context.Context) {
	for {
		select {
		case <-p.want:
		case <-ctx.Done():
			return
		}
		f := p.cons.Poll(ctx)
		select {
		case p.fetches <- f:
		case <-ctx.Done():
			return
		}
	}
}

// handleRecord counts a record as consumed and decodes it (decodeRecord).
// held reports that the record could not be decoded now and must be held,
// with the rest of its partition, for the schema registry or its table's
// new column (held.go); err says why.
func (p *Pipeline) handleRecord(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (err error, held bool) {
	p.consumed(r)
	if p.dlv.skip(tp, r.Offset) {
		// Already a row in the table (exactly-once recovery).
		p.alreadyIn(tp, r)
		return nil, false
	}
	return p.routeRecord(writeCtx, now, tp, r)
}

// alreadyIn handles r, which the delivery found already in its table: no
// row, and its offset is done.
func (p *Pipeline) alreadyIn(tp offsets.TP, r *kgo.Record) {
	p.stats.Skipped++
	p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
}

// consumed counts r in the run's records and bytes; a transaction marker
// is not part of the topic's data and does not count.
func (p *Pipeline) consumed(r *kgo.Record) {
	if !r.Attrs.IsControl() {
		p.stats.Records++
		p.stats.Bytes += int64(len(r.Key) + len(r.Value))
	}
}

// routeRecord hands r to its route's table (decodeRecord) or, when routes
// are chosen per record, to every table its routes' conditions pick
// (handleFanout); held as for handleRecord.
func (p *Pipeline) routeRecord(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (_ error, held bool) {
	if r.Attrs.IsControl() {
		// A transaction's commit or abort marker (the consumer keeps them):
		// no row, handled at once, so the committed offset passes it, and
		// with an abort marker the aborted records before it, which
		// read_committed never hands out. It still waits in the tracker
		// for every record before it.
		p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
		return nil, false
	}
	if p.rt.fanout {
		return p.handleFanout(writeCtx, now, tp, r)
	}
	return p.decodeRecord(writeCtx, now, tp, r)
}

// decodeRecord appends r to its table's open batch, or skips it, or sends
// it to the dead-letter path; held is true (and nothing is done) when its
// schema cannot be fetched now, or when it carries a field its table is
// getting a column for (the row is taken back: evolve.go).
func (p *Pipeline) decodeRecord(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (_ error, held bool) {
	rs, err := p.routeFor(writeCtx, r.Topic)
	if err != nil {
		if !p.badTopic(writeCtx, tp, r, err) {
			p.fatal = err // the topic's table cannot be resolved: stop before this record
		}
		return nil, false
	}
	if rs == nil {
		// A topic matched by kafka.topic_regex but by no route.
		p.unrouted(writeCtx, tp, r)
		return nil, false
	}
	a := p.accFor(rs.table, tp)
	if err := rs.plan.Append(a.acc.Data(), r); err != nil {
		switch {
		case errors.Is(err, decode.ErrTruncate):
			return p.truncateRecord(writeCtx, rs, tp, r)
		case errors.Is(err, decode.ErrSkip):
			// A Debezium tombstone or the like: no row, handled as soon as seen.
			p.stats.Skipped++
			p.topicMetrics(tp.Topic).Skipped()
			p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
		case errors.Is(err, decode.ErrUnavailable):
			return err, true
		default:
			p.badRecord(writeCtx, tp, r, err, rs)
		}
		return nil, false
	}
	if p.dlv.coveredRow(tp, r.Offset) {
		// Already a row in the table (exactly-once recovery), known once
		// decoded since a dead-letter table may hold the offset instead.
		rs.plan.Unappend(a.acc.Data())
		p.alreadyIn(tp, r)
		return nil, false
	}
	if u := rs.plan.LastUnmapped(); len(u) > 0 {
		if err := p.schemaWaitFor(writeCtx, now, rs, u); err != nil {
			rs.plan.Unappend(a.acc.Data())
			return err, true
		}
	}
	p.tracker.Add(tp, r.Offset, r.LeaderEpoch, a.id)
	p.dlv.onRow(a, tp)
	if rs.route.AppliesTruncate() {
		p.noteFeed(rs.table, tp)
	}
	p.added(writeCtx, now, a, tp, r)
	return nil, false
}

// added accounts a record whose row was appended to a's open batch (and
// which the tracker knows): its timestamp for the batch's latency, and the
// batch's triggers, sealing it when full.
func (p *Pipeline) added(writeCtx context.Context, now time.Time, a *accState, tp offsets.TP, r *kgo.Record) {
	if ts := r.Timestamp.UnixNano(); ts > 0 && (a.oldest == 0 || ts < a.oldest) {
		a.oldest = ts // a record without timestamp (at or before the epoch) does not count
	}
	opening := p.sched != nil && a.acc.Empty()
	if full, why := a.acc.Add(now, tp, r.Offset, r.LeaderEpoch); full {
		p.seal(writeCtx, a, why)
	} else if opening {
		p.budgetOpened(a, now)
	}
}

// armTimer sets timer to the earliest max_wait expiry or revoke deadline.
func (p *Pipeline) armTimer(timer *time.Timer) {
	now := p.now()
	next := time.Hour
	if p.sched != nil {
		if d, ok := p.sched.Next(now); ok && d < next {
			next = d
		}
		if p.memShort() {
			next = 0
		}
	} else {
		p.disp.eachOpen(func(a *accState) {
			if d, ok := a.acc.UntilNext(now); ok && d < next {
				next = d
			}
		})
	}
	if p.revoke != nil {
		if d := p.revoke.deadline.Sub(now); d < next {
			next = max(d, 0)
		}
	}
	if d, ok := p.dlv.nextRetry(now); ok && d < next {
		next = d
	}
	if d, ok := p.heldNextRetry(now); ok && d < next {
		next = d
	}
	timer.Reset(next)
}

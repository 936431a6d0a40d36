package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sink/config"
	"sink/internal/pipeline/dispatch"
	"sink/internal/status"
	"sink/internal/tables"
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
	if err := p.dlv.Check(ctx); err != nil {
		return err
	}
	defer p.calls.stop()
	defer p.m.Left()
	p.view.set(p, status.Running)
	p.publish()
	close(p.view.started)
	p.in.BeginLookups()
	defer p.in.EndLookups(0) // shutdown waited for them; an early return cancels them
	p.committer.start()
	defer p.committer.stop()
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
			// select would pick an event still buffered as often as the
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
			case e := <-p.inbox:
				e.Apply(writeCtx)
			case r := <-p.committer.answers():
				p.handleCommit(writeCtx, r)
			case req := <-p.view.controls:
				p.handleControl(writeCtx, req)
			case <-tick.C:
				p.checkRevokeDeadline()
				p.dlv.RetryDue(writeCtx)
			}
		}
	}
}

// clocks are the loop's timers: the next deadline (armTimer), and the
// periodic work, whose ticks one goroutine hands the loop in turn (ticks).
// A nil channel never fires (schema refresh off, fixed batches).
type clocks struct {
	timer                    *time.Timer
	commit, stats, snap, pos *time.Ticker
	schema, parts            <-chan time.Time
	ticks                    chan tick
	done                     chan struct{}
	stops                    []func()
	lastStatsAt              time.Time
	lastStats                Stats
}

// tick is a periodic job whose time has come.
type tick uint8

const (
	tickCommit tick = iota // commit what became safe (kafka.commit_interval)
	tickStats              // the summary line
	tickSnap               // publish the status snapshot
	tickPos                // read the group's positions for the status
	tickSchema             // re-read the tables (clickhouse.schema_refresh)
	tickParts              // read the adaptive tables' parts
)

func (p *Pipeline) newClocks(writeCtx context.Context) *clocks {
	c := &clocks{timer: time.NewTimer(time.Hour), commit: time.NewTicker(p.cfg.Kafka.CommitInterval),
		stats: time.NewTicker(statsInterval), snap: time.NewTicker(p.view.snapEvery), pos: time.NewTicker(p.view.posEvery),
		ticks: make(chan tick), done: make(chan struct{}), lastStatsAt: p.now()}
	c.stops = []func(){func() { c.timer.Stop() }, c.commit.Stop, c.stats.Stop, c.snap.Stop, c.pos.Stop}
	if d := p.cfg.ClickHouse.SchemaRefresh; d > 0 {
		t := time.NewTicker(d)
		c.stops, c.schema = append(c.stops, t.Stop), t.C
	}
	if p.cfg.Batch.Mode == config.BatchAdaptive {
		t := time.NewTicker(dispatch.PartsInterval)
		c.stops, c.parts = append(c.stops, t.Stop), t.C
		p.disp.Tick(writeCtx)
	}
	go c.run()
	return c
}

// run hands the loop each periodic tick, until stop.
func (c *clocks) run() {
	for {
		var t tick
		select {
		case <-c.commit.C:
			t = tickCommit
		case <-c.stats.C:
			t = tickStats
		case <-c.snap.C:
			t = tickSnap
		case <-c.pos.C:
			t = tickPos
		case <-c.schema:
			t = tickSchema
		case <-c.parts:
			t = tickParts
		case <-c.done:
			return
		}
		select {
		case c.ticks <- t:
		case <-c.done:
			return
		}
	}
}

func (c *clocks) stop() {
	close(c.done)
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
			p.in.Take(f)
			p.cons.AllowRebalance()
		case <-p.decodable():
			p.in.DecodeSome(writeCtx)
		case e := <-p.inbox:
			e.Apply(writeCtx)
		case r := <-p.committer.answers():
			p.handleCommit(writeCtx, r)
		case ev := <-p.events:
			p.handleEvent(writeCtx, ev)
			p.publish() // a change of partitions shows at once
		case req := <-p.view.controls:
			p.handleControl(writeCtx, req)
		case <-c.timer.C:
			p.due(writeCtx)
		case t := <-c.ticks:
			p.tick(writeCtx, c, t)
		}
		if p.view.state == status.Pausing {
			p.advancePause(writeCtx)
		}
		if p.fatal == nil {
			p.requestPoll()
		}
	}
}

// tick does the periodic job t.
func (p *Pipeline) tick(writeCtx context.Context, c *clocks, t tick) {
	switch t {
	case tickCommit:
		p.committer.commit()
	case tickStats:
		now := p.now()
		p.logStats(now.Sub(c.lastStatsAt), c.lastStats)
		c.lastStatsAt, c.lastStats = now, p.Stats()
	case tickSnap:
		p.publish()
	case tickPos:
		p.probePositions()
	case tickSchema:
		p.cat.DescribeAll(writeCtx)
	case tickParts:
		p.disp.Tick(writeCtx)
	}
}

// handleTable applies a table's description, read off the owner (a
// refresh, an INSERT's schema error, an ALTER's end), and lets the held
// records that waited for it go on.
func (p *Pipeline) handleTable(writeCtx context.Context, r tables.Result) {
	if err := p.cat.Handle(writeCtx, r); err != nil && p.fatal == nil {
		p.fatal = err
	}
	p.in.Held().Kick()
}

// due does the work whose time has come (armTimer's deadline): batches
// due (past their wait, or as the insert budget says), held records to try again, the revoke deadline, the
// delivery's retries.
func (p *Pipeline) due(writeCtx context.Context) {
	p.disp.Due(writeCtx)
	if p.revoke == nil && p.view.state != status.Paused {
		p.in.Held().Retry(writeCtx)
	}
	p.checkRevokeDeadline()
	p.dlv.RetryDue(writeCtx)
}

// finish ends a Run whose loop stopped: after a failure it flushes what
// came before it and returns the failure; on ctx's cancel it shuts down
// cleanly (shutdown) and returns what that says.
func (p *Pipeline) finish(writeCtx context.Context, cancelWrites context.CancelFunc, stopPoller func()) error {
	if cause := p.fatal; cause != nil {
		p.view.failure = cause
		p.view.set(p, status.Failed)
	} else {
		p.view.set(p, status.Stopping)
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
		p.view.failure = err
		p.view.set(p, status.Failed)
	} else {
		p.view.set(p, status.Stopped)
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
	p.calls.stop()
	cancelWrites()
	if jerr := p.calls.join(); jerr != nil {
		p.log.Error().Err(jerr).Msg("shutdown: ClickHouse calls did not end when canceled")
		if err == nil {
			err = jerr
		}
	}
	if !p.in.EndLookups(p.calls.grace) {
		// They hold nothing the caller closes; their answers are dropped.
		p.log.Warn().Dur("grace", p.calls.grace).Msg("shutdown: schema registry look-ups did not end when canceled")
	}
	return err
}

// flush seals every open batch, waits for all inserts up to
// shutdown_timeout, and commits. A batch that fails for good while it waits
// is left unacknowledged and reported.
func (p *Pipeline) flush(writeCtx context.Context, cancelWrites context.CancelFunc) error {
	start := p.now()
	p.log.Info().Int("open_batches", p.disp.OpenBatches()).Int("in_flight", p.disp.InFlight()).
		Msg("shutting down: flushing open batches")
	if n := p.in.Pending(); n > 0 {
		p.log.Info().Int("records", n).Msg("shutting down with fetched records not decoded yet; they stay uncommitted and are read again on restart")
	}
	if n := p.in.Held().Records(); n > 0 {
		p.log.Warn().Int("records", n).Msg("shutting down with held records (waiting for the schema registry or for a table's new column); they stay uncommitted and are read again on restart")
	}
	p.disp.SealAll(writeCtx, dispatch.Shutdown)
	p.disp.Abandon(p.in.DeadLetters().Abandoned)
	deadline := time.NewTimer(p.cfg.ShutdownTimeout)
	defer deadline.Stop()
	// Intents that wait for a retry (exactly_once, Kafka unreachable) are
	// tried again while the shutdown waits.
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	retrySnap := time.NewTicker(p.view.snapEvery)
	defer retrySnap.Stop()
	for p.unacked() > 0 {
		select {
		case <-retry.C:
			p.dlv.RetryDue(writeCtx)
		case e := <-p.inbox:
			e.Apply(writeCtx)
			p.disp.Abandon(p.in.DeadLetters().Abandoned)
		case r := <-p.committer.answers():
			p.handleCommit(writeCtx, r)
		case ev := <-p.events:
			p.handleEvent(writeCtx, ev)
		case req := <-p.view.controls:
			p.handleControl(writeCtx, req)
		case <-retrySnap.C:
			p.publish()
		case <-deadline.C:
			stuck := p.stuckOn()
			cancelWrites()
			p.committer.commitNow()
			return fmt.Errorf("shutdown_timeout (%s) passed with %d batches not inserted and %d records not in the dead-letter topic, stuck on %s; committed %s; the rest is consumed again on restart",
				p.cfg.ShutdownTimeout, p.disp.InFlight(), p.in.DeadLetters().Unsettled(), stuck, p.committer.summary())
		}
	}
	p.committer.commitNow()
	if p.fatal != nil {
		return p.fatal
	}
	rows, inserts := p.disp.Totals()
	p.log.Info().Dur("took", p.now().Sub(start)).Int64("rows", rows).Int64("inserts", inserts).
		Msg("flushed and committed")
	return nil
}

// unacked counts the batches and dead-letter produces that may still
// succeed (those that failed for good never will).
func (p *Pipeline) unacked() int { return p.disp.InFlight() + p.in.DeadLetters().Unsettled() }

// stuckOn says what the oldest unfinished work is waiting for: a dead-letter
// produce being retried, or a table's INSERT being retried, with the last
// error seen.
func (p *Pipeline) stuckOn() string {
	if s := p.in.DeadLetters().Stuck(); s != "" {
		return s
	}
	if s := p.dlv.StuckOn(); s != "" {
		return s
	}
	return p.disp.StuckOn()
}

// poller polls only when asked, so the owner decides how much is buffered.
// Each poll takes everything franz-go has buffered (intake says why).
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

// armTimer sets timer to the earliest deadline: an open batch due (its
// wait, or the insert budget's say), the revoke's, the delivery's or the
// held records' next retry.
func (p *Pipeline) armTimer(timer *time.Timer) {
	now := p.now()
	next := p.disp.Next(now)
	if p.revoke != nil {
		if d := p.revoke.deadline.Sub(now); d < next {
			next = max(d, 0)
		}
	}
	if d, ok := p.dlv.NextRetry(now); ok && d < next {
		next = d
	}
	if d, ok := p.in.Held().Next(now); ok && d < next && p.revoke == nil && p.view.state != status.Paused {
		next = d
	}
	timer.Reset(next)
}

// failIf stops the connector with err, unless err is nil or something
// already stops it.
func (p *Pipeline) failIf(err error) {
	if err != nil && p.fatal == nil {
		p.fatal = err
	}
}

// handleCommit is the committer's result, as an event of Run: the next
// commit goes out, and the delivery takes up what waited for the result
// (an exactly-once batch whose intent is answered).
func (p *Pipeline) handleCommit(writeCtx context.Context, r commitResult) {
	p.committer.handle(r)
	p.dlv.RetryDue(writeCtx)
}

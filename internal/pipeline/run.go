package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/batch"
	"sink/internal/decode"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/writer"
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
	if p.eo != nil && len(p.eo.windows) == 0 {
		// Refuses what exactly-once cannot work with; remembers the windows.
		if err := p.CheckExactlyOnce(ctx); err != nil {
			return err
		}
	}
	defer close(p.stopped)
	defer p.m.Left()
	// Inserts outlive ctx: on SIGTERM the open batches must still be written.
	writeCtx, cancelWrites := context.WithCancel(context.Background())
	defer cancelWrites()
	pollCtx, cancelPoll := context.WithCancel(context.Background())
	pollerDone := make(chan struct{})
	go func() { defer close(pollerDone); p.poller(pollCtx) }()
	// The poller must be gone before the client closes: a poll still in
	// flight would hold the group's rebalance (and so the leave) forever.
	// Meanwhile a group callback may be waiting for the owner (a loss
	// noticed as the process stops, e.g. after a pause past the session
	// timeout), and franz-go does not end the poll until the callback
	// returns: handle such events while waiting.
	stopPoller := func() {
		cancelPoll()
		for {
			select {
			case <-pollerDone:
				return
			case ev := <-p.events:
				p.handleEvent(writeCtx, ev)
			}
		}
	}
	defer stopPoller()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	commitTick := time.NewTicker(p.cfg.Kafka.CommitInterval)
	defer commitTick.Stop()
	statsTick := time.NewTicker(statsInterval)
	defer statsTick.Stop()
	var schemaTick <-chan time.Time // nil: never
	if d := p.cfg.ClickHouse.SchemaRefresh; d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		schemaTick = t.C
	}
	last := p.now()
	var lastStats Stats

	p.requestPoll()
	for p.fatal == nil && ctx.Err() == nil {
		p.armTimer(timer)
		select {
		case <-ctx.Done():
		case f := <-p.fetches:
			p.polling = false
			p.handleFetches(writeCtx, f)
			p.cons.AllowRebalance()
		case a := <-p.acks:
			p.handleAck(writeCtx, a)
		case ev := <-p.events:
			p.handleEvent(writeCtx, ev)
		case <-timer.C:
			p.sealExpired(writeCtx)
			p.checkRevokeDeadline()
			p.eoRetryDue(writeCtx)
		case <-commitTick.C:
			p.commit()
		case <-schemaTick:
			p.describeTables(writeCtx)
		case r := <-p.schemas:
			p.handleSchema(writeCtx, r)
		case <-statsTick.C:
			now := p.now()
			p.logStats(now.Sub(last), lastStats)
			last, lastStats = now, p.stats
		}
		if p.fatal == nil {
			p.requestPoll()
		}
	}
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
		return cause
	}
	return p.shutdown(writeCtx, cancelWrites)
}

// shutdown seals every open batch, waits for all inserts up to
// shutdown_timeout, and commits. A batch that fails for good while it waits
// is left unacknowledged and reported.
func (p *Pipeline) shutdown(writeCtx context.Context, cancelWrites context.CancelFunc) error {
	start := p.now()
	p.log.Info().Int("open_batches", p.openBatches()).Int("in_flight", len(p.flights)).
		Msg("shutting down: flushing open batches")
	for _, a := range p.accs {
		p.seal(writeCtx, a, batch.ReasonShutdown)
	}
	p.abandonBlocked()
	deadline := time.NewTimer(p.cfg.ShutdownTimeout)
	defer deadline.Stop()
	// Intents that wait for a retry (exactly_once, Kafka unreachable) are
	// tried again while the shutdown waits.
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	for p.unacked() > 0 {
		select {
		case <-retry.C:
			p.eoRetryDue(writeCtx)
		case a := <-p.acks:
			p.handleAck(writeCtx, a)
			p.abandonBlocked()
		case r := <-p.schemas:
			p.handleSchema(writeCtx, r)
		case ev := <-p.events:
			p.handleEvent(writeCtx, ev)
		case <-deadline.C:
			stuck := p.stuckOn()
			cancelWrites()
			p.commit()
			return fmt.Errorf("shutdown_timeout (%s) passed with %d batches not inserted and %d records not in the dead-letter topic, stuck on %s; committed %s; the rest is consumed again on restart",
				p.cfg.ShutdownTimeout, len(p.flights), len(p.dlqs)-p.dlqFailed, stuck, p.committedSummary())
		}
	}
	p.commit()
	if p.fatal != nil {
		return p.fatal
	}
	p.log.Info().Dur("took", p.now().Sub(start)).Int64("rows", p.stats.Rows).Int64("inserts", p.stats.Inserts).
		Msg("flushed and committed")
	return nil
}

// unacked counts the batches and dead-letter produces that may still
// succeed (those that failed for good never will).
func (p *Pipeline) unacked() int { return len(p.flights) + len(p.dlqs) - p.dlqFailed }

// stuckOn says what the oldest unfinished work is waiting for: a dead-letter
// produce being retried, or a table's INSERT being retried, with the last
// error seen.
func (p *Pipeline) stuckOn() string {
	var oldest *dlqState
	var oldestID uint64
	for id, d := range p.dlqs {
		if !d.failed && (oldest == nil || id < oldestID) {
			oldest, oldestID = d, id
		}
	}
	if oldest != nil {
		msg := fmt.Sprintf("the dead-letter produce of %s to %q", oldest.where(), p.cfg.Errors.DLQTopic)
		if oldest.lastErr != nil {
			msg += fmt.Sprintf(" (%d attempts, last error: %v)", oldest.attempt, oldest.lastErr)
		}
		return msg
	}
	if p.eo != nil {
		for ts, r := range p.eo.retries {
			return fmt.Sprintf("recording a batch for %s in Kafka before its INSERT (exactly_once; %d attempts, last error: %v)", ts.t.FullName(), r.attempt, r.lastErr)
		}
	}
	var first *flight
	for _, f := range p.flights {
		if first == nil || f.b.ID < first.b.ID {
			first = f
		}
	}
	if first == nil {
		return "nothing"
	}
	msg := fmt.Sprintf("the INSERT of %d rows into %s", first.b.Rows(), first.table.t.FullName())
	if e := first.table.lastErr.Load(); e != nil {
		msg += fmt.Sprintf(" (%d retries, last error: %s)", first.table.retries.Load(), *e)
	}
	return msg
}

// committedSummary lists the committed position of every partition this
// member tracks ("t[0] up to offset 150, t[1] up to offset 7", or "nothing new").
func (p *Pipeline) committedSummary() string {
	tps := p.tracker.Partitions()
	slices.SortFunc(tps, func(a, b offsets.TP) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	var parts []string
	for _, tp := range tps {
		if c, ok := p.tracker.Position(tp); ok {
			parts = append(parts, fmt.Sprintf("%s[%d] up to offset %d", tp.Topic, tp.Partition, c.Offset))
		}
	}
	if len(parts) == 0 {
		return "nothing new"
	}
	return strings.Join(parts, ", ")
}

func (p *Pipeline) openBatches() int {
	n := 0
	for _, a := range p.accs {
		if !a.acc.Empty() {
			n++
		}
	}
	return n
}

// poller polls only when asked, so the owner decides how much is buffered.
func (p *Pipeline) poller(ctx context.Context) {
	for {
		select {
		case <-p.want:
		case <-ctx.Done():
			return
		}
		f := p.cons.Poll(ctx, maxPoll)
		select {
		case p.fetches <- f:
		case <-ctx.Done():
			return
		}
	}
}

// requestPoll asks for more records unless the buffer budget is used up or
// a revoke is being handled. Not polling is the backpressure: franz-go keeps
// at most one unpolled fetch per broker, so fetching stops too.
func (p *Pipeline) requestPoll() {
	if p.polling || p.revoke != nil {
		return
	}
	used, budget := p.memUsed(), int(p.cfg.Batch.BufferMemory)
	if used >= budget {
		if !p.paused {
			p.paused = true
			p.log.Info().Int("buffered_bytes", used).Int("buffer_memory", budget).
				Msg("buffer full: fetching paused until inserts free space")
		}
		p.m.SetBuffer(used, budget, true)
		return
	}
	p.m.SetBuffer(used, budget, false)
	if p.paused {
		p.paused = false
		p.log.Info().Int("buffered_bytes", used).Msg("fetching resumed")
	}
	p.polling = true
	p.want <- struct{}{}
}

func (p *Pipeline) handleFetches(writeCtx context.Context, f kgo.Fetches) {
	f.EachError(func(t string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		p.log.Warn().Str("topic", t).Int32("partition", part).Err(err).Msg("fetch error")
	})
	now := p.now()
	f.EachPartition(func(fp kgo.FetchTopicPartition) {
		if p.fatal != nil || len(fp.Records) == 0 {
			return
		}
		tp := offsets.TP{Topic: fp.Topic, Partition: fp.Partition}
		lag := fp.HighWatermark - fp.Records[len(fp.Records)-1].Offset - 1
		p.lag[tp] = lag
		p.partMetrics(tp).SetLag(lag, fp.Records[len(fp.Records)-1].Timestamp)
		// Counted per partition fetch, not per record: one add each.
		records, bytes := p.stats.Records, p.stats.Bytes
		for _, r := range fp.Records {
			p.handleRecord(writeCtx, now, tp, r)
			if p.fatal != nil {
				break
			}
		}
		p.topicMetrics(fp.Topic).Consumed(int(p.stats.Records-records), int(p.stats.Bytes-bytes))
	})
}

func (p *Pipeline) handleRecord(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) {
	p.stats.Records++
	p.stats.Bytes += int64(len(r.Key) + len(r.Value))
	if p.eo != nil && p.eoSkip(tp, r.Offset) {
		// Already a row in the table (exactly-once recovery).
		p.stats.Skipped++
		p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
		return
	}
	rs, err := p.routeFor(writeCtx, r.Topic)
	if err != nil {
		p.fatal = err // the topic's table cannot be resolved: stop before this record
		return
	}
	if rs == nil {
		// A topic matched by kafka.topic_regex but by no route: nothing to
		// write, so it is handled as soon as it is seen.
		p.stats.Skipped++
		p.topicMetrics(tp.Topic).Skipped()
		p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
		return
	}
	a := p.accFor(rs.table, tp)
	if err := rs.plan.Append(a.acc.Data().(*decode.Block), r); err != nil {
		if errors.Is(err, decode.ErrSkip) {
			// A Debezium tombstone or the like: no row, handled as soon as seen.
			p.stats.Skipped++
			p.topicMetrics(tp.Topic).Skipped()
			p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
			return
		}
		p.badRecord(writeCtx, tp, r, err)
		return
	}
	p.tracker.Add(tp, r.Offset, r.LeaderEpoch, a.id)
	if p.eo != nil {
		p.eoRow(a, tp)
	}
	if ts := r.Timestamp.UnixNano(); ts > 0 && (a.oldest == 0 || ts < a.oldest) {
		a.oldest = ts // a record without timestamp (at or before the epoch) does not count
	}
	if full, why := a.acc.Add(now, tp, r.Offset, r.LeaderEpoch); full {
		p.seal(writeCtx, a, why)
	}
}

// badRecord diverts a record that cannot be decoded: to the dead-letter
// topic, counted as handled once Kafka has it (see dlqState for what waits
// for that), or, with errors.tolerance none, it stops the connector before
// anything past it is committed.
func (p *Pipeline) badRecord(writeCtx context.Context, tp offsets.TP, r *kgo.Record, err error) {
	if p.cfg.Errors.Tolerance != "all" {
		p.fatal = fmt.Errorf("%w (errors.tolerance is none: stopping; set errors.tolerance: all and errors.dlq_topic to divert bad records)", err)
		return
	}
	id := p.newID()
	d := &dlqState{tp: tp, rec: r, cause: err}
	p.dlqs[id] = d
	p.dlqBytes += d.bytes()
	p.tracker.Add(tp, r.Offset, r.LeaderEpoch, id)
	p.stats.DLQ++
	p.topicMetrics(tp.Topic).DLQ()
	p.log.Warn().Err(err).Str("dlq_topic", p.cfg.Errors.DLQTopic).Msg("bad record sent to the dead-letter topic")
	p.sendDLQ(writeCtx, id, d)
}

// seal closes a's open batch and queues it for insert.
func (p *Pipeline) seal(writeCtx context.Context, a *accState, why batch.Reason) {
	ts := a.key.table
	b := a.acc.Seal(p.now(), a.id, why, p.block(ts))
	if b == nil {
		return
	}
	a.id = p.newID()
	if p.eo != nil {
		p.eoSealed(a, b)
	}
	ts.m.Sealed(why)
	p.flushDefaults(ts)
	p.flights[b.ID] = &flight{b: b, table: ts, tab: ts.t, bytes: b.Data.Bytes(), oldest: a.oldest}
	a.oldest = 0
	ts.queue = append(ts.queue, b)
	p.pump(writeCtx, ts)
}

// pump starts inserts while the table has free slots, in seal order. A
// batch that holds records after a bad record still on its way to the
// dead-letter topic waits for it (blockedBy), and so do the batches queued
// behind it.
func (p *Pipeline) pump(writeCtx context.Context, ts *tableState) {
	for ts.inflight < p.cfg.ClickHouse.MaxInFlight && len(ts.queue) > 0 && !p.eoWaiting(ts) {
		b := ts.queue[0]
		if p.blockedBy(b, false) != nil {
			return
		}
		ts.queue[0] = nil
		ts.queue = ts.queue[1:]
		ts.inflight++
		tab := p.flights[b.ID].tab
		ctx, blk := writeCtx, writer.Block(b.Data.(*decode.Block))
		if p.eo != nil {
			var err error
			if ctx, blk, err = p.eoIntent(writeCtx, ts, b); err != nil {
				if p.eoRetryLater(ts, b, err) {
					ts.inflight--
					return
				}
				// Never inserted without its intent: the batch fails.
				go func(id uint64) { p.acks <- ack{id: id, err: err} }(b.ID)
				continue
			}
		}
		go p.insert(ctx, ts, tab, b, blk)
	}
}

// insert runs on its own goroutine and touches nothing of the owner's but
// the acks and schemas channels and atomic counters. tab is the table's
// layout the batch was decoded for.
func (p *Pipeline) insert(ctx context.Context, ts *tableState, tab *writer.Table, b *batch.Batch, blk writer.Block) {
	start := time.Now()
	onRetry := func(at writer.Attempt) {
		ts.retries.Add(1)
		msg := at.Err.Error()
		ts.lastErr.Store(&msg)
		ts.m.Retry(at.Code)
		p.log.Warn().Str("table", tab.FullName()).Uint64("batch", b.ID).Int("rows", b.Rows()).
			Int("attempt", at.N).Int32("code", at.Code).Str("class", at.Class.String()).
			Dur("retry_in", at.Wait).Err(at.Err).Msg("insert failed, retrying the same block")
	}
	err := p.w.Insert(ctx, tab, blk, b.ID, onRetry, p.refreshFor(ts))
	p.acks <- ack{id: b.ID, err: err, took: time.Since(start)}
}

func (p *Pipeline) handleAck(writeCtx context.Context, a ack) {
	if a.dlq {
		p.handleDLQAck(writeCtx, a)
		return
	}
	f := p.flights[a.id]
	if f == nil {
		return
	}
	ts := f.table
	ts.inflight--
	delete(p.flights, a.id)
	if a.err != nil {
		// The batch stays unacknowledged in the tracker, so its offsets (and
		// everything after them) are never committed: it is consumed again
		// on restart.
		if !errors.Is(a.err, context.Canceled) && p.fatal == nil {
			p.fatal = a.err
		}
		p.revokeDone(a.id)
		return
	}
	rows := f.b.Rows()
	p.tracker.Ack(a.id, f.b.TPs())
	if p.eo != nil {
		p.eoAcked(ts, a.id)
	}
	ts.rows += int64(rows)
	ts.inserts++
	p.stats.Rows += int64(rows)
	p.stats.Inserts++
	var oldest time.Time // zero: no record of the batch had a timestamp
	if f.oldest > 0 {
		oldest = time.Unix(0, f.oldest)
	}
	ts.m.Inserted(rows, a.took, oldest)
	p.log.Debug().Str("table", ts.t.FullName()).Uint64("batch", a.id).Int("rows", rows).Int("bytes", f.bytes).
		Str("reason", f.b.Reason.String()).Int("partitions", len(f.b.Ranges)).Dur("took", a.took).
		Dur("age", p.now().Sub(f.b.Opened)).Msg("inserted")
	blk := f.b.Data.(*decode.Block)
	if f.tab == ts.t && len(ts.free) <= p.cfg.ClickHouse.MaxInFlight { // a block of the current layout
		blk.Reset()
		ts.free = append(ts.free, blk)
	}
	p.pump(writeCtx, ts)
	// Commit at once: inserts are few by design, so one commit round trip
	// per insert is cheap, and it shrinks what a crash replays to the
	// batches still in flight (commit_interval still covers DLQ and skips).
	if p.revoke == nil {
		p.commit()
	}
	p.revokeDone(a.id)
}

// sealExpired seals every batch whose max_wait has passed.
func (p *Pipeline) sealExpired(writeCtx context.Context) {
	now := p.now()
	for _, a := range p.accs {
		if d, ok := a.acc.UntilNext(now); ok && d <= 0 {
			p.seal(writeCtx, a, batch.ReasonWait)
		}
	}
}

// armTimer sets timer to the earliest max_wait expiry or revoke deadline.
func (p *Pipeline) armTimer(timer *time.Timer) {
	now := p.now()
	next := time.Hour
	for _, a := range p.accs {
		if d, ok := a.acc.UntilNext(now); ok && d < next {
			next = d
		}
	}
	if p.revoke != nil {
		if d := p.revoke.deadline.Sub(now); d < next {
			next = max(d, 0)
		}
	}
	if d, ok := p.eoNextRetry(now); ok && d < next {
		next = d
	}
	timer.Reset(next)
}

// commit sends every position that became safe since the last commit.
// A failed commit is retried with the next one; positions only move forward.
func (p *Pipeline) commit() {
	c := p.tracker.Committable()
	for tp, pos := range p.uncommitted {
		if _, newer := c[tp]; !newer {
			if c == nil {
				c = map[offsets.TP]offsets.Commit{}
			}
			c[tp] = pos
		}
	}
	if len(c) == 0 {
		if p.unacked() == 0 && p.openBatches() == 0 {
			// Nothing handled is uncommitted: as good as a fresh commit,
			// so an idle topic does not look like a stuck commit.
			p.m.Committed(p.now())
		}
		return
	}
	ctx := context.Background()
	var ledgers map[offsets.TP]eos.Ledger
	if p.eo != nil {
		if c, ctx, ledgers = p.eoCommit(c); len(c) == 0 {
			return
		}
	}
	if err := p.cons.Commit(ctx, c); err != nil {
		p.log.Warn().Err(err).Int("partitions", len(c)).Msg("offset commit failed; will retry")
		p.uncommitted = c
		return
	}
	p.uncommitted = nil
	if p.eo != nil {
		p.eoCommitted(ledgers)
	}
	p.m.Committed(p.now())
	p.log.Debug().Int("partitions", len(c)).Msg("committed")
}

func (p *Pipeline) handleEvent(writeCtx context.Context, ev groupEvent) {
	var tps []offsets.TP
	for t, parts := range ev.parts {
		for _, part := range parts {
			tps = append(tps, offsets.TP{Topic: t, Partition: part})
		}
	}
	switch ev.kind {
	case "assigned":
		// Cooperative rebalances call back with empty sets too; those are
		// worth no info line.
		if len(tps) > 0 {
			p.log.Info().Int("partitions", len(tps)).Msg("partitions assigned")
		}
		p.m.Assigned(len(tps))
		if p.eo != nil {
			if err := p.eoRecover(writeCtx, tps); err != nil && p.fatal == nil {
				p.fatal = err
			}
		}
		close(ev.done)
	case "lost":
		// Another member may already own them: never commit for them.
		p.log.Warn().Int("partitions", len(tps)).Msg("partitions lost; dropping their uncommitted state")
		p.forget(tps)
		p.m.Left()
		close(ev.done)
	case "revoked":
		p.m.Revoked(len(tps))
		if len(tps) == 0 {
			close(ev.done)
			return
		}
		p.log.Info().Int("partitions", len(tps)).Msg("partitions revoked: flushing before giving them up")
		for _, a := range p.accs {
			for _, tp := range tps {
				if a.acc.Holds(tp) {
					p.seal(writeCtx, a, batch.ReasonRevoke)
					break
				}
			}
		}
		w := &revokeWait{tps: tps, waiting: map[uint64]bool{}, done: ev.done,
			start: p.now(), deadline: p.now().Add(p.cfg.Kafka.RebalanceTimeout / 2)}
		for id, f := range p.flights {
			for _, tp := range tps {
				if f.b.Holds(tp) {
					w.waiting[id] = true
					break
				}
			}
		}
		for id, d := range p.dlqs {
			if slices.Contains(tps, d.tp) {
				w.waiting[id] = true
			}
		}
		p.revoke = w
		p.revokeDone(0)
	}
}

// revokeDone notes that unit id is acknowledged and finishes a pending
// revoke once nothing of the revoked partitions is in flight.
func (p *Pipeline) revokeDone(id uint64) {
	w := p.revoke
	if w == nil {
		return
	}
	delete(w.waiting, id)
	if len(w.waiting) > 0 {
		return
	}
	p.commit()
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
	p.commit()
	p.forget(w.tps)
	p.revoke = nil
	close(w.done)
}

// forget drops every trace of partitions this member no longer owns.
func (p *Pipeline) forget(tps []offsets.TP) {
	if p.eo != nil {
		p.eoRelease(tps)
	}
	for _, tp := range tps {
		p.tracker.Forget(tp)
		delete(p.lag, tp)
		if _, ok := p.partM[tp]; ok {
			delete(p.partM, tp)
			p.m.ForgetPartition(tp.Topic, tp.Partition)
		}
		delete(p.uncommitted, tp)
		if !p.cfg.Batch.IgnorePartitions {
			for k, a := range p.accs {
				if k.tp == tp && a.acc.Empty() {
					delete(p.accs, k)
				}
			}
		}
	}
}

func (p *Pipeline) logStats(elapsed time.Duration, prev Stats) {
	var lag int64
	for _, l := range p.lag {
		lag += l
	}
	rows, inserts := p.stats.Rows-prev.Rows, p.stats.Inserts-prev.Inserts
	perInsert := 0.0
	if inserts > 0 {
		perInsert = float64(rows) / float64(inserts)
	}
	var retries int64
	for _, ts := range p.tables {
		retries += ts.retries.Load()
	}
	p.log.Info().
		Float64("rows_per_sec", float64(rows)/elapsed.Seconds()).
		Int64("rows", rows).
		Int64("inserts", inserts).
		Float64("rows_per_insert", perInsert).
		Int64("records", p.stats.Records-prev.Records).
		Int64("dlq", p.stats.DLQ-prev.DLQ).
		Int64("lag", lag).
		Int("buffered_bytes", p.memUsed()).
		Int("in_flight", len(p.flights)).
		Bool("paused", p.paused).
		Int64("retries_total", retries).
		Msg("stats")
}

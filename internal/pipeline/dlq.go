package pipeline

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/backoff"
	"sink/internal/kafkaerr"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// dlqState is one bad record on its way to the dead-letter topic. It is
// owned by the Run goroutine like everything else; produce callbacks and
// retry timers only send acks.
//
// The rule that keeps "never past it" and "no duplicates on restart": a
// sealed batch that holds a record of a partition after a record whose
// dead-letter produce has not succeeded is not inserted (blockedBy). A
// produce normally succeeds within milliseconds, so this costs nothing; while
// the DLQ is unavailable the batches wait like batches whose INSERTs are
// retried (they fill batch.buffer_memory, then fetching pauses); and if the
// produce fails for good the connector stops without having inserted
// anything past the record, so the restart replays it without duplicates.
type dlqState struct {
	tp      offsets.TP
	rec     *kgo.Record
	cause   error
	refOnly bool            // send a reference without the value (the broker refused the size)
	attempt int             // failed attempts so far
	backoff backoff.Backoff // the inserts' schedule: retry_initial doubling up to retry_max, equal jitter
	lastErr error           // the last failed attempt's error, for the stop line
	failed  bool            // failed for good: the connector is stopping
}

func (d *dlqState) bytes() int { return len(d.rec.Key) + len(d.rec.Value) }

// deadLetters are the bad records whose dead-letter produce has not
// succeeded, by unit id: what they weigh in the buffer budget, how many
// failed for good, and which batches must wait for them (blockedBy).
// The zero value is empty. Owned by the Run goroutine.
type deadLetters struct {
	m      map[uint64]*dlqState
	weight int // key and value bytes of the records in m (part of batch.buffer_memory)
	failed int // those that failed for good
}

func (q *deadLetters) add(id uint64, d *dlqState) {
	if q.m == nil {
		q.m = map[uint64]*dlqState{}
	}
	q.m[id] = d
	q.weight += d.bytes()
}

// remove forgets a settled produce.
func (q *deadLetters) remove(id uint64, d *dlqState) {
	delete(q.m, id)
	q.weight -= d.bytes()
	if d.failed {
		q.failed--
	}
}

// failedForGood marks d's produce as one that will never succeed.
func (q *deadLetters) failedForGood(d *dlqState) {
	d.failed = true
	q.failed++
}

// unsettled counts the produces that may still succeed.
func (q *deadLetters) unsettled() int { return len(q.m) - q.failed }

// of lists the ids of the produces of records of tps.
func (q *deadLetters) of(tps []offsets.TP) []uint64 {
	var ids []uint64
	for id, d := range q.m {
		if slices.Contains(tps, d.tp) {
			ids = append(ids, id)
		}
	}
	return ids
}

// oldest is the earliest produce still being tried (nil: none).
func (q *deadLetters) oldest() *dlqState {
	var oldest *dlqState
	var oldestID uint64
	for id, d := range q.m {
		if !d.failed && (oldest == nil || id < oldestID) {
			oldest, oldestID = d, id
		}
	}
	return oldest
}

// blockedBy returns the unsettled dead-letter produce that b must wait for:
// one of a partition b holds, for a record before the last one b holds of
// it (only among those that failed for good when failedOnly). Few records
// are ever waiting for the DLQ, so the scan is short.
func (q *deadLetters) blockedBy(b *sealedBatch, failedOnly bool) *dlqState {
	if len(q.m) == 0 {
		return nil
	}
	for _, r := range b.Ranges {
		for _, d := range q.m {
			if d.tp == r.TP && d.rec.Offset < r.Last && (d.failed || !failedOnly) {
				return d
			}
		}
	}
	return nil
}

// where names the record as the error lines do.
func (d *dlqState) where() string {
	return fmt.Sprintf("%s[%d] offset %d", d.tp.Topic, d.tp.Partition, d.rec.Offset)
}

// sendDLQ starts (or restarts) the produce of d's copy.
func (p *Pipeline) sendDLQ(writeCtx context.Context, id uint64, d *dlqState) {
	p.cons.ProduceDLQ(writeCtx, p.cfg.Errors.DLQTopic, d.rec, tables.Classified(d.cause), d.refOnly, func(err error) {
		p.post(produced{p: p, id: id, err: err})
	})
}

// produced settles a dead-letter produce: success acknowledges the
// record and frees the batches waiting for it; a retriable error produces
// the copy again after a backoff; a size refusal sends a reference without
// the value; anything else stops the connector.
func (p *Pipeline) produced(writeCtx context.Context, a produced) {
	d := p.dlq.m[a.id]
	if d == nil {
		return
	}
	if a.err == nil {
		p.dropDLQ(a.id, d)
		p.tracker.Ack(a.id, []offsets.TP{d.tp})
		p.revokeDone(a.id)
		p.cat.EachTable(func(ts *tables.Table) { p.pump(writeCtx, ts) })
		return
	}
	d.lastErr = a.err
	v := kafkaerr.Classify(a.err)
	switch v.Class {
	case kafkaerr.Canceled:
		// Stopping: the record stays unacknowledged and is consumed again.
		p.dropDLQ(a.id, d)
		p.revokeDone(a.id)
		return
	case kafkaerr.TooLarge:
		if !d.refOnly {
			d.refOnly = true
			p.log.Warn().Err(a.err).Str("record", d.where()).Str("dlq_topic", p.cfg.Errors.DLQTopic).
				Msg("dead-letter copy refused as too large: sending a reference without the value")
			p.sendDLQ(writeCtx, a.id, d)
			return
		}
	case kafkaerr.Retriable, kafkaerr.UnknownTopic:
		// The topic was checked at start: unknown now, it is a broker that
		// has not heard of it yet, or one being replaced.
		if d.attempt == 0 {
			d.backoff = backoff.New(backoff.Policy{Initial: p.cfg.ClickHouse.RetryInitial, Max: p.cfg.ClickHouse.RetryMax, Jitter: backoff.EqualJitter})
		}
		d.attempt++
		sleep := d.backoff.Next()
		p.log.Warn().Err(a.err).Str("record", d.where()).Str("dlq_topic", p.cfg.Errors.DLQTopic).
			Int("attempt", d.attempt).Str("why", v.Reason).Dur("retry_in", sleep).
			Msg("dead-letter produce failed, retrying; later records of the partition wait")
		time.AfterFunc(sleep, func() { p.sendDLQ(writeCtx, a.id, d) })
		return
	}
	p.dlq.failedForGood(d)
	if p.fatal == nil {
		p.fatal = fmt.Errorf("dead-letter produce of %s to %q failed: %w; nothing after it in that partition was inserted or committed",
			d.where(), p.cfg.Errors.DLQTopic, a.err)
	}
}

// dropDLQ forgets a settled dead-letter produce (acknowledged, or canceled
// at shutdown: no produce of it is under way, and none will start) and
// recycles its record, which nothing else holds (fetched.go).
func (p *Pipeline) dropDLQ(id uint64, d *dlqState) {
	p.dlq.remove(id, d)
	p.recycle(d.rec)
}

// abandonBlocked drops the queued batches that wait for a dead-letter
// produce that failed for good: inserting them would put rows past the
// unhandled record into ClickHouse, to be inserted again after the restart.
// They stay unacknowledged, so nothing of them is committed.
func (p *Pipeline) abandonBlocked() {
	if p.dlq.failed == 0 {
		return
	}
	p.cat.EachTable(func(ts *tables.Table) {
		p.disp.withdrawQueued(ts, func(b *sealedBatch) bool {
			d := p.dlq.blockedBy(b, true)
			if d == nil {
				return false
			}
			p.log.Warn().Str("table", ts.Name()).Uint64("batch", b.ID).Int("rows", b.Rows()).
				Str("after", d.where()).Msg("batch not inserted: it holds records after a record the dead-letter topic did not take")
			return true
		})
	})
}

// badRecord diverts a record that cannot be decoded: to the dead-letter
// topic, counted as handled once Kafka has it (see dlqState for what waits
// for that), and/or to its dead-letter table, handled once its row is
// inserted (dlqtable.go); or, with errors.tolerance none, it stops the
// connector before anything past it is committed. rs is the route the
// record was meant for (nil: none takes it).
//
// Under exactly-once a bad record that recovery found handled is skipped
// (the delivery's deadLettered): its row is in its dead-letter table, or it has none
// and its copy went to the topic; with both, only the copy is sent again.
func (p *Pipeline) badRecord(writeCtx context.Context, tp offsets.TP, r *kgo.Record, err error, rs *tables.Route) {
	row := true
	if p.dlv.DeadLettered(tp, r.Offset, rs) {
		if p.cfg.Errors.DLQTopic == "" || p.cat.DeadLetters().TableOf(rs) == nil {
			p.alreadyIn(tp, r)
			return
		}
		row = false // the topic stays at-least-once: its copy is sent again
	}
	units, acc, ok := p.divert(writeCtx, tp, r, err, rs, row)
	if !ok {
		return
	}
	if len(units) == 1 {
		p.tracker.Add(tp, r.Offset, r.LeaderEpoch, units[0])
	} else {
		p.tracker.AddShared(tp, r.Offset, r.LeaderEpoch, units)
	}
	if acc != nil {
		p.added(writeCtx, p.now(), acc, tp, r) // only now may its batch seal
	}
}

// divert starts the dead-letter produce of r and/or, when row, appends its
// row to its dead-letter table's open batch, and returns the units its record is
// tracked under, which the caller adds to the tracker (AddShared when
// both), and the batch that holds its row (nil: none), which the caller
// passes to added once the record is tracked. ok is false when
// errors.tolerance is none, or the row cannot be built: the connector
// stops instead.
func (p *Pipeline) divert(writeCtx context.Context, tp offsets.TP, r *kgo.Record, err error, rs *tables.Route, row bool) (units []uint64, acc *accState, ok bool) {
	if p.cfg.Errors.Tolerance != "all" {
		p.fatal = fmt.Errorf("%w (errors.tolerance is none: stopping; set errors.tolerance: all and errors.dlq_topic or errors.dlq_table to divert bad records)", err)
		return nil, nil, false
	}
	meant := tables.MeantFor(rs)
	if ts := p.cat.DeadLetters().TableOf(rs); ts != nil && row {
		a, rerr := p.deadLetterRow(ts, tp, r, err, meant)
		if rerr != nil {
			p.fatal = rerr
			return nil, nil, false
		}
		units, acc = append(units, a.id), a
	}
	p.stats.DLQ++
	p.cat.DeadLetters().Count(meant)
	p.topicMetrics(tp.Topic).DLQ()
	if p.cfg.Errors.DLQTopic == "" {
		if acc == nil { // config.Validate refuses such a config
			p.fatal = fmt.Errorf("%w (no dead-letter table for it and no errors.dlq_topic: stopping)", err)
			return nil, nil, false
		}
		p.log.Warn().Err(err).Str("dlq_table", acc.key.table.Name()).Msg("bad record written to the dead-letter table")
		return units, acc, true
	}
	id := p.newID()
	p.taken = r // recycled by dropDLQ, not by the decode loop
	d := &dlqState{tp: tp, rec: r, cause: err}
	p.dlq.add(id, d)
	p.log.Warn().Err(err).Str("dlq_topic", p.cfg.Errors.DLQTopic).Msg("bad record sent to the dead-letter topic")
	p.sendDLQ(writeCtx, id, d)
	return append(units, id), acc, true
}

// deadLetterRow appends r's dead-letter row to ts's open batch and returns
// that batch; the caller tracks r under its unit, then calls added.
func (p *Pipeline) deadLetterRow(ts *tables.Table, tp offsets.TP, r *kgo.Record, cause error, meant string) (*accState, error) {
	a := p.accFor(ts, tp)
	if err := p.cat.DeadLetters().Append(a.acc.Data(), ts, r, cause, meant); err != nil {
		return nil, err
	}
	p.dlv.OnRow(a.id, tp)
	return a, nil
}

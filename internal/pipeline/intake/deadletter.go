package intake

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/backoff"
	"sink/internal/kafkaerr"
	"sink/internal/offsets"
	"sink/internal/pipeline/dispatch"
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

// DeadLetters are the bad records whose dead-letter produce has not
// succeeded, by unit id: what they weigh in the buffer budget, how many
// failed for good, and which batches must wait for them (blockedBy); and
// the produces themselves, retried until Kafka has the copy. Owned by the
// owner goroutine, like the Intake it belongs to.
type DeadLetters struct {
	in     *Intake
	m      map[uint64]*dlqState
	weight int // key and value bytes of the records in m (part of batch.buffer_memory)
	failed int // those that failed for good
}

func (q *DeadLetters) add(id uint64, d *dlqState) {
	if q.m == nil {
		q.m = map[uint64]*dlqState{}
	}
	q.m[id] = d
	q.weight += d.bytes()
}

// remove forgets a settled produce.
func (q *DeadLetters) remove(id uint64, d *dlqState) {
	delete(q.m, id)
	q.weight -= d.bytes()
	if d.failed {
		q.failed--
	}
}

// failedForGood marks d's produce as one that will never succeed.
func (q *DeadLetters) failedForGood(d *dlqState) {
	d.failed = true
	q.failed++
}

// Unsettled counts the produces that may still succeed (those that
// failed for good never will).
func (q *DeadLetters) Unsettled() int { return len(q.m) - q.failed }

// Of lists the units of the produces of records of tps (a revoke waits
// for them).
func (q *DeadLetters) Of(tps []offsets.TP) []uint64 {
	var ids []uint64
	for id, d := range q.m {
		if slices.Contains(tps, d.tp) {
			ids = append(ids, id)
		}
	}
	return ids
}

// oldest is the earliest produce still being tried (nil: none).
func (q *DeadLetters) oldest() *dlqState {
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
func (q *DeadLetters) blockedBy(b *dispatch.Batch, failedOnly bool) *dlqState {
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

// send starts (or restarts) the produce of d's copy.
func (q *DeadLetters) send(writeCtx context.Context, id uint64, d *dlqState) {
	in := q.in
	in.src().ProduceDLQ(writeCtx, in.cfg.Errors.DLQTopic, d.rec, tables.Classified(d.cause), d.refOnly, func(err error) {
		in.own.Post(produced{q: q, id: id, err: err})
	})
}

// produced settles a dead-letter produce: success acknowledges the
// record and frees the batches waiting for it; a retriable error produces
// the copy again after a backoff; a size refusal sends a reference without
// the value; anything else stops the connector.
func (q *DeadLetters) produced(writeCtx context.Context, a produced) {
	in := q.in
	d := q.m[a.id]
	if d == nil {
		return
	}
	if a.err == nil {
		q.drop(a.id, d)
		in.tracker.Ack(a.id, []offsets.TP{d.tp})
		in.own.Settled(a.id)
		in.batches.PumpAll(writeCtx)
		return
	}
	d.lastErr = a.err
	v := kafkaerr.Classify(a.err)
	switch v.Class {
	case kafkaerr.Canceled:
		// Stopping: the record stays unacknowledged and is consumed again.
		q.drop(a.id, d)
		in.own.Settled(a.id)
		return
	case kafkaerr.TooLarge:
		if !d.refOnly {
			d.refOnly = true
			in.log.Warn().Err(a.err).Str("record", d.where()).Str("dlq_topic", in.cfg.Errors.DLQTopic).
				Msg("dead-letter copy refused as too large: sending a reference without the value")
			q.send(writeCtx, a.id, d)
			return
		}
	case kafkaerr.Retriable, kafkaerr.UnknownTopic:
		// The topic was checked at start: unknown now, it is a broker that
		// has not heard of it yet, or one being replaced.
		if d.attempt == 0 {
			d.backoff = backoff.New(backoff.Policy{Initial: in.cfg.ClickHouse.RetryInitial, Max: in.cfg.ClickHouse.RetryMax, Jitter: backoff.EqualJitter})
		}
		d.attempt++
		sleep := d.backoff.Next()
		in.log.Warn().Err(a.err).Str("record", d.where()).Str("dlq_topic", in.cfg.Errors.DLQTopic).
			Int("attempt", d.attempt).Str("why", v.Reason).Dur("retry_in", sleep).
			Msg("dead-letter produce failed, retrying; later records of the partition wait")
		time.AfterFunc(sleep, func() { q.send(writeCtx, a.id, d) })
		return
	}
	q.failedForGood(d)
	in.own.Fail(fmt.Errorf("dead-letter produce of %s to %q failed: %w; nothing after it in that partition was inserted or committed",
		d.where(), in.cfg.Errors.DLQTopic, a.err))
}

// drop forgets a settled dead-letter produce (acknowledged, or canceled
// at shutdown: no produce of it is under way, and none will start) and
// recycles its record, which nothing else holds (intake.go, release).
func (q *DeadLetters) drop(id uint64, d *dlqState) {
	q.remove(id, d)
	q.in.recycle(d.rec)
}

// produced is the answer to a dead-letter produce.
type produced struct {
	q   *DeadLetters
	id  uint64
	err error
}

// Apply settles the produce (DeadLetters.produced).
func (e produced) Apply(ctx context.Context) { e.q.produced(ctx, e) }

// DeadLetters is the bad records on their way to the dead-letter topic.
func (in *Intake) DeadLetters() *DeadLetters { return &in.dlq }

// Blocks reports whether b holds a record after one of the same partition
// still on its way to the dead-letter topic: it waits for it.
func (q *DeadLetters) Blocks(b *dispatch.Batch) bool { return q.blockedBy(b, false) != nil }

// Abandoned names the record whose dead-letter produce failed for good
// that b holds records after (ok false: none): b must never be inserted,
// since that would put rows past the unhandled record into ClickHouse, to
// be inserted again after the restart.
func (q *DeadLetters) Abandoned(b *dispatch.Batch) (after string, ok bool) {
	if q.failed == 0 {
		return "", false
	}
	if d := q.blockedBy(b, true); d != nil {
		return d.where(), true
	}
	return "", false
}

// Stuck names the oldest dead-letter produce still being tried, with its
// attempts and last error ("" when none), for the shutdown_timeout line.
func (q *DeadLetters) Stuck() string {
	oldest := q.oldest()
	if oldest == nil {
		return ""
	}
	msg := fmt.Sprintf("the dead-letter produce of %s to %q", oldest.where(), q.in.cfg.Errors.DLQTopic)
	if oldest.lastErr != nil {
		msg += fmt.Sprintf(" (%d attempts, last error: %v)", oldest.attempt, oldest.lastErr)
	}
	return msg
}

// badRecord diverts a record that cannot be decoded: to the dead-letter
// topic, counted as handled once Kafka has it (see dlqState for what waits
// for that), and/or to its dead-letter table, handled once its row is
// inserted (internal/tables); or, with errors.tolerance none, it stops the
// connector before anything past it is committed. rs is the route the
// record was meant for (nil: none takes it).
//
// Under exactly-once a bad record that recovery found handled is skipped
// (the delivery's deadLettered): its row is in its dead-letter table, or it has none
// and its copy went to the topic; with both, only the copy is sent again.
func (in *Intake) badRecord(writeCtx context.Context, tp offsets.TP, r *kgo.Record, err error, rs *tables.Route) {
	row := true
	if in.dlv.DeadLettered(tp, r.Offset, rs) {
		if in.cfg.Errors.DLQTopic == "" || in.cat.DeadLetters().TableOf(rs) == nil {
			in.alreadyIn(tp, r)
			return
		}
		row = false // the topic stays at-least-once: its copy is sent again
	}
	units, acc, ok := in.divert(writeCtx, tp, r, err, rs, row)
	if !ok {
		return
	}
	if len(units) == 1 {
		in.tracker.Add(tp, r.Offset, r.LeaderEpoch, units[0])
	} else {
		in.tracker.AddShared(tp, r.Offset, r.LeaderEpoch, units)
	}
	if acc != nil {
		in.batches.Added(writeCtx, in.now(), acc, tp, r) // only now may its batch seal
	}
}

// divert starts the dead-letter produce of r and/or, when row, appends its
// row to its dead-letter table's open batch, and returns the units its record is
// tracked under, which the caller adds to the tracker (AddShared when
// both), and the batch that holds its row (nil: none), which the caller
// passes to added once the record is tracked. ok is false when
// errors.tolerance is none, or the row cannot be built: the connector
// stops instead.
func (in *Intake) divert(writeCtx context.Context, tp offsets.TP, r *kgo.Record, err error, rs *tables.Route, row bool) (units []uint64, acc *dispatch.Open, ok bool) {
	if in.cfg.Errors.Tolerance != "all" {
		in.own.Fail(fmt.Errorf("%w (errors.tolerance is none: stopping; set errors.tolerance: all and errors.dlq_topic or errors.dlq_table to divert bad records)", err))
		return nil, nil, false
	}
	meant := tables.MeantFor(rs)
	if ts := in.cat.DeadLetters().TableOf(rs); ts != nil && row {
		a, rerr := in.deadLetterRow(ts, tp, r, err, meant)
		if rerr != nil {
			in.own.Fail(rerr)
			return nil, nil, false
		}
		units, acc = append(units, a.ID()), a
	}
	in.stats.DLQ++
	in.cat.DeadLetters().Count(meant)
	in.topicMetrics(tp.Topic).DLQ()
	if in.cfg.Errors.DLQTopic == "" {
		if acc == nil { // config.Validate refuses such a config
			in.own.Fail(fmt.Errorf("%w (no dead-letter table for it and no errors.dlq_topic: stopping)", err))
			return nil, nil, false
		}
		in.log.Warn().Err(err).Str("dlq_table", acc.Table().Name()).Msg("bad record written to the dead-letter table")
		return units, acc, true
	}
	id := in.own.NewID()
	in.taken = r // recycled by drop once settled, not by the decode loop
	d := &dlqState{tp: tp, rec: r, cause: err}
	in.dlq.add(id, d)
	in.log.Warn().Err(err).Str("dlq_topic", in.cfg.Errors.DLQTopic).Msg("bad record sent to the dead-letter topic")
	in.dlq.send(writeCtx, id, d)
	return append(units, id), acc, true
}

// deadLetterRow appends r's dead-letter row to ts's open batch and returns
// that batch; the caller tracks r under its unit, then calls added.
func (in *Intake) deadLetterRow(ts *tables.Table, tp offsets.TP, r *kgo.Record, cause error, meant string) (*dispatch.Open, error) {
	a := in.batches.Open(ts, tp)
	if err := in.cat.DeadLetters().Append(a.Block(), ts, r, cause, meant); err != nil {
		return nil, err
	}
	in.dlv.OnRow(a.ID(), tp)
	return a, nil
}

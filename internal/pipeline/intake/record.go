package intake

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/cdc"
	"sink/internal/decode"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// Record counts a record as consumed and decodes it (decodeRecord): the
// per-record step of the decode loop. held reports that the record could
// not be decoded now and must be held, with the rest of its partition,
// for the schema registry or its table's new column (held.go); err says
// why.
func (in *Intake) Record(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (err error, held bool) {
	in.consumed(r)
	if in.dlv.Skip(tp, r.Offset) {
		// Already a row in the table (exactly-once recovery).
		in.alreadyIn(tp, r)
		return nil, false
	}
	return in.routeRecord(writeCtx, now, tp, r)
}

// alreadyIn handles r, which the delivery found already in its table: no
// row, and its offset is done.
func (in *Intake) alreadyIn(tp offsets.TP, r *kgo.Record) {
	in.stats.Skipped++
	in.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
}

// consumed counts r in the run's records and bytes; a transaction marker
// is not part of the topic's data and does not count.
func (in *Intake) consumed(r *kgo.Record) {
	if !r.Attrs.IsControl() {
		in.stats.Records++
		in.stats.Bytes += int64(len(r.Key) + len(r.Value))
	}
}

// routeRecord hands r to its route's table (decodeRecord) or, when routes
// are chosen per record, to every table its routes' conditions pick
// (handleFanout); held as for Record.
func (in *Intake) routeRecord(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (_ error, held bool) {
	if r.Attrs.IsControl() {
		// A transaction's commit or abort marker (the consumer keeps them):
		// no row, handled at once, so the committed offset passes it, and
		// with an abort marker the aborted records before it, which
		// read_committed never hands out. It still waits in the tracker
		// for every record before it.
		in.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
		return nil, false
	}
	if in.cat.Fanout() {
		return in.handleFanout(writeCtx, now, tp, r)
	}
	return in.decodeRecord(writeCtx, now, tp, r)
}

// decodeRecord appends r to its table's open batch, or skips it, or sends
// it to the dead-letter path; held is true (and nothing is done) when its
// schema cannot be fetched now, or when it carries a field its table is
// getting a column for (the row is taken back: internal/tables).
func (in *Intake) decodeRecord(writeCtx context.Context, now time.Time, tp offsets.TP, r *kgo.Record) (_ error, held bool) {
	rs, err := in.cat.RouteFor(writeCtx, r.Topic)
	if err != nil {
		if !in.badTopic(writeCtx, tp, r, err) {
			in.own.Fail(err) // the topic's table cannot be resolved: stop before this record
		}
		return nil, false
	}
	if rs == nil {
		// A topic matched by kafka.topic_regex but by no route.
		in.unrouted(writeCtx, tp, r)
		return nil, false
	}
	plan := rs.Plan()
	a := in.batches.Open(rs.Table(), tp)
	if err := plan.Append(a.Block(), r); err != nil {
		switch {
		case errors.Is(err, decode.ErrTruncate):
			return in.truncateRecord(writeCtx, rs, tp, r)
		case errors.Is(err, decode.ErrSkip):
			// A Debezium tombstone or the like: no row, handled as soon as seen.
			in.skipped(tp, r)
		case errors.Is(err, decode.ErrUnavailable):
			return err, true
		default:
			in.badRecord(writeCtx, tp, r, err, rs)
		}
		return nil, false
	}
	if in.dlv.CoveredRow(tp, r.Offset) {
		// Already a row in the table (exactly-once recovery), known once
		// decoded since a dead-letter table may hold the offset instead.
		plan.Unappend(a.Block())
		in.alreadyIn(tp, r)
		return nil, false
	}
	if u := plan.LastUnmapped(); len(u) > 0 {
		if err := in.cat.Evolution().WaitFor(writeCtx, now, rs, u); err != nil {
			plan.Unappend(a.Block())
			return err, true
		}
	}
	in.tracker.Add(tp, r.Offset, r.LeaderEpoch, a.ID())
	in.dlv.OnRow(a.ID(), tp)
	if rs.Config().AppliesTruncate() {
		in.truncs.Feed(rs.Table(), tp)
	}
	in.batches.Added(writeCtx, now, a, tp, r)
	return nil, false
}

// truncateRecord handles the TRUNCATE event r of route rs (internal/cdc):
// skipped or applied, its offset is done; held is true (with the reason)
// while the event waits for its TRUNCATE TABLE; an error stops the
// connector before it.
func (in *Intake) truncateRecord(writeCtx context.Context, rs *tables.Route, tp offsets.TP, r *kgo.Record) (_ error, held bool) {
	err := in.truncs.Event(writeCtx, rs.Table(), rs.Config().AppliesTruncate(), tp, r)
	var wait *cdc.TruncateWait
	switch {
	case err == nil:
		in.skipped(tp, r)
		return nil, false
	case errors.As(err, &wait):
		return err, true
	}
	in.own.Fail(err) // stop before the event: it stays uncommitted
	return nil, false
}

// skipped accounts a record that needs no row: handled as soon as seen.
func (in *Intake) skipped(tp offsets.TP, r *kgo.Record) {
	in.stats.Skipped++
	in.topicMetrics(tp.Topic).Skipped()
	in.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
}

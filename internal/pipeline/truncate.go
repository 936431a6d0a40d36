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
	"sink/internal/tables"
)

// TRUNCATE events of the CDC formats (decode.ErrTruncate: Debezium's op t).
//
// With the route's truncate: skip (the default) the event is handled like
// a tombstone, counted in sink_truncates_total{action="skipped"} and logged
// once per table at warn level: the table keeps the rows the source no
// longer has, and a person can see it.
//
// With truncate: apply the event empties the table, in order with the
// table's other records:
//
//  1. The event is held (held.go), and with it every later record of its
//     partition, so nothing after it is appended. The table's open batches
//     are sealed (batch.ReasonTruncate).
//  2. When no batch of the table is queued or in flight any more (every
//     earlier record of the table is inserted and acknowledged), TRUNCATE
//     TABLE runs on its own goroutine (Truncate of the Sink: on a cluster
//     ON CLUSTER, or on each shard's local table for a route with a
//     target). Its end comes back on the acks channel.
//  3. The held event is decoded again (kickHeld), and now its offset is
//     done; the partition's later records follow.
//
// This is only safe when every record of the table comes from the event's
// partition: config refuses apply with fan-out routing and exactly_once,
// sink check where a topic has more than one partition or a table more
// than one topic, and the connector stops rather than apply an event from
// a partition other than 0 or to a table that another partition has fed.
// Replays are safe under at-least-once: a TRUNCATE consumed again after a
// crash was not committed, so every record after it is consumed again too
// and inserted after it. A TRUNCATE that fails stops the connector with
// the event uncommitted.

// truncState is what the pipeline knows of one table's TRUNCATE events.
type truncState struct {
	warned bool // a skipped TRUNCATE was logged
	// feed is the first partition whose records a route that applies
	// TRUNCATE events appended to the table; other is another one, which
	// makes applying them unsafe.
	feed, other offsets.TP
	fed, mixed  bool
	pending     *truncation // a TRUNCATE being applied; nil: none
}

// truncation is one TRUNCATE event being applied.
type truncation struct {
	tp      offsets.TP
	offset  int64
	since   time.Time
	running bool // TRUNCATE TABLE was started
	done    bool // and ran: the event may be marked done
	dropped bool // the partition was given up while it ran: forget it when it ends
}

// truncateWait is why a TRUNCATE event (and its partition's later
// records) is held.
type truncateWait struct {
	table string
}

func (w *truncateWait) Error() string {
	return fmt.Sprintf("TRUNCATE of table %s waits for the table's earlier rows to be inserted", w.table)
}

func (p *Pipeline) truncOf(ts *tables.Table) *truncState {
	st := p.truncs[ts]
	if st == nil {
		if p.truncs == nil {
			p.truncs = map[*tables.Table]*truncState{}
		}
		st = &truncState{}
		p.truncs[ts] = st
	}
	return st
}

// noteFeed remembers which partitions feed a table whose route applies
// TRUNCATE events; called for each record appended by such a route.
func (p *Pipeline) noteFeed(ts *tables.Table, tp offsets.TP) {
	st := p.truncOf(ts)
	switch {
	case !st.fed:
		st.feed, st.fed = tp, true
	case st.feed != tp && !st.mixed:
		st.other, st.mixed = tp, true
	}
}

// truncateRecord handles the TRUNCATE event r of route rs. held is true
// (with the reason) while the event waits for its TRUNCATE TABLE.
func (p *Pipeline) truncateRecord(writeCtx context.Context, rs *tables.Route, tp offsets.TP, r *kgo.Record) (_ error, held bool) {
	ts := rs.Table()
	st := p.truncOf(ts)
	if !rs.Config().AppliesTruncate() {
		p.truncateSkipped(ts, tp, r)
		p.skipped(tp, r)
		return nil, false
	}
	if pd := st.pending; pd != nil && pd.done && pd.tp == tp && pd.offset == r.Offset {
		st.pending = nil
		ts.Metrics().Truncate(true)
		p.log.Info().Str("table", ts.Name()).Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", r.Offset).
			Dur("took", p.now().Sub(pd.since)).Msg("TRUNCATE event applied: the table was emptied after every earlier row was inserted")
		p.skipped(tp, r)
		return nil, false
	}
	if st.pending == nil {
		if err := truncateUnsafe(ts.Name(), st, tp); err != nil {
			p.fatal = err // stop before the event: it stays uncommitted
			return nil, false
		}
		st.pending = &truncation{tp: tp, offset: r.Offset, since: p.now()}
		p.log.Info().Str("table", ts.Name()).Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", r.Offset).
			Msg("TRUNCATE event (truncate: apply): inserting the table's earlier rows first; the partition's later records wait")
	}
	p.truncateStep(writeCtx, ts)
	return &truncateWait{table: ts.Name()}, true
}

// truncateUnsafe says why a TRUNCATE event from tp must not be applied to
// table: records of another partition reach it (sink check refuses such a
// configuration when it sees the topics; a topic created later, or a
// partition added, shows only here).
func truncateUnsafe(table string, st *truncState, tp offsets.TP) error {
	other := st.feed
	if st.feed == tp {
		other = st.other
	}
	switch {
	case tp.Partition != 0:
		return fmt.Errorf("TRUNCATE event in %s partition %d for table %s: truncate: apply needs single-partition topics (docs/formats.md#change-data-capture)", tp.Topic, tp.Partition, table)
	case st.fed && (st.feed != tp || st.mixed):
		return fmt.Errorf("TRUNCATE event in %s partition %d for table %s: the table also takes records of %s partition %d; truncate: apply needs one feed (docs/formats.md#change-data-capture)", tp.Topic, tp.Partition, table, other.Topic, other.Partition)
	}
	return nil
}

// truncateSkipped counts a TRUNCATE event that is not applied, and logs
// the first of each table.
func (p *Pipeline) truncateSkipped(ts *tables.Table, tp offsets.TP, r *kgo.Record) {
	ts.Metrics().Truncate(false)
	st := p.truncOf(ts)
	if st.warned {
		return
	}
	st.warned = true
	p.log.Warn().Str("table", ts.Name()).Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", r.Offset).
		Msg("TRUNCATE event skipped (the route's truncate: skip): the table keeps the rows the source no longer has; sink_truncates_total counts these, this is logged once per table")
}

// skipped accounts a record that needs no row: handled as soon as seen.
func (p *Pipeline) skipped(tp offsets.TP, r *kgo.Record) {
	p.stats.Skipped++
	p.topicMetrics(tp.Topic).Skipped()
	p.tracker.Add(tp, r.Offset, r.LeaderEpoch, offsets.Done)
}

// truncateStep moves ts's pending TRUNCATE on: it seals the table's open
// batches, and once none is queued or in flight starts TRUNCATE TABLE.
// Called when the event is held and after each of the table's acks.
func (p *Pipeline) truncateStep(writeCtx context.Context, ts *tables.Table) {
	st := p.truncs[ts]
	if st == nil || st.pending == nil {
		return
	}
	pd := st.pending
	if pd.running || pd.done || p.fatal != nil {
		return
	}
	p.disp.eachOpenOf(ts, func(a *accState) {
		if !a.acc.Empty() {
			p.seal(writeCtx, a, batch.ReasonTruncate)
		}
	})
	if p.disp.queued(ts) > 0 || p.disp.inserting(ts) > 0 {
		return // the acks of the table's earlier rows call again
	}
	tr, ok := p.w.(truncater)
	if !ok {
		p.fatal = fmt.Errorf("truncate: apply needs a sink that can run TRUNCATE TABLE")
		return
	}
	pd.running = true
	db, name, cluster := ts.Target().Database, ts.Target().Name, p.cfg.ClickHouse.Cluster
	timeout := p.cfg.ClickHouse.QueryTimeout
	p.spawn(func() {
		ctx, cancel := context.WithTimeout(writeCtx, timeout)
		defer cancel()
		start := time.Now()
		ddl, err := tr.Truncate(ctx, db, name, cluster)
		p.sendAck(ack{trunc: ts, ddl: ddl, err: err, took: time.Since(start)})
	})
}

// truncateAcked applies the end of a TRUNCATE TABLE: the held event is
// decoded again and marked done, or the connector stops.
func (p *Pipeline) truncateAcked(a ack) {
	ts := a.trunc
	st := p.truncs[ts]
	pd := st.pending
	if pd == nil {
		return
	}
	pd.running = false
	if a.err != nil {
		if p.fatal == nil {
			p.fatal = fmt.Errorf("TRUNCATE event in %s partition %d offset %d: %w (the event stays uncommitted and is applied again on restart)",
				pd.tp.Topic, pd.tp.Partition, pd.offset, a.err)
		}
		return
	}
	p.log.Info().Str("table", ts.Name()).Str("ddl", a.ddl).Dur("took", a.took).Msg("TRUNCATE TABLE ran")
	if pd.dropped {
		st.pending = nil // its next owner consumes the event again
		return
	}
	pd.done = true
	p.kickHeld()
}

// dropTruncations forgets the TRUNCATE events of partitions given up or
// consumed again from an earlier offset (dropHeld): the event comes back
// and is applied again, after the records before it.
func (p *Pipeline) dropTruncations(tps []offsets.TP) {
	for _, st := range p.truncs {
		if st.pending == nil {
			continue
		}
		pd := st.pending
		for _, tp := range tps {
			if pd.tp != tp {
				continue
			}
			if pd.running {
				pd.dropped = true
			} else {
				st.pending = nil
			}
			break
		}
	}
}

// truncateFanout counts a TRUNCATE event that a route chosen per record
// skipped (fan-out routing never applies them).
func (p *Pipeline) truncateFanout(err error, rs *tables.Route, tp offsets.TP, r *kgo.Record) {
	if errors.Is(err, decode.ErrTruncate) {
		p.truncateSkipped(rs.Table(), tp, r)
	}
}

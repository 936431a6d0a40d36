package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/backoff"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/eos"
	"sink/internal/kafkaerr"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// recovery is the recovery of newly assigned partitions: the group's
// ledgers read, the pending intents replayed, the tables asked for what
// the ledgers cannot vouch for. It works on the Exactly's state.
type recovery struct{ *Exactly }

// recoverParts prepares newly assigned partitions before any of their records
// is handled: it reads the group's ledgers, replays every complete pending
// intent (rebuilt from Kafka, inserted with its token), and looks up in the
// table what the ledgers cannot vouch for (recoverPart, per partition).
// The Kafka reads have bounds of their own (snapshot, topicState,
// ExactlyOnce.ReadRanges); the ClickHouse calls (the replays' INSERTs, the
// presence checks) together have kafka.rebalance_timeout, ClickHouse being
// down waited out within it (recoverInTables); past it, or on an error that
// will repeat, the recovery fails, stopping the connector: a restart
// recovers again from the ledgers, which nothing changed.
func (e *recovery) recoverParts(ctx context.Context, tps []offsets.TP) error {
	if len(tps) == 0 {
		return nil
	}
	snap, err := e.snapshot(ctx)
	if err != nil {
		return err
	}
	plan := eos.PlanRecovery(snap, tps, e.tablesOf(ctx))
	for _, n := range plan.Notes {
		e.Log.Warn().Msg("exactly-once: " + n)
	}
	// A topic deleted and recreated under the same name is caught before
	// anything is replayed: the ledger's intents name the old topic's
	// offsets, which the new topic's records would fill.
	ids, ends, err := e.topicState(ctx, tps)
	if err != nil {
		return err
	}
	for _, r := range plan.Parts {
		if why, ok := eos.Incarnation(r.TopicID, ids[r.TP.Topic], -1, -1); ok {
			return e.recreated(r.TP, why, e.tableOf(ctx))
		}
	}
	bound := e.cfg.Kafka.RebalanceTimeout
	chCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err = e.recoverInTables(chCtx, plan, ids, ends)
	if err != nil && chCtx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("exactly-once: recovering %d assigned partitions took longer than kafka.rebalance_timeout (%s): %w", len(tps), bound, err)
	}
	if err != nil {
		return err
	}
	if len(plan.Replays) > 0 {
		e.Log.Info().Int("batches", len(plan.Replays)).Msg("exactly-once: pending batches replayed with their tokens")
	}
	return nil
}

// recoverInTables is recoverParts' ClickHouse half: the replays, then each
// partition's check. ClickHouse down or restarting (a retriable error) is
// waited out with the INSERTs' backoff until ctx, the recovery's bound,
// ends; both halves may run again, since a replay goes in with its token
// (dropped when it landed) and a check only reads and adds what it found.
func (e *recovery) recoverInTables(ctx context.Context, plan *eos.Plan, ids map[string]string, ends map[offsets.TP]int64) error {
	bo := backoff.New(e.retryPolicy())
	for {
		failed, err := e.replayAll(ctx, plan.Replays)
		if err == nil {
			for _, r := range plan.Parts {
				if err = e.recoverPart(ctx, plan, r, failed[r.TP], ids, ends); err != nil {
					break
				}
			}
		}
		if err == nil || chtable.Classify(ctx, err) != chtable.Retriable {
			return err
		}
		wait := bo.Next()
		e.Log.Warn().Err(err).Dur("retry_in", wait).
			Msg("exactly-once: recovering the assigned partitions needs ClickHouse, retrying")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// tableOf is the table a topic's records go to, for the recovery's plan.
func (e *recovery) tableOf(ctx context.Context) func(topic string) (string, bool) {
	return func(topic string) (string, bool) {
		rs, err := e.Catalog.RouteFor(ctx, topic)
		if err != nil || rs == nil {
			return "", false
		}
		return rs.Table().Name(), true
	}
}

// tablesOf are the tables a topic's records go to: its route's and its
// dead-letter table, for the recovery's plan.
func (e *recovery) tablesOf(ctx context.Context) func(topic string) []string {
	tableOf := e.tableOf(ctx)
	return func(topic string) []string {
		var out []string
		if t, ok := tableOf(topic); ok {
			out = append(out, t)
		}
		if ts := e.dlqTable(ctx, topic); ts != nil {
			out = append(out, ts.Name())
		}
		return out
	}
}

// replayAll replays the pending intents; an intent that cannot be read
// back leaves its ranges in failed, to be checked in the table instead.
func (e *recovery) replayAll(ctx context.Context, replays []eos.Intent) (failed map[offsets.TP]*eos.Range, err error) {
	failed = map[offsets.TP]*eos.Range{}
	for _, in := range replays {
		err := e.replay(ctx, in)
		if err == nil {
			continue
		}
		if !errors.Is(err, errUnreadable) {
			return nil, err
		}
		e.Log.Warn().Err(err).Str("token", in.Token).Msg("exactly-once: a pending batch cannot be read back; its ranges are checked in the table instead")
		for _, r := range in.Ranges {
			failed[r.TP] = &r
		}
	}
	return failed, nil
}

// recoverPart sets up one assigned partition from its recovery r: the
// offsets its replays covered, the failed replay's range (fr, nil when
// none) turned into a check, the check in the table, and its ledger.
func (e *recovery) recoverPart(ctx context.Context, plan *eos.Plan, r eos.Recovery, fr *eos.Range, ids map[string]string, ends map[offsets.TP]int64) error {
	l := r.Ledger
	l.Offset = r.Offset
	if fr == nil {
		for _, in := range plan.Replays {
			covers := e.covers
			if e.Catalog.Table(in.Table).DeadLetter() {
				covers = e.dlqCovers // only its bad records are in
			}
			for _, cr := range in.Ranges {
				if cr.TP == r.TP {
					covers[r.TP] = covers[r.TP].Add(eos.Span{First: cr.First, Last: cr.Last})
				}
			}
		}
	} else {
		// Checked like an incomplete intent; its entry is dropped.
		var keep []eos.Entry
		for _, en := range l.Entries {
			if en.First != fr.First || en.Last != fr.Last {
				keep = append(keep, en)
			}
		}
		l.Entries = keep
		if !r.Check || r.CheckTo >= 0 {
			r.Check, r.CheckFrom = true, max(r.Offset, 0)
			r.CheckTo = max(r.CheckTo, fr.Last+1, l.Check)
			l.Check = r.CheckTo
		}
	}
	if r.Check {
		if err := e.checkPresent(ctx, r, &l, ends); err != nil {
			return err
		}
		if err := e.checkDeadLetters(ctx, r, &l); err != nil {
			return err
		}
	}
	// Every commit from now on records the topic's ID with the ledger.
	l.TopicID = ids[r.TP.Topic]
	e.ledgers[r.TP] = &l
	return nil
}

// checkPresent looks up which offsets of r's check region the table holds:
// they are skipped as present (covers) and move the ledger's check mark.
func (e *recovery) checkPresent(ctx context.Context, r eos.Recovery, l *eos.Ledger, ends map[offsets.TP]int64) error {
	table, ok := e.tableOf(ctx)(r.TP.Topic)
	if !ok {
		return nil
	}
	ts := e.Catalog.Table(table)
	spans, err := e.IO.Present(ctx, ts.Target(), r.TP, r.CheckFrom, r.CheckTo)
	if err != nil {
		return err
	}
	for _, s := range spans {
		e.covers[r.TP] = e.covers[r.TP].Add(s)
	}
	n := len(spans)
	if n > 0 {
		end, known := ends[r.TP]
		if !known {
			end = -1
		}
		if why, ok := eos.Incarnation("", "", spans[n-1].Last, end); ok {
			return e.recreated(r.TP, why, e.tableOf(ctx))
		}
		if spans[n-1].Last+1 > l.Check {
			l.Check = spans[n-1].Last + 1
		}
	}
	e.Log.Info().Str("topic", r.TP.Topic).Int32("partition", r.TP.Partition).Int64("committed", r.Offset).
		Str("why", r.Why).Str("table", table).Int("present_spans", n).Msg("exactly-once: checked which offsets the table already holds")
	if n > 0 && r.Offset < 0 {
		// Right for a new group name or expired offsets. A
		// topic deleted and recreated that has already grown
		// past the old one's rows looks the same (Kafka drops
		// the group's offsets, and the ledgers with them, when
		// the topic is deleted): said loudly, since its new
		// records at these offsets are not inserted.
		e.Log.Warn().Str("topic", r.TP.Topic).Int32("partition", r.TP.Partition).
			Int64("first_present", spans[0].First).Int64("last_present", spans[n-1].Last).
			Msg("exactly-once: the table already holds rows of this partition although the group has no committed offset for it; they are skipped as present (docs/guarantees.md#topic-deleted-and-recreated)")
	}
	return nil
}

var errUnreadable = errors.New("range not readable")

// checkDeadLetters is the table check of r's region in the partition's
// dead-letter table, if its bad records get rows: the offsets found there
// are bad records already handled (dlqCovers). l's check region grows to
// the last one found, as for the route's table.
func (e *recovery) checkDeadLetters(ctx context.Context, r eos.Recovery, l *eos.Ledger) error {
	ts := e.dlqTable(ctx, r.TP.Topic)
	if ts == nil {
		return nil
	}
	spans, err := e.IO.Present(ctx, ts.Target(), r.TP, r.CheckFrom, r.CheckTo)
	if err != nil {
		return err
	}
	for _, s := range spans {
		e.dlqCovers[r.TP] = e.dlqCovers[r.TP].Add(s)
	}
	if n := len(spans); n > 0 && spans[n-1].Last+1 > l.Check {
		l.Check = spans[n-1].Last + 1
	}
	e.Log.Info().Str("topic", r.TP.Topic).Int32("partition", r.TP.Partition).Int64("committed", r.Offset).
		Str("why", r.Why).Str("table", ts.Name()).Int("present_spans", len(spans)).
		Msg("exactly-once: checked which bad records the dead-letter table already holds")
	return nil
}

// dlqTable is the dead-letter table of topic's bad records (records of
// a topic no route takes are bad with errors.unrouted: dlq), nil when they
// get no row.
func (e *recovery) dlqTable(ctx context.Context, topic string) *tables.Table {
	if !e.Catalog.DeadLetters().Any() {
		return nil
	}
	rs, err := e.Catalog.RouteFor(ctx, topic)
	if te := tables.TopicErrorOf(err); te != nil {
		rs, err = te.Route, nil // a topic whose records go to no table: bad records of its route
	}
	if err != nil || (rs == nil && e.cfg.Errors.Unrouted != "dlq") {
		return nil
	}
	return e.Catalog.DeadLetters().TableOf(rs)
}

// eoTopicStateFor bounds how long recovery retries reading the topic IDs
// and log ends while the brokers cannot answer (a killed leader's
// partitions move after the broker session timeout, about 9 s by default).
const eoTopicStateFor = time.Minute

// topicState is ExactlyOnce.TopicState retried with backoff
// (retryPolicy) while its error is retriable (kafkaerr.Classify), for at
// most eoTopicStateFor.
func (e *recovery) topicState(ctx context.Context, tps []offsets.TP) (ids map[string]string, ends map[offsets.TP]int64, err error) {
	_, err = kafkaerr.Retry(ctx, e.retryPolicy(), time.Now().Add(eoTopicStateFor), nil, nil, func() (err error) {
		ids, ends, err = e.IO.TopicState(ctx, tps)
		return err
	})
	return ids, ends, err
}

// snapshot is ExactlyOnce.Snapshot retried as topicState is: the
// group's committed offsets are read from its coordinator, which may be the
// broker that was just killed until the group moves (a dial refused, or
// COORDINATOR_NOT_AVAILABLE meanwhile).
func (e *recovery) snapshot(ctx context.Context) (snap eos.Snapshot, err error) {
	warn := func(err error, wait time.Duration) {
		e.Log.Warn().Err(err).Dur("retry_in", wait).Msg("exactly-once: reading the group's ledgers failed; retrying")
	}
	_, err = kafkaerr.Retry(ctx, e.retryPolicy(), time.Now().Add(eoTopicStateFor), nil, warn, func() (err error) {
		snap, err = e.IO.Snapshot(ctx)
		return err
	})
	return snap, err
}

// recreated is the error that stops the connector when tp's topic was
// deleted and recreated (why is the proof): one line with the fix, since
// the rows in the table at the new topic's offsets are the old topic's,
// and so would be the deduplication tokens of batches over the same
// offsets.
func (e *recovery) recreated(tp offsets.TP, why string, tableOf func(string) (string, bool)) error {
	table, _ := tableOf(tp.Topic)
	setting, window := "non_replicated_deduplication_window", int64(0)
	if ts := e.Catalog.Table(table); ts != nil {
		if s := e.settings[ts]; s != "" {
			setting = s
		}
		window = e.windows[ts]
	}
	return fmt.Errorf("exactly-once: topic %q was deleted and recreated (partition %d: %s): %s holds the old topic's rows (%s = %d) (docs/guarantees.md#topic-deleted-and-recreated)",
		tp.Topic, tp.Partition, why, table, setting, window)
}

// replay rebuilds a pending batch from Kafka, in the canonical order, and
// inserts it with its token; ClickHouse drops it if it landed before.
func (e *recovery) replay(ctx context.Context, in eos.Intent) error {
	ts := e.Catalog.Table(in.Table)
	if ts == nil {
		return fmt.Errorf("exactly-once: pending batch for unknown table %s", in.Table)
	}
	if err := e.samePlacement(ctx, ts, in); err != nil {
		return err
	}
	recs, err := e.IO.ReadRanges(ctx, in.Ranges)
	if err != nil {
		return fmt.Errorf("%w: %v", errUnreadable, err)
	}
	blk, err := e.rebuild(ctx, ts, in, recs)
	if err != nil || blk.Rows() == 0 {
		return err
	}
	if err := e.fill.Fill(ctx, ts.Target(), blk); err != nil {
		return fmt.Errorf("exactly-once: replaying a pending batch into %s: %w", in.Table, err)
	}
	err = e.Sink.Insert(chtable.WithDedupToken(ctx, in.Token), ts.Target(), blk, 0, nil, nil)
	if err != nil {
		return fmt.Errorf("exactly-once: replaying a pending batch into %s: %w", in.Table, err)
	}
	e.Log.Info().Str("table", in.Table).Str("token", in.Token).Int("rows", blk.Rows()).Int("partitions", len(in.Ranges)).
		Msg("exactly-once: pending batch replayed (dropped by ClickHouse if it had landed)")
	return nil
}

// samePlacement refuses to replay in into ts when the sink now splits its
// rows across the shards another way than when it was recorded: each
// shard drops its part of a replay by the batch's token, so a batch split
// another way would give a shard rows under a token it holds (dropped, so
// lost) and another shard rows it has (doubled).
func (e *recovery) samePlacement(ctx context.Context, ts *tables.Table, in eos.Intent) error {
	if in.Placement == "" {
		return nil
	}
	now, err := e.placement(ctx, ts)
	if err != nil {
		return fmt.Errorf("exactly-once: replaying a pending batch into %s: %w", in.Table, err)
	}
	if now != in.Placement {
		return fmt.Errorf("exactly-once: pending batch %s into %s was split under placement %s; the shards, weights or sharding key now place rows under %s (docs/cluster.md#exactly-once-on-a-cluster)",
			in.Token, in.Table, in.Placement, orNone(now))
	}
	return nil
}

// rebuild is the block of in, a pending batch of ts, from recs, the
// records of its ranges: its dead-letter rows, or its route's rows
// (tombstones and bad records made no row the first time either).
func (e *recovery) rebuild(ctx context.Context, ts *tables.Table, in eos.Intent, recs map[offsets.TP][]*kgo.Record) (*decode.Block, error) {
	blk := ts.NewBlock()
	if ts.DeadLetter() {
		if err := e.deadLetterBlock(ctx, ts, in, recs, blk); err != nil {
			return nil, fmt.Errorf("exactly-once: replaying a pending batch into %s: %w", in.Table, err)
		}
		return blk, nil
	}
	for _, r := range in.Ranges {
		for _, rec := range recs[r.TP] {
			rs, err := e.Catalog.RouteFor(ctx, rec.Topic)
			if err != nil || rs == nil || rs.Table() != ts {
				continue
			}
			_ = rs.Plan().Append(blk, rec)
		}
	}
	return blk, nil
}

// deadLetterBlock rebuilds into blk the rows of in, a pending batch of
// dead-letter table ts, from recs, the records of its ranges: a row for
// each record that is bad now (decoded with its route's plan as it is, as
// when it was first consumed) and whose bad records go to ts, in offset
// order, unless ts already holds its offset. The rows differ from the
// first INSERT's in dead_lettered_at (now), which is what the table the
// sink creates is partitioned by: a replay in the next month would put
// them into another table partition, where the token drops nothing, so
// the rows already in are left out here and only the others go in with
// the token (which drops them if an INSERT of the batch still running
// lands them first).
func (e *recovery) deadLetterBlock(ctx context.Context, ts *tables.Table, in eos.Intent, recs map[offsets.TP][]*kgo.Record, blk *decode.Block) error {
	scratch := map[*tables.Table]*decode.Block{}
	for _, r := range in.Ranges {
		spans, err := e.IO.Present(ctx, ts.Target(), r.TP, r.First, r.Last+1)
		if err != nil {
			return err
		}
		var have eos.Covers
		for _, s := range spans {
			have = have.Add(s)
		}
		for _, rec := range recs[r.TP] {
			if have.Contains(rec.Offset) {
				continue
			}
			rs, cause, err := e.badNow(ctx, rec, scratch)
			if err != nil {
				return err
			}
			if cause == nil || e.Catalog.DeadLetters().TableOf(rs) != ts {
				continue
			}
			if err := e.Catalog.DeadLetters().Append(blk, ts, rec, cause, tables.MeantFor(rs)); err != nil {
				return err
			}
		}
	}
	return nil
}

// badNow decodes rec as decodeRecord would, into scratch (a block per
// table, left empty), and returns its route (nil: none takes it) and why
// it is bad, nil when it is not (a row, a tombstone, a TRUNCATE event, a
// record no route takes while errors.unrouted is skip). A record whose
// schema cannot be fetched now cannot be told: an error.
func (e *recovery) badNow(ctx context.Context, rec *kgo.Record, scratch map[*tables.Table]*decode.Block) (rs *tables.Route, cause, err error) {
	rs, err = e.Catalog.RouteFor(ctx, rec.Topic)
	if te := tables.TopicErrorOf(err); te != nil {
		return te.Route, err, nil // its topic's records go to no table: bad, as intake found them
	}
	if err != nil {
		return nil, nil, err
	}
	if rs == nil {
		if e.cfg.Errors.Unrouted == "dlq" {
			return nil, tables.UnroutedError(rec), nil
		}
		return nil, nil, nil
	}
	blk := scratch[rs.Table()]
	if blk == nil {
		blk = rs.Table().NewBlock()
		scratch[rs.Table()] = blk
	}
	err = rs.Plan().Append(blk, rec)
	switch {
	case err == nil:
		rs.Plan().Unappend(blk)
		return rs, nil, nil
	case errors.Is(err, decode.ErrSkip), errors.Is(err, decode.ErrTruncate):
		return rs, nil, nil
	case errors.Is(err, decode.ErrUnavailable):
		return nil, nil, fmt.Errorf("%s[%d] offset %d cannot be decoded now, so whether it is a dead letter is not known: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	return rs, err, nil
}

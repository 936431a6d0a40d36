package cdc

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

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
//  1. The event is held (Event answers a *TruncateWait: the pipeline
//     holds it, and with it every later record of its partition, so
//     nothing after it is appended). The table's open batches are sealed
//     (batch.ReasonTruncate).
//  2. When no batch of the table is queued or in flight any more (every
//     earlier record of the table is inserted and acknowledged: Step,
//     after each of the table's acks), TRUNCATE TABLE runs on its own
//     goroutine (Truncate of the target: on a cluster ON CLUSTER, or on
//     each shard's local table for a route with a target). Its end comes
//     back to the owner as a Truncated, which Done applies.
//  3. The held event is decoded again (the pipeline tries the held
//     records again when Done says so), and now its offset is done; the
//     partition's later records follow.
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

// Truncater is a target that can apply a TRUNCATE event (writer.Writer
// and writer.Cluster; truncate: apply needs it): it empties db.table (ON
// CLUSTER cluster when set) and returns the statements it ran. Called
// from a goroutine of its own.
type Truncater interface {
	Truncate(ctx context.Context, db, table, cluster string) (ddl string, err error)
}

// Batches is what a TRUNCATE asks of the table's batches (the pipeline's
// dispatch).
type Batches interface {
	// SealTable seals t's open batches that hold rows (batch.ReasonTruncate).
	SealTable(ctx context.Context, t *tables.Table)
	// Pending counts t's batches queued or in their INSERT.
	Pending(t *tables.Table) int
}

// Owner is what the TRUNCATE events need of the connector besides the
// table's batches: a goroutine the connector joins before it closes the
// target, and the way back to the owner goroutine.
type Owner interface {
	Spawn(f func())
	// Stopping reports whether something already stops the connector:
	// no TRUNCATE TABLE starts then.
	Stopping() bool
	// Truncated hands the end of a TRUNCATE TABLE to the owner, which
	// passes it to Done (dropped once the connector has stopped).
	Truncated(r Truncated)
}

// Truncations is the TRUNCATE events of the connector's tables. Owned by
// the owner goroutine; the TRUNCATE TABLE runs on a goroutine of its own
// and hands its end back as a Truncated.
type Truncations struct {
	tables  map[*tables.Table]*truncState
	target  any // the Sink: a Truncater when it can apply them
	batches Batches
	own     Owner
	cluster string
	timeout time.Duration
	log     zerolog.Logger
	now     func() time.Time
}

// NewTruncations follows the TRUNCATE events of tables into target, on
// cluster ("" none), each TRUNCATE TABLE bounded by timeout.
func NewTruncations(target any, batches Batches, own Owner, cluster string, timeout time.Duration, log zerolog.Logger, now func() time.Time) *Truncations {
	return &Truncations{tables: map[*tables.Table]*truncState{}, target: target, batches: batches, own: own,
		cluster: cluster, timeout: timeout, log: log, now: now}
}

// truncState is what is known of one table's TRUNCATE events.
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

// TruncateWait is why a TRUNCATE event (and its partition's later
// records) is held.
type TruncateWait struct {
	table string
}

func (w *TruncateWait) Error() string {
	return fmt.Sprintf("TRUNCATE of table %s waits for the table's earlier rows to be inserted", w.table)
}

// Truncated is the end of one TRUNCATE TABLE: its statements, or why it
// failed.
type Truncated struct {
	table *tables.Table
	ddl   string
	err   error
	took  time.Duration
}

func (t *Truncations) of(ts *tables.Table) *truncState {
	st := t.tables[ts]
	if st == nil {
		st = &truncState{}
		t.tables[ts] = st
	}
	return st
}

// Feed remembers which partitions feed a table whose route applies
// TRUNCATE events; called for each record appended by such a route.
func (t *Truncations) Feed(ts *tables.Table, tp offsets.TP) {
	st := t.of(ts)
	switch {
	case !st.fed:
		st.feed, st.fed = tp, true
	case st.feed != tp && !st.mixed:
		st.other, st.mixed = tp, true
	}
}

// Event decides about the TRUNCATE event r of a route into ts, which
// applies such events or not. It answers nil when the event is handled
// (skipped, or applied: the caller counts it done), a *TruncateWait while
// it waits for its TRUNCATE TABLE (the caller holds it), or the error that
// stops the connector before the event (it stays uncommitted).
func (t *Truncations) Event(ctx context.Context, ts *tables.Table, applies bool, tp offsets.TP, r *kgo.Record) error {
	st := t.of(ts)
	if !applies {
		t.Skipped(ts, tp, r)
		return nil
	}
	if pd := st.pending; pd != nil && pd.done && pd.tp == tp && pd.offset == r.Offset {
		st.pending = nil
		ts.Metrics().Truncate(true)
		t.log.Info().Str("table", ts.Name()).Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", r.Offset).
			Dur("took", t.now().Sub(pd.since)).Msg("TRUNCATE event applied: the table was emptied after every earlier row was inserted")
		return nil
	}
	if st.pending == nil {
		if err := truncateUnsafe(ts.Name(), st, tp); err != nil {
			return err
		}
		st.pending = &truncation{tp: tp, offset: r.Offset, since: t.now()}
		t.log.Info().Str("table", ts.Name()).Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", r.Offset).
			Msg("TRUNCATE event (truncate: apply): inserting the table's earlier rows first; the partition's later records wait")
	}
	if err := t.Step(ctx, ts); err != nil {
		return err
	}
	return &TruncateWait{table: ts.Name()}
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

// Skipped counts a TRUNCATE event that is not applied (the route's
// truncate: skip, or a route chosen per record, which never applies them),
// and logs the first of each table.
func (t *Truncations) Skipped(ts *tables.Table, tp offsets.TP, r *kgo.Record) {
	ts.Metrics().Truncate(false)
	st := t.of(ts)
	if st.warned {
		return
	}
	st.warned = true
	t.log.Warn().Str("table", ts.Name()).Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", r.Offset).
		Msg("TRUNCATE event skipped (the route's truncate: skip): the table keeps the rows the source no longer has; sink_truncates_total counts these, this is logged once per table")
}

// Step moves ts's pending TRUNCATE on: it seals the table's open batches,
// and once none is queued or in flight starts TRUNCATE TABLE. Called when
// the event is held and after each of the table's acks; an error stops
// the connector.
func (t *Truncations) Step(writeCtx context.Context, ts *tables.Table) error {
	st := t.tables[ts]
	if st == nil || st.pending == nil {
		return nil
	}
	pd := st.pending
	if pd.running || pd.done || t.own.Stopping() {
		return nil
	}
	t.batches.SealTable(writeCtx, ts)
	if t.batches.Pending(ts) > 0 {
		return nil // the acks of the table's earlier rows call again
	}
	tr, ok := t.target.(Truncater)
	if !ok {
		return fmt.Errorf("truncate: apply needs a sink that can run TRUNCATE TABLE")
	}
	pd.running = true
	db, name, cluster := ts.Target().Database, ts.Target().Name, t.cluster
	timeout := t.timeout
	t.own.Spawn(func() {
		ctx, cancel := context.WithTimeout(writeCtx, timeout)
		defer cancel()
		start := time.Now()
		ddl, err := tr.Truncate(ctx, db, name, cluster)
		t.own.Truncated(Truncated{table: ts, ddl: ddl, err: err, took: time.Since(start)})
	})
	return nil
}

// Done applies the end of a TRUNCATE TABLE: the held event may be decoded
// again (kick: the caller tries the held records now) and is then marked
// done; or an error stops the connector.
func (t *Truncations) Done(r Truncated) (kick bool, err error) {
	ts := r.table
	pd := t.tables[ts].pending
	if pd == nil {
		return false, nil
	}
	pd.running = false
	if r.err != nil {
		return false, fmt.Errorf("TRUNCATE event in %s partition %d offset %d: %w (the event stays uncommitted and is applied again on restart)",
			pd.tp.Topic, pd.tp.Partition, pd.offset, r.err)
	}
	t.log.Info().Str("table", ts.Name()).Str("ddl", r.ddl).Dur("took", r.took).Msg("TRUNCATE TABLE ran")
	if pd.dropped {
		t.tables[ts].pending = nil // its next owner consumes the event again
		return false, nil
	}
	pd.done = true
	return true, nil
}

// Drop forgets the TRUNCATE events of partitions given up or consumed
// again from an earlier offset (their held records are dropped): the
// event comes back and is applied again, after the records before it.
func (t *Truncations) Drop(tps []offsets.TP) {
	for _, st := range t.tables {
		pd := st.pending
		if pd == nil || !slices.Contains(tps, pd.tp) {
			continue
		}
		if pd.running {
			pd.dropped = true
		} else {
			st.pending = nil
		}
	}
}

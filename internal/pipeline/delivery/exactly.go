// Package delivery is the pipeline's delivery guarantees, as the hooks
// the shared path calls around a record, a batch and a commit:
// at-least-once (AtLeastOnce) adds nothing; exactly-once (Exactly;
// delivery: exactly_once, docs/exactly-once.md) records each batch's
// intent (its token and ranges) in the group's commit metadata before its
// INSERT, in one commit of the batch's partitions; every commit carries
// each partition's ledger; the INSERT carries the batch's deduplication
// token and its rows in a canonical order, so that a replay rebuilt from
// Kafka is the identical block and ClickHouse drops it if it landed. When
// partitions are assigned it recovers them (recover.go: the ledgers, the
// pending intents replayed, the table asked for what the ledgers cannot
// vouch for); when they are given up it drops what can no longer be
// recorded (release.go).
//
// The hooks are the interfaces the pipeline's parts declare (intake's and
// dispatch's Delivery, and the pipeline's own). Exactly reaches the rest
// of the pipeline only through the interfaces it declares: Batches (the
// batches on their way: requeue, pump, withdraw, discard), Commits (the
// committer: intents in order), Tracker (the handled offsets), Owner (stop
// the connector, consume again, look schemas up synchronously), IO (the
// group's ledgers, the topics, the tables' present offsets and windows)
// and Inserter (a replay's INSERT); the routes and tables are
// internal/tables' Catalog.
//
// Concurrency: an Exactly belongs to the pipeline's owner goroutine, which
// calls every method; the INSERT goroutines get what they need (the
// ordered block, the token in the context) as values.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/backoff"
	"sink/internal/batch"
	"sink/internal/cdc"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/eos"
	"sink/internal/metrics"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// Batch is a sealed batch of decoded rows, as the pipeline's dispatch
// queues and inserts it.
type Batch = batch.Batch[*decode.Block]

// IO is the I/O of delivery: exactly_once beyond the pipeline's Source
// and Sink (eosio.IO is the production one; pipeline.WithExactlyOnce
// gives it). The intent commits go through the Source's Commit with their
// metadata and the replays through the Sink's Insert with their token;
// what is left is reading back what earlier runs left behind. Every method
// is called from the owner goroutine: at start (Windows) and when
// partitions are assigned (recovery: Snapshot, TopicState, ReadRanges,
// Present).
type IO interface {
	// Snapshot returns every committed offset of the group with its
	// metadata (the ledgers), the partitions of other members included.
	Snapshot(ctx context.Context) (eos.Snapshot, error)
	// TopicState returns the topic ID of each topic of tps (absent when
	// the broker gives none) and each partition's log end offset. Its
	// error says whether it may pass (kafkaerr.Classify).
	TopicState(ctx context.Context, tps []offsets.TP) (ids map[string]string, ends map[offsets.TP]int64, err error)
	// ReadRanges reads back the committed records of ranges, per
	// partition in offset order (offsets compacted away or aborted are
	// absent); an error when a range's end cannot be reached.
	ReadRanges(ctx context.Context, ranges []eos.Range) (map[offsets.TP][]*kgo.Record, error)
	// Present returns the runs of tp's offsets from..to-1 (to -1: no end)
	// that t holds in its _offset column, in order; for a table written
	// shard by shard, those any shard holds (every replica is asked).
	Present(ctx context.Context, t *chtable.Table, tp offsets.TP, from, to int64) ([]eos.Span, error)
	// Windows refuses in one line what exactly-once cannot work with (the
	// server, a table, a materialized view; on a cluster naming the shard
	// and replica) or returns each table's deduplication window, in the
	// order of tables (for a table written shard by shard, the smallest of
	// its shards' local tables, with the replicas not reached).
	Windows(ctx context.Context, tables []*chtable.Table) ([]eos.Window, error)
}

// Inserter is the Sink's INSERT (writer.Writer.Insert), which a replay
// calls with its batch's token in ctx (chtable.WithDedupToken).
type Inserter interface {
	Insert(ctx context.Context, t *chtable.Table, block chschema.Block, batchID uint64,
		onRetry func(chtable.Attempt), refresh chtable.Refresh) error
}

// Placer is a Sink that splits a table's batches across the shards of a
// cluster by a sharding key (writer.Cluster). Placement fingerprints how
// it splits db.table's rows now ("" when it does not): exactly-once
// records it with each batch, and replays a batch only under the same
// placement. Called from the owner goroutine.
type Placer interface {
	Placement(ctx context.Context, db, table string) (string, error)
}

// Batches is what exactly-once asks of the batches on their way to
// ClickHouse (the pipeline's dispatch).
type Batches interface {
	// Requeue puts b back at the head of t's queue, to be started again
	// later; the insert slot it took is free again.
	Requeue(t *tables.Table, b *Batch)
	// Pump starts the INSERTs of t's queued batches that may go.
	Pump(ctx context.Context, t *tables.Table)
	// EachSealed calls fn with every sealed batch not yet acknowledged,
	// and EachOpen with the id and ranges of every open batch that holds
	// rows.
	EachSealed(fn func(t *tables.Table, b *Batch))
	EachOpen(fn func(id uint64, ranges []batch.Range))
	// Withdraw forgets sealed batch id, never to be inserted, and returns
	// its table, its rows and its place in its table's queue: 0 at the
	// head, -1 when it had left the queue for its INSERT (whose slot is
	// free: what that INSERT answers lands nothing). A revoke waits for
	// it no more.
	Withdraw(id uint64) (t *tables.Table, rows, at int)
	// Discard empties open batch id (it goes on under another id) and
	// returns the rows it held.
	Discard(id uint64) int
}

// Intent is the commit of a batch's intent: the positions and the
// metadata (the ledgers with the batch's entry) of its partitions, and
// what to do with the commit's answer.
type Intent struct {
	Pos    map[offsets.TP]offsets.Commit
	Meta   map[offsets.TP]string
	Answer func(error)
}

// Commits is the committer (the pipeline's): intents go in the order asked,
// each a commit of its own, built when its turn comes.
type Commits interface {
	// InOrder asks for the commit build makes when its turn comes (ok
	// false: nothing to send any more); it reports whether the answer
	// comes later, as an event (false: committed at once).
	InOrder(build func() (Intent, bool)) bool
	// Stalled reports whether intents wait while no commit is out;
	// SendStalled sends them.
	Stalled() bool
	SendStalled()
}

// Tracker is the offsets handled so far (offsets.Tracker).
type Tracker interface {
	Position(tp offsets.TP) (offsets.Commit, bool)
	Truncate(tp offsets.TP, from int64) (next int64, ok bool)
}

// Owner is what exactly-once asks of the connector itself.
type Owner interface {
	// Fail stops the connector with err, unless something already does.
	Fail(err error)
	// Seek consumes the partitions of pos again from their offsets: what
	// was fetched of them past it is dropped. An error when the source
	// cannot.
	Seek(pos map[offsets.TP]int64) error
	// SyncLookups runs f with schema look-ups that wait for the registry
	// (a replay must decode every record it had).
	SyncLookups(f func())
}

// Deps are what an Exactly works with.
type Deps struct {
	IO      IO
	Sink    Inserter // a Placer too on a cluster split by a sharding key, a cdc.Store when it can read rows back
	Catalog *tables.Catalog
	Batches Batches
	Commits Commits
	Tracker Tracker
	Owner   Owner
	Metrics *metrics.Metrics
	Log     zerolog.Logger
	Now     func() time.Time
	// Jitter draws the random part of the retry waits
	// (backoff.Policy.Rand); nil is math/rand. Tests fix it.
	Jitter func(n int64) int64
}

// Exactly is exactly-once delivery's state. Like the rest of the
// pipeline's state it belongs to the owner goroutine.
type Exactly struct {
	Deps
	cfg  *config.Config
	fill *cdc.Filler // a replay's unchanged TOASTed values
	// ledgers of the partitions this member owns; a partition missing here
	// is never committed nor recorded in an intent.
	ledgers map[offsets.TP]*eos.Ledger
	// start is the first offset consumed of a partition that had no
	// committed offset: what an intent commits until something is handled.
	start map[offsets.TP]int64
	// covers are offsets already in the table (found by the table check, or
	// inserted by a replay): their records are not inserted again.
	covers map[offsets.TP]eos.Covers
	// dlqCovers are, likewise, offsets whose bad records already have
	// their row in the partition's dead-letter table: the ranges of a
	// dead-letter batch overlap those of the route's batches (a bad record
	// lies between good ones), so a record's own table decides
	// (CoveredRow, DeadLettered).
	dlqCovers map[offsets.TP]eos.Covers
	// rows records the partition of each row of an open batch (by its
	// id), for the canonical order.
	rows map[uint64]*rowParts
	// batches are sealed batches' tokens and row orders, by batch id.
	batches map[uint64]*eoBatch
	// windows and marks feed the deduplication-window margin: per table,
	// the window, the inserts so far, and the insert count when each live
	// token was recorded.
	windows map[*tables.Table]int64
	// settings name each table's deduplication-window setting
	// (non_replicated_ or replicated_deduplication_window), for the fix
	// of a recreated topic.
	settings map[*tables.Table]string
	inserts  map[*tables.Table]int64
	marks    map[string]eoMark
	// retries are tables whose next intent commit failed with an error that
	// may pass (a broker restarting, a timeout): the batch waits at the head
	// of the table's queue until the retry time, then pump tries again.
	retries map[*tables.Table]*intentRetry
	// asked are the tables whose head batch (by id) waits for its intent
	// commit, queued in the committer or out; answered, the tables whose
	// intent's result is in and whose queue pump has not taken up since
	// (RetryDue does).
	asked    map[*tables.Table]uint64
	answered map[*tables.Table]bool
}

// New is exactly-once delivery for cfg over d.
func New(cfg *config.Config, d Deps) *Exactly {
	return &Exactly{
		Deps:      d,
		cfg:       cfg,
		fill:      cdc.NewFiller(d.Sink, backoff.Policy{Initial: cfg.ClickHouse.RetryInitial, Max: cfg.ClickHouse.RetryMax, Jitter: backoff.EqualJitter}, d.Log),
		ledgers:   map[offsets.TP]*eos.Ledger{},
		start:     map[offsets.TP]int64{},
		covers:    map[offsets.TP]eos.Covers{},
		dlqCovers: map[offsets.TP]eos.Covers{},
		rows:      map[uint64]*rowParts{},
		batches:   map[uint64]*eoBatch{},
		windows:   map[*tables.Table]int64{},
		settings:  map[*tables.Table]string{},
		inserts:   map[*tables.Table]int64{},
		marks:     map[string]eoMark{},
		retries:   map[*tables.Table]*intentRetry{},
		asked:     map[*tables.Table]uint64{},
		answered:  map[*tables.Table]bool{},
	}
}

// ErrNoIO is the refusal of an exactly-once pipeline built without its
// I/O.
var ErrNoIO = errors.New("delivery exactly_once needs the exactly-once I/O (pipeline.WithExactlyOnce)")

// Check refuses what exactly-once cannot work with before Run starts: no
// I/O, or a table whose deduplication window is unknown (Windows, which
// also remembers the windows).
func (e *Exactly) Check(ctx context.Context) error {
	if e.IO == nil {
		return ErrNoIO
	}
	if len(e.windows) == 0 {
		return e.Windows(ctx)
	}
	return nil
}

// Windows refuses, in one line, a server or table that exactly-once
// delivery cannot work with (IO.Windows; on a cluster, every shard's), and
// remembers each table's window (the smallest of its shards') for the
// margin metric. The pipeline calls it before Run (sink check too).
func (e *Exactly) Windows(ctx context.Context) error {
	tabs, windows, err := Windows(ctx, e.IO, e.Catalog, e.Log)
	if err != nil {
		return err
	}
	for i, t := range tabs {
		if ts := e.Catalog.Table(t.FullName()); ts != nil && i < len(windows) {
			e.windows[ts] = windows[i].Size
			e.settings[ts] = windows[i].Setting
		}
	}
	return nil
}

// Window is the deduplication window Windows read for ts (its INSERTs
// that ClickHouse remembers the tokens of; the smallest of its shards'),
// ok false when none was read.
func (e *Exactly) Window(ts *tables.Table) (size int64, ok bool) {
	size, ok = e.windows[ts]
	return size, ok
}

// Windows asks io for the deduplication windows of the tables exactly-once
// inserts into (the routes' and the dead-letter tables), in that order,
// and warns of replicas that could not be read.
func Windows(ctx context.Context, io IO, cat *tables.Catalog, log zerolog.Logger) ([]*chtable.Table, []eos.Window, error) {
	if io == nil {
		return nil, nil, ErrNoIO
	}
	tabs := cat.Targets()
	cat.EachTable(func(ts *tables.Table) {
		if ts.DeadLetter() {
			tabs = append(tabs, ts.Target())
		}
	})
	windows, err := io.Windows(ctx, tabs)
	if err != nil {
		return nil, nil, err
	}
	for i, w := range windows {
		if len(w.Unchecked) > 0 && i < len(tabs) {
			log.Warn().Str("table", tabs[i].FullName()).Strs("replicas", w.Unchecked).Int64("window", w.Size).
				Msg("exactly-once: these replicas could not be reached to read the table's deduplication window; another replica of each of their shards was read, and its window counts")
		}
	}
	return tabs, windows, nil
}

// BeforeInsert records b's intent before its INSERT: the first time, it
// asks the committer for the intent commit (ask) and puts b back at the
// head of its table's queue (later), where it waits while the commit is
// out; the owner goes on with other work. Once the result is in
// (recordedAs), pump takes b up again: recorded, the INSERT carries its
// token and its rows in the canonical order (intent). A failure that may
// pass puts b back at the head of its table's queue for a retry (later);
// any other error means b is never inserted.
func (e *Exactly) BeforeInsert(ctx context.Context, ts *tables.Table, b *Batch) (_ context.Context, _ chschema.Block, later bool, _ error) {
	if eb := e.batches[b.ID]; eb != nil && !eb.recorded && eb.failed == nil {
		if e.ask(ctx, ts, b) {
			e.Batches.Requeue(ts, b)
			return nil, nil, true, nil
		}
		delete(e.answered, ts) // answered at once (not running): taken up here
	}
	ictx, blk, err := e.intent(ctx, ts, b)
	if err == nil {
		return ictx, blk, false, nil
	}
	if e.retryLater(ts, b, err) {
		return nil, nil, true, nil
	}
	return nil, nil, false, fmt.Errorf("%w; not inserting it, stopping: the group's other members or a restart replay what was recorded", err)
}

// CommitMeta adds each partition's ledger to a commit of positions c and
// drops the partitions this member does not own; done stores the ledgers
// once the commit succeeded.
func (e *Exactly) CommitMeta(c map[offsets.TP]offsets.Commit) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, func()) {
	c, meta, ledgers := e.commitLedgers(c)
	return c, meta, func() { e.committed(ledgers) }
}

// OnAssign recovers newly assigned partitions (recoverParts); a failure
// stops the connector. A replay decodes its records now: its schema
// look-ups wait for the registry.
func (e *Exactly) OnAssign(ctx context.Context, tps []offsets.TP) {
	e.Owner.SyncLookups(func() {
		if err := (&recovery{e}).recoverParts(ctx, tps); err != nil {
			e.Owner.Fail(err)
		}
	})
}

// StuckOn names an intent commit being retried or waiting for its
// result ("" when none).
func (e *Exactly) StuckOn() string {
	for ts, r := range e.retries {
		return fmt.Sprintf("recording a batch for %s in Kafka before its INSERT (exactly_once; %d attempts, last error: %v)", ts.Name(), r.attempt, r.lastErr)
	}
	for ts := range e.asked {
		return fmt.Sprintf("recording a batch for %s in Kafka before its INSERT (exactly_once; its commit is not answered yet)", ts.Name())
	}
	return ""
}

// Skip is called for every record before it is routed: it notes where a
// partition without a committed offset started, and reports whether the
// record is already in the table. With dead-letter tables that cannot be
// told before the record is decoded: a bad record inside a range of its
// route's table is not one of its rows, and is skipped only if its row is
// in its dead-letter table. The decode path decides then (CoveredRow,
// DeadLettered).
func (e *Exactly) Skip(tp offsets.TP, offset int64) bool {
	if l := e.ledgers[tp]; l != nil && l.Offset < 0 {
		if _, ok := e.start[tp]; !ok {
			e.start[tp] = offset
		}
	}
	if e.Catalog.DeadLetters().Any() {
		return false
	}
	// The spans stay until the committed offset passes them (committed):
	// a partition sought back (OnRelease) reads these offsets again.
	return e.covers[tp].Contains(offset)
}

// CoveredRow reports whether the record at offset of tp, which decoded
// into a row of its route's table, is already in that table (decided here
// rather than in Skip when bad records get dead-letter rows).
func (e *Exactly) CoveredRow(tp offsets.TP, offset int64) bool {
	return e.Catalog.DeadLetters().Any() && e.covers[tp].Contains(offset)
}

// DeadLettered reports whether the bad record at offset of tp, meant for
// route rs (nil: none), is already handled: its row is in its dead-letter
// table, or, when its bad records get no row, it lies in a range of its
// route's table that is in (its copy reached the dead-letter topic before:
// no batch holding a record after it is recorded until then).
func (e *Exactly) DeadLettered(tp offsets.TP, offset int64, rs *tables.Route) bool {
	if e.Catalog.DeadLetters().TableOf(rs) != nil {
		return e.dlqCovers[tp].Contains(offset)
	}
	return e.covers[tp].Contains(offset)
}

// OnAck notes a successful INSERT for the margin metric.
func (e *Exactly) OnAck(ts *tables.Table, id uint64) {
	delete(e.batches, id)
	e.inserts[ts]++
	e.margin(ts)
}

// Waiting reports whether ts's head batch waits for its intent commit's
// result, or its next intent for its retry time.
func (e *Exactly) Waiting(ts *tables.Table) bool {
	if _, ok := e.asked[ts]; ok {
		return true
	}
	r := e.retries[ts]
	return r != nil && e.Now().Before(r.at)
}

// NextRetry is how long until the earliest intent retry is due; at once
// when an intent's result waits to be taken up, or intents wait for the
// committer while no commit is out.
func (e *Exactly) NextRetry(now time.Time) (time.Duration, bool) {
	if len(e.answered) > 0 || e.Commits.Stalled() {
		return 0, true
	}
	if len(e.retries) == 0 {
		return 0, false
	}
	var next time.Duration
	found := false
	for _, r := range e.retries {
		if d := max(r.at.Sub(now), 0); !found || d < next {
			next, found = d, true
		}
	}
	return next, found
}

// RetryDue sends the intents that wait for the committer (stalled), and
// pumps the tables whose intent was answered or whose intent retry is due.
func (e *Exactly) RetryDue(writeCtx context.Context) {
	if e.Commits.Stalled() {
		e.Commits.SendStalled()
	}
	for ts := range e.answered {
		delete(e.answered, ts)
		e.Batches.Pump(writeCtx, ts)
	}
	now := e.Now()
	for ts, r := range e.retries {
		if !now.Before(r.at) {
			e.Batches.Pump(writeCtx, ts)
		}
	}
}

// orNone is s, or "none" when s is "".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

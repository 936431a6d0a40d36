package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/backoff"
	"sink/internal/batch"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/eos"
	"sink/internal/kafkaerr"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// exactly is the pipeline's exactly-once state (delivery: exactly_once; see
// docs/exactly-once.md). Like the rest of the pipeline's state it belongs
// to Run's goroutine; insert goroutines get what they need (the ordered
// block, the token) as arguments.
type exactly struct {
	p *Pipeline // the owner's state it reads and changes (flights, open batches, tracker)
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
	// (coveredRow, deadLettered).
	dlqCovers map[offsets.TP]eos.Covers
	// rows records the partition of each row of an open batch, for the
	// canonical order.
	rows map[*accState]*rowParts
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
	// (retryDue does).
	asked    map[*tables.Table]uint64
	answered map[*tables.Table]bool
}

// check refuses what exactly-once cannot work with before Run starts:
// no I/O, or a table whose deduplication window is unknown
// (CheckExactlyOnce, which also remembers the windows).
func (e *exactly) check(ctx context.Context) error {
	if e.p.eoIO == nil {
		return errNoExactlyOnceIO
	}
	if len(e.windows) == 0 {
		return e.p.CheckExactlyOnce(ctx)
	}
	return nil
}

// beforeInsert records b's intent before its INSERT: the first time, it
// asks the committer for the intent commit (ask) and puts b back at the
// head of its table's queue (errInsertLater), where it waits while the
// commit is out; the owner goes on with other work. Once the result is in
// (recordedAs), pump takes b up again: recorded, the INSERT carries its
// token and its rows in the canonical order (intent). A failure that may
// pass puts b back at the head of its table's queue for a retry
// (errInsertLater); any other means b is never inserted.
func (e *exactly) beforeInsert(ctx context.Context, ts *tables.Table, b *sealedBatch) (context.Context, chschema.Block, error) {
	if eb := e.batches[b.ID]; eb != nil && !eb.recorded && eb.failed == nil {
		if e.ask(ctx, ts, b) {
			e.p.disp.requeue(ts, b)
			return nil, nil, errInsertLater
		}
		delete(e.answered, ts) // answered at once (not running): taken up here
	}
	ictx, blk, err := e.intent(ctx, ts, b)
	if err == nil {
		return ictx, blk, nil
	}
	if e.retryLater(ts, b, err) {
		return nil, nil, errInsertLater
	}
	return nil, nil, fmt.Errorf("%w; not inserting it, stopping: the group's other members or a restart replay what was recorded", err)
}

// commitMeta adds each partition's ledger to a commit of positions c and
// drops the partitions this member does not own; done stores the ledgers
// once the commit succeeded.
func (e *exactly) commitMeta(c map[offsets.TP]offsets.Commit) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, func()) {
	c, meta, ledgers := e.commitLedgers(c)
	return c, meta, func() { e.committed(ledgers) }
}

// onAssign recovers newly assigned partitions (recoverParts); a failure
// stops the connector. A replay decodes its records now: its schema
// look-ups wait for the registry (lookup.go).
func (e *exactly) onAssign(ctx context.Context, tps []offsets.TP) {
	p := e.p
	p.syncLookups(func() {
		if err := e.recoverParts(ctx, tps); err != nil && p.fatal == nil {
			p.fatal = err
		}
	})
}

// stuckOn names an intent commit being retried or waiting for its
// result ("" when none).
func (e *exactly) stuckOn() string {
	for ts, r := range e.retries {
		return fmt.Sprintf("recording a batch for %s in Kafka before its INSERT (exactly_once; %d attempts, last error: %v)", ts.Name(), r.attempt, r.lastErr)
	}
	for ts := range e.asked {
		return fmt.Sprintf("recording a batch for %s in Kafka before its INSERT (exactly_once; its commit is not answered yet)", ts.Name())
	}
	return ""
}

// intentRetry is the backoff of one table's failing intent commit.
type intentRetry struct {
	attempt int
	backoff backoff.Backoff
	at      time.Time
	lastErr error
}

// intentError is a commit of a batch's intent that the broker or the
// network refused; other errors of intent are about the batch itself.
type intentError struct{ err error }

func (e *intentError) Error() string { return e.err.Error() }
func (e *intentError) Unwrap() error { return e.err }

// retriableIntent reports whether a failed intent may be recorded later: the
// commit failed on the way (connection refused, timeouts, the coordinator
// moving or loading, a rebalance in progress), or the broker refused this
// member's generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, and under the
// consumer protocol STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH: a rebalance
// moved on, or the session expired during a pause or a broker restart).
//
// Retrying a refused generation is safe because a later attempt can only
// succeed under a generation the member holds again, and franz-go reaches
// one only through the group's callbacks: after a session loss it calls
// the lost callback before it rejoins (onRelease then drops the batch,
// whose partitions are no longer this member's), and a cooperative
// rebalance hands a revoked partition to another member only after this
// member's revoke callback returned (under the consumer protocol too:
// franz-go tells the coordinator that it released a partition only after
// the callback). A batch is therefore recorded only
// while this member owns its partitions (intent checks the ledgers too),
// and a paused member never inserts a batch it had not recorded.
// Static-membership fencing, authorization and metadata size errors are
// not retried: they do not pass by themselves.
func retriableIntent(err error) bool {
	var ie *intentError
	if !errors.As(err, &ie) {
		return false
	}
	return kafkaerr.Classify(err).Retriable()
}

// retryPolicy paces exactly-once's Kafka retries (a failed intent commit,
// recovery's read of the topics' state) as the INSERTs are paced:
// retry_initial doubling up to retry_max, half of each step drawn at random
// (backoff.EqualJitter), so that the members of a group that failed
// together on a broker restart do not retry in lockstep.
func (e *exactly) retryPolicy() backoff.Policy {
	p := e.p
	return backoff.Policy{Initial: p.cfg.ClickHouse.RetryInitial, Max: p.cfg.ClickHouse.RetryMax,
		Jitter: backoff.EqualJitter, Rand: p.jitter}
}

// retryLater handles a failed intent of b: a retriable one puts b back at
// the head of its table's queue with a backoff (retryPolicy) and reports
// true; anything else is left to the caller, which fails the batch.
func (e *exactly) retryLater(ts *tables.Table, b *sealedBatch, err error) bool {
	p := e.p
	if !retriableIntent(err) {
		return false
	}
	r := e.retries[ts]
	if r == nil {
		r = &intentRetry{backoff: backoff.New(e.retryPolicy())}
		e.retries[ts] = r
	}
	r.attempt++
	wait := r.backoff.Next()
	r.at, r.lastErr = p.now().Add(wait), err
	p.disp.requeue(ts, b)
	p.log.Warn().Str("table", ts.Name()).Uint64("batch", b.ID).Int("attempt", r.attempt).
		Dur("retry_in", wait).Err(err).Msg("exactly-once: recording the batch before its INSERT failed; trying again")
	return true
}

// waiting reports whether ts's head batch waits for its intent commit's
// result, or its next intent for its retry time.
func (e *exactly) waiting(ts *tables.Table) bool {
	if _, ok := e.asked[ts]; ok {
		return true
	}
	r := e.retries[ts]
	return r != nil && e.p.now().Before(r.at)
}

// recorded ends ts's backoff after an intent went through.
func (e *exactly) recorded(ts *tables.Table) { delete(e.retries, ts) }

// nextRetry is how long until the earliest intent retry is due; at once
// when an intent's result waits to be taken up, or intents wait for the
// committer while no commit is out (after settle or commitNow).
func (e *exactly) nextRetry(now time.Time) (time.Duration, bool) {
	if len(e.answered) > 0 || e.p.committer.stalled() {
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

// retryDue sends the intents that wait for the committer (stalled), and
// pumps the tables whose intent was answered or whose intent retry is due.
func (e *exactly) retryDue(writeCtx context.Context) {
	p := e.p
	if p.committer.stalled() {
		p.sendNext()
	}
	for ts := range e.answered {
		delete(e.answered, ts)
		p.pump(writeCtx, ts)
	}
	now := p.now()
	for ts, r := range e.retries {
		if !now.Before(r.at) {
			p.pump(writeCtx, ts)
		}
	}
}

type rowParts struct {
	tps  []offsets.TP
	idx  map[offsets.TP]int32
	rows []int32
}

type eoBatch struct {
	token  string
	ranges []eos.Range
	perm   []int
	// recorded: its intent commit succeeded. Until then the batch is
	// dropped if one of its partitions is given up (onRelease).
	recorded bool
	// tried: an intent commit of it was sent and failed. Its outcome is
	// unknown: the broker may have stored it before the answer was lost
	// (franz-go also retries a request internally), so the intent may be
	// recorded, complete, and replayed by the next owner of any of its
	// partitions.
	tried bool
	// failed is the error of its last intent commit (or of building it),
	// until pump takes it up (intent).
	failed error
}

type eoMark struct {
	table *tables.Table
	at    int64
}

// CheckExactlyOnce refuses, in one line, a server or table that exactly-once
// delivery cannot work with (ExactlyOnce.Windows; on a cluster, every
// shard's). It also remembers each table's window (the smallest of its
// shards') for the margin metric and warns of replicas that were not read. Run calls it too, for tables
// resolved later.
func (p *Pipeline) CheckExactlyOnce(ctx context.Context) error {
	if p.eoIO == nil {
		return errNoExactlyOnceIO
	}
	tables := p.eoTables()
	windows, err := p.eoIO.Windows(ctx, tables)
	if err != nil {
		return err
	}
	for i, w := range windows {
		if len(w.Unchecked) > 0 && i < len(tables) {
			p.log.Warn().Str("table", tables[i].FullName()).Strs("replicas", w.Unchecked).Int64("window", w.Size).
				Msg("exactly-once: these replicas could not be reached to read the table's deduplication window; another replica of each of their shards was read, and its window counts")
		}
	}
	if e := p.eo; e != nil {
		for i, t := range tables {
			if ts := p.cat.Table(t.FullName()); ts != nil && i < len(windows) {
				e.windows[ts] = windows[i].Size
				e.settings[ts] = windows[i].Setting
			}
		}
	}
	return nil
}

// eoTables are the tables exactly-once inserts into: the routes' (Tables)
// and the dead-letter tables.
func (p *Pipeline) eoTables() []*chtable.Table {
	out := p.cat.Targets()
	for _, key := range p.cfg.DLQTables() {
		if ts := p.cat.Table(key); ts != nil && ts.DeadLetter() {
			out = append(out, ts.Target())
		}
	}
	return out
}

// errNoExactlyOnceIO is the refusal of an exactly-once pipeline built
// without WithExactlyOnce.
var errNoExactlyOnceIO = errors.New("delivery exactly_once needs the exactly-once I/O (pipeline.WithExactlyOnce)")

// WithExactlyOnce gives the pipeline the I/O of delivery: exactly_once
// (eos.IO in production). Without it an exactly-once pipeline refuses to
// run.
func WithExactlyOnce(x ExactlyOnce) Option { return func(p *Pipeline) { p.eoIO = x } }

// initDelivery sets the delivery hooks (delivery.go): at-least-once, or
// exactly-once with its state.
func (p *Pipeline) initDelivery() {
	p.dlv = atLeastOnce{}
	if !p.cfg.ExactlyOnce() {
		return
	}
	p.eo = &exactly{
		p:         p,
		ledgers:   map[offsets.TP]*eos.Ledger{},
		start:     map[offsets.TP]int64{},
		covers:    map[offsets.TP]eos.Covers{},
		dlqCovers: map[offsets.TP]eos.Covers{},
		rows:      map[*accState]*rowParts{},
		batches:   map[uint64]*eoBatch{},
		windows:   map[*tables.Table]int64{},
		settings:  map[*tables.Table]string{},
		inserts:   map[*tables.Table]int64{},
		marks:     map[string]eoMark{},
		retries:   map[*tables.Table]*intentRetry{},
		asked:     map[*tables.Table]uint64{},
		answered:  map[*tables.Table]bool{},
	}
	p.dlv = p.eo
}

// skip is called for every record before it is routed: it notes where a
// partition without a committed offset started, and reports whether the
// record is already in the table. With dead-letter tables that cannot be
// told before the record is decoded: a bad record inside a range of its
// route's table is not one of its rows, and is skipped only if its row is
// in its dead-letter table. decodeRecord and badRecord decide then
// (coveredRow, deadLettered).
func (e *exactly) skip(tp offsets.TP, offset int64) bool {
	if l := e.ledgers[tp]; l != nil && l.Offset < 0 {
		if _, ok := e.start[tp]; !ok {
			e.start[tp] = offset
		}
	}
	if e.deadLetterRows() {
		return false
	}
	// The spans stay until the committed offset passes them (committed):
	// a partition sought back (onRelease) reads these offsets again.
	return e.covers[tp].Contains(offset)
}

// deadLetterRows reports whether bad records may become rows of a
// dead-letter table, so that whether a record is handled is known only
// once it is decoded.
func (e *exactly) deadLetterRows() bool { return e.p.cat.DeadLetters().Any() }

// coveredRow reports whether the record at offset of tp, which decoded
// into a row of its route's table, is already in that table (decided here
// rather than in skip when deadLetterRows).
func (e *exactly) coveredRow(tp offsets.TP, offset int64) bool {
	return e.deadLetterRows() && e.covers[tp].Contains(offset)
}

// deadLettered reports whether the bad record at offset of tp, meant
// for route rs (nil: none), is already handled: its row is in its
// dead-letter table, or, when its bad records get no row, it lies in a
// range of its route's table that is in (its copy reached the dead-letter
// topic before: no batch holding a record after it is recorded until
// then, blockedBy).
func (e *exactly) deadLettered(tp offsets.TP, offset int64, rs *tables.Route) bool {
	if e.p.cat.DeadLetters().TableOf(rs) != nil {
		return e.dlqCovers[tp].Contains(offset)
	}
	return e.covers[tp].Contains(offset)
}

// onRow notes the partition of the row just appended to a's batch.
func (e *exactly) onRow(a *accState, tp offsets.TP) {
	rp := e.rows[a]
	if rp == nil {
		rp = &rowParts{idx: map[offsets.TP]int32{}}
		e.rows[a] = rp
	}
	i, ok := rp.idx[tp]
	if !ok {
		i = int32(len(rp.tps))
		rp.idx[tp] = i
		rp.tps = append(rp.tps, tp)
	}
	rp.rows = append(rp.rows, i)
}

// onSeal computes the sealed batch's token and canonical row order.
func (e *exactly) onSeal(a *accState, b *sealedBatch) {
	eb := &eoBatch{ranges: eosRanges(b.Ranges)}
	eos.SortRanges(eb.ranges)
	eb.token = eos.Token(a.key.table.Name(), eb.ranges)
	if rp := e.rows[a]; rp != nil {
		order := make([]int, len(rp.tps))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(x, y int) bool { return eos.LessTP(rp.tps[order[x]], rp.tps[order[y]]) })
		rank := make([]int32, len(rp.tps))
		for r, i := range order {
			rank[i] = int32(r)
		}
		parts := make([]int32, len(rp.rows))
		for i, x := range rp.rows {
			parts[i] = rank[x]
		}
		eb.perm = eos.Canonical(parts, len(rp.tps))
		delete(e.rows, a)
	}
	e.batches[b.ID] = eb
}

// ask asks the committer for the commit of b's intent, which b's
// partitions' metadata records, in one commit, before its INSERT
// (intentJob builds it when its turn comes; recordedAs handles the
// result). It reports whether the result comes later, as an event; when
// Run is not running the commit is made at once.
func (e *exactly) ask(ctx context.Context, ts *tables.Table, b *sealedBatch) bool {
	e.asked[ts] = b.ID
	return e.p.commitInOrder(func() (commitJob, bool) { return e.intentJob(ctx, ts, b) })
}

// intentJob is the commit of b's intent, built from the ledgers as the
// commits before it left them: every ledger of b's partitions with b's
// entry added. ok is false when there is nothing to send: b was dropped
// meanwhile (onRelease), or the intent cannot be built, which is then
// b's answer.
func (e *exactly) intentJob(ctx context.Context, ts *tables.Table, b *sealedBatch) (commitJob, bool) {
	if id, ok := e.asked[ts]; !ok || id != b.ID {
		return commitJob{}, false
	}
	eb := e.batches[b.ID]
	if eb == nil {
		delete(e.asked, ts)
		return commitJob{}, false
	}
	pos, meta, next, err := e.intentLedgers(ctx, ts, b, eb)
	if err != nil {
		e.recordedAs(ts, b.ID, nil, err)
		return commitJob{}, false
	}
	eb.tried = true
	return commitJob{pos: pos, meta: meta, answer: func(err error) {
		if err != nil {
			err = &intentError{fmt.Errorf("exactly-once: recording batch %d before its INSERT failed: %w", b.ID, err)}
		}
		e.recordedAs(ts, b.ID, next, err)
	}}, true
}

// intentLedgers are the positions, metadata and ledgers of b's intent.
func (e *exactly) intentLedgers(ctx context.Context, ts *tables.Table, b *sealedBatch, eb *eoBatch) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, map[offsets.TP]eos.Ledger, error) {
	place, err := e.placement(ctx, ts)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("exactly-once: batch %d: %w", b.ID, err)
	}
	pos := map[offsets.TP]offsets.Commit{}
	meta := map[offsets.TP]string{}
	next := map[offsets.TP]eos.Ledger{}
	for _, r := range eb.ranges {
		l := e.ledgers[r.TP]
		if l == nil {
			return nil, nil, nil, fmt.Errorf("exactly-once: %s[%d] is no longer assigned to this member, so batch %d cannot be recorded; stopping so that its new owner replays it", r.TP.Topic, r.TP.Partition, b.ID)
		}
		at := e.position(r.TP, l)
		entry := eos.Entry{Token: eb.token, First: r.First, Last: r.Last, N: len(eb.ranges), Placement: place}
		nl := eos.Ledger{Offset: l.Offset, TopicID: l.TopicID, Check: l.Check,
			Entries: append(append([]eos.Entry(nil), l.Entries...), entry)}.Live(at.Offset)
		s, err := nl.Encode()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("exactly-once: %s[%d]: %w (lower clickhouse.max_in_flight)", r.TP.Topic, r.TP.Partition, err)
		}
		pos[r.TP], meta[r.TP], next[r.TP] = at, s, nl
	}
	return pos, meta, next, nil
}

// recordedAs handles the answer to batch id's intent: on success (err nil)
// the ledgers become next and the batch is recorded; a failure is kept
// for intent. Either way ts's head batch no longer waits, and retryDue
// (or handleCommit) pumps ts. It does not pump itself: settle may hand it
// the result where no INSERT may start.
func (e *exactly) recordedAs(ts *tables.Table, id uint64, next map[offsets.TP]eos.Ledger, err error) {
	if e.asked[ts] == id {
		delete(e.asked, ts)
	}
	e.answered[ts] = true
	eb := e.batches[id]
	if eb == nil {
		return
	}
	if err != nil {
		eb.failed = err
		return
	}
	e.recorded(ts)
	for tp, nl := range next {
		if l := e.ledgers[tp]; l != nil {
			*l = nl
		}
	}
	eb.recorded = true
	e.marks[eb.token] = eoMark{table: ts, at: e.inserts[ts]}
	e.margin(ts)
}

// intent is what b's INSERT uses once its intent is recorded: its token
// and its rows in the canonical order. An error (the intent failed, or b
// has no token) means b must not be inserted.
func (e *exactly) intent(ctx context.Context, ts *tables.Table, b *sealedBatch) (context.Context, chschema.Block, error) {
	eb := e.batches[b.ID]
	if eb == nil {
		return nil, nil, fmt.Errorf("exactly-once: batch %d has no token", b.ID)
	}
	if err := eb.failed; err != nil {
		eb.failed = nil
		return nil, nil, err
	}
	if !eb.recorded {
		return nil, nil, fmt.Errorf("exactly-once: batch %d of %s is not recorded", b.ID, ts.Name())
	}
	return chtable.WithDedupToken(ctx, eb.token), eos.Ordered(b.Data, eb.perm), nil
}

// placement is how the sink splits ts's rows across a cluster's shards
// now ("" when it does not split them; see placementSink).
func (e *exactly) placement(ctx context.Context, ts *tables.Table) (string, error) {
	p := e.p
	ps, ok := p.w.(placementSink)
	if !ok {
		return "", nil
	}
	return ps.Placement(ctx, ts.Target().Database, ts.Target().Name)
}

// position is what a commit of tp may say now: the handled prefix, or the
// offset already committed, or where consumption started.
func (e *exactly) position(tp offsets.TP, l *eos.Ledger) offsets.Commit {
	p := e.p
	if c, ok := p.tracker.Position(tp); ok && c.Offset >= l.Offset {
		return c
	}
	if l.Offset >= 0 {
		return offsets.Commit{Offset: l.Offset, Epoch: -1}
	}
	return offsets.Commit{Offset: e.start[tp], Epoch: -1}
}

// onAck notes a successful INSERT for the margin metric.
func (e *exactly) onAck(ts *tables.Table, id uint64) {
	delete(e.batches, id)
	e.inserts[ts]++
	e.margin(ts)
}

// commitLedgers turns a commit of positions into one that carries each
// partition's ledger, dropping partitions this member does not own.
func (e *exactly) commitLedgers(c map[offsets.TP]offsets.Commit) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, map[offsets.TP]eos.Ledger) {
	meta := map[offsets.TP]string{}
	next := map[offsets.TP]eos.Ledger{}
	for tp, pos := range c {
		l := e.ledgers[tp]
		if l == nil {
			delete(c, tp)
			continue
		}
		nl := l.Live(pos.Offset)
		s, err := nl.Encode()
		if err != nil {
			delete(c, tp) // cannot shrink by moving forward; the next commit retries
			continue
		}
		meta[tp], next[tp] = s, nl
	}
	return c, meta, next
}

// committed stores what a successful commit recorded.
func (e *exactly) committed(next map[offsets.TP]eos.Ledger) {
	for tp, nl := range next {
		if l := e.ledgers[tp]; l != nil {
			*l = nl
		}
		for _, covers := range []map[offsets.TP]eos.Covers{e.covers, e.dlqCovers} {
			if c, ok := covers[tp]; ok {
				if c = c.From(nl.Offset); len(c) == 0 {
					delete(covers, tp)
				} else {
					covers[tp] = c
				}
			}
		}
	}
	e.margins()
}

// margins recomputes the margin of every table.
func (e *exactly) margins() {
	p := e.p
	p.cat.EachTable(e.margin)
}

// margin sets ts's margin: its window minus the inserts since the oldest
// token still listed in a ledger was recorded.
func (e *exactly) margin(ts *tables.Table) {
	p := e.p
	live := map[string]bool{}
	for _, l := range e.ledgers {
		for _, en := range l.Entries {
			live[en.Token] = true
		}
	}
	oldest := e.inserts[ts]
	for tok, m := range e.marks {
		if !live[tok] {
			delete(e.marks, tok)
			continue
		}
		if m.table == ts && m.at < oldest {
			oldest = m.at
		}
	}
	p.m.DedupMargin(ts.Name(), e.windows[ts]-(e.inserts[ts]-oldest))
}

// onRelease forgets partitions revoked or lost and drops the work that can
// no longer be inserted as it is.
//
// A batch whose intent is recorded is left alone, also while its INSERT
// runs: the INSERT carries the batch's token, and whoever owns the given-up
// partitions next finds the intent and replays the batch with the same
// token, so ClickHouse keeps one copy (this member too, if the partitions
// come back while the INSERT still runs).
//
// A batch not yet recorded (sealed, waiting for its insert slot, for its
// intent commit's turn in the committer or for its retry) and an open
// batch can never be recorded once they hold records of a given-up
// partition: those records belong to the partition's next owner, who
// consumes them from the recorded offset. Such a batch is dropped, and
// with it the records it holds of partitions this member keeps. Except
// when an intent commit of the batch was sent and failed (none is out
// here: forget settled it first): it may be recorded after all, so if it
// holds a partition this member keeps, the member stops rather than build
// those records into other batches (recovery reads the ledgers on
// restart); if it holds only partitions given up, it is dropped like the
// others, because the next owners settle it from the ledgers. Those partitions are sought back to the first offset
// the dropped batches hold of them, the offsets tracker forgets everything
// from there, and every other batch not yet recorded that holds records of
// them from there is dropped as well (and so on, for the partitions those
// hold). A table's batches are recorded in seal order, so no recorded
// batch holds anything past a seek point: what was recorded (offsets,
// intents, their ranges) stays exactly as it was, and the records from the
// seek point on are consumed and batched again as if for the first time.
func (e *exactly) onRelease(tps []offsets.TP) {
	p := e.p
	for _, tp := range tps {
		delete(e.ledgers, tp)
		delete(e.start, tp)
		delete(e.covers, tp)
		delete(e.dlqCovers, tp)
	}
	var unrecorded []eos.Unrecorded
	open := map[uint64]*accState{}
	p.disp.eachSealed(func(f *flight) {
		if eb := e.batches[f.b.ID]; eb != nil && !eb.recorded {
			unrecorded = append(unrecorded, eos.Unrecorded{ID: f.b.ID, Tried: eb.tried, Ranges: eosRanges(f.b.Ranges)})
		}
	})
	p.disp.eachOpen(func(a *accState) {
		if !a.acc.Empty() {
			open[a.id] = a
			unrecorded = append(unrecorded, eos.Unrecorded{ID: a.id, Open: true, Ranges: eosRanges(a.acc.Ranges())})
		}
	})
	plan := eos.PlanRelease(tps, unrecorded)
	if plan.Stop {
		if p.fatal == nil {
			p.fatal = fmt.Errorf("exactly-once: %s[%d] was given up while batch %d (with %s[%d]) retried its intent commit; whether that intent was recorded is unknown (docs/guarantees.md#partitions-given-up-with-work-in-progress)",
				plan.Lost.Topic, plan.Lost.Partition, plan.StopBatch, plan.Kept.Topic, plan.Kept.Partition)
		}
		return
	}
	if len(plan.Drop) == 0 {
		return
	}
	rows, batches, opened := 0, 0, 0
	for _, d := range plan.Drop {
		if d.Open {
			rows += e.dropOpen(open[d.ID])
			opened++
		} else {
			rows += e.dropSealed(d.ID)
			batches++
		}
	}
	for tp, at := range plan.Seek {
		p.tracker.Truncate(tp, at)
	}
	p.log.Warn().Int("batches", batches).Int("open_batches", opened).Int("rows", rows).Int("partitions_sought_back", len(plan.Seek)).
		Msg("exactly-once: dropped batches not yet recorded that held records of partitions given up; their records of the partitions kept are consumed again")
	if len(plan.Seek) == 0 {
		return
	}
	e.seek(plan.Seek)
}

// eosRanges are a batch's ranges as eos names them.
func eosRanges(rs []batch.Range) []eos.Range {
	out := make([]eos.Range, len(rs))
	for i, r := range rs {
		out[i] = eos.Range{TP: r.TP, First: r.First, Last: r.Last}
	}
	return out
}

// dropSealed drops sealed batch id, not recorded, and returns its rows.
func (e *exactly) dropSealed(id uint64) int {
	p := e.p
	// Out of the queue but not recorded (at -1): its intent commit
	// failed for good (the member was fenced, which the loss explains)
	// and the failure is on its way as an ack, which now finds no batch.
	// withdraw frees its slot.
	f, at := p.disp.withdraw(id)
	if at == 0 {
		delete(e.retries, f.table) // the backoff was this batch's
		if e.asked[f.table] == id {
			delete(e.asked, f.table) // its intent, not sent yet, is skipped
		}
	}
	delete(e.batches, id)
	if p.revoke != nil {
		delete(p.revoke.waiting, id)
	}
	return f.b.Rows()
}

// dropOpen drops a's open batch and returns its rows.
func (e *exactly) dropOpen(a *accState) int {
	p := e.p
	rows := 0
	if b := a.acc.Seal(p.now(), a.id, batch.ReasonRevoke, e.p.disp.block(a.key.table)); b != nil {
		rows = b.Rows()
	}
	a.id = p.newID()
	a.oldest = 0
	delete(e.rows, a)
	return rows
}

// seek consumes the kept partitions of seek again from their offsets.
func (e *exactly) seek(seek map[offsets.TP]int64) {
	p := e.p
	// Records of the sought partitions that were fetched but not decoded
	// yet, or wait for the schema registry, lie past the seek point: they
	// are consumed again from there, so these copies go.
	sought := make([]offsets.TP, 0, len(seek))
	for tp := range seek {
		sought = append(sought, tp)
	}
	p.dropPending(sought)
	p.dropHeld(sought)
	s, ok := p.cons.(seekSource)
	if !ok {
		if p.fatal == nil {
			p.fatal = errors.New("exactly-once: batches holding partitions given up were dropped, and the source cannot consume the partitions kept again; stopping so that the group consumes them again from the recorded offsets")
		}
		return
	}
	s.Seek(seek)
}

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
func (e *exactly) recoverParts(ctx context.Context, tps []offsets.TP) error {
	p := e.p
	if len(tps) == 0 {
		return nil
	}
	snap, err := e.snapshot(ctx)
	if err != nil {
		return err
	}
	plan := eos.PlanRecovery(snap, tps, e.tablesOf(ctx))
	for _, n := range plan.Notes {
		p.log.Warn().Msg("exactly-once: " + n)
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
	bound := p.cfg.Kafka.RebalanceTimeout
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
		p.log.Info().Int("batches", len(plan.Replays)).Msg("exactly-once: pending batches replayed with their tokens")
	}
	return nil
}

// recoverInTables is recoverParts' ClickHouse half: the replays, then each
// partition's check. ClickHouse down or restarting (a retriable error) is
// waited out with the INSERTs' backoff until ctx, the recovery's bound,
// ends; both halves may run again, since a replay goes in with its token
// (dropped when it landed) and a check only reads and adds what it found.
func (e *exactly) recoverInTables(ctx context.Context, plan *eos.Plan, ids map[string]string, ends map[offsets.TP]int64) error {
	p := e.p
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
		p.log.Warn().Err(err).Dur("retry_in", wait).
			Msg("exactly-once: recovering the assigned partitions needs ClickHouse, retrying")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// tableOf is the table a topic's records go to, for the recovery's plan.
func (e *exactly) tableOf(ctx context.Context) func(topic string) (string, bool) {
	return func(topic string) (string, bool) {
		rs, err := e.p.cat.RouteFor(ctx, topic)
		if err != nil || rs == nil {
			return "", false
		}
		return rs.Table().Name(), true
	}
}

// tablesOf are the tables a topic's records go to: its route's and its
// dead-letter table, for the recovery's plan.
func (e *exactly) tablesOf(ctx context.Context) func(topic string) []string {
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
func (e *exactly) replayAll(ctx context.Context, replays []eos.Intent) (failed map[offsets.TP]*eos.Range, err error) {
	failed = map[offsets.TP]*eos.Range{}
	for _, in := range replays {
		err := e.replay(ctx, in)
		if err == nil {
			continue
		}
		if !errors.Is(err, errUnreadable) {
			return nil, err
		}
		e.p.log.Warn().Err(err).Str("token", in.Token).Msg("exactly-once: a pending batch cannot be read back; its ranges are checked in the table instead")
		for _, r := range in.Ranges {
			failed[r.TP] = &r
		}
	}
	return failed, nil
}

// recoverPart sets up one assigned partition from its recovery r: the
// offsets its replays covered, the failed replay's range (fr, nil when
// none) turned into a check, the check in the table, and its ledger.
func (e *exactly) recoverPart(ctx context.Context, plan *eos.Plan, r eos.Recovery, fr *eos.Range, ids map[string]string, ends map[offsets.TP]int64) error {
	l := r.Ledger
	l.Offset = r.Offset
	if fr == nil {
		for _, in := range plan.Replays {
			covers := e.covers
			if e.p.cat.Table(in.Table).DeadLetter() {
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
func (e *exactly) checkPresent(ctx context.Context, r eos.Recovery, l *eos.Ledger, ends map[offsets.TP]int64) error {
	p := e.p
	table, ok := e.tableOf(ctx)(r.TP.Topic)
	if !ok {
		return nil
	}
	ts := p.cat.Table(table)
	spans, err := p.eoIO.Present(ctx, ts.Target(), r.TP, r.CheckFrom, r.CheckTo)
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
	p.log.Info().Str("topic", r.TP.Topic).Int32("partition", r.TP.Partition).Int64("committed", r.Offset).
		Str("why", r.Why).Str("table", table).Int("present_spans", n).Msg("exactly-once: checked which offsets the table already holds")
	if n > 0 && r.Offset < 0 {
		// Right for a new group name or expired offsets. A
		// topic deleted and recreated that has already grown
		// past the old one's rows looks the same (Kafka drops
		// the group's offsets, and the ledgers with them, when
		// the topic is deleted): said loudly, since its new
		// records at these offsets are not inserted.
		p.log.Warn().Str("topic", r.TP.Topic).Int32("partition", r.TP.Partition).
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
func (e *exactly) checkDeadLetters(ctx context.Context, r eos.Recovery, l *eos.Ledger) error {
	p := e.p
	ts := e.dlqTable(ctx, r.TP.Topic)
	if ts == nil {
		return nil
	}
	spans, err := p.eoIO.Present(ctx, ts.Target(), r.TP, r.CheckFrom, r.CheckTo)
	if err != nil {
		return err
	}
	for _, s := range spans {
		e.dlqCovers[r.TP] = e.dlqCovers[r.TP].Add(s)
	}
	if n := len(spans); n > 0 && spans[n-1].Last+1 > l.Check {
		l.Check = spans[n-1].Last + 1
	}
	p.log.Info().Str("topic", r.TP.Topic).Int32("partition", r.TP.Partition).Int64("committed", r.Offset).
		Str("why", r.Why).Str("table", ts.Name()).Int("present_spans", len(spans)).
		Msg("exactly-once: checked which bad records the dead-letter table already holds")
	return nil
}

// dlqTable is the dead-letter table of topic's bad records (records of
// a topic no route takes are bad with errors.unrouted: dlq), nil when they
// get no row.
func (e *exactly) dlqTable(ctx context.Context, topic string) *tables.Table {
	p := e.p
	if !e.deadLetterRows() {
		return nil
	}
	rs, err := p.cat.RouteFor(ctx, topic)
	if err != nil || (rs == nil && p.cfg.Errors.Unrouted != "dlq") {
		return nil
	}
	return p.cat.DeadLetters().TableOf(rs)
}

// eoTopicStateFor bounds how long recovery retries reading the topic IDs
// and log ends while the brokers cannot answer (a killed leader's
// partitions move after the broker session timeout, about 9 s by default).
const eoTopicStateFor = time.Minute

// topicState is ExactlyOnce.TopicState retried with backoff
// (retryPolicy) while its error is retriable (kafkaerr.Classify), for at
// most eoTopicStateFor.
func (e *exactly) topicState(ctx context.Context, tps []offsets.TP) (ids map[string]string, ends map[offsets.TP]int64, err error) {
	p := e.p
	_, err = kafkaerr.Retry(ctx, e.retryPolicy(), time.Now().Add(eoTopicStateFor), nil, nil, func() (err error) {
		ids, ends, err = p.eoIO.TopicState(ctx, tps)
		return err
	})
	return ids, ends, err
}

// snapshot is ExactlyOnce.Snapshot retried as topicState is: the
// group's committed offsets are read from its coordinator, which may be the
// broker that was just killed until the group moves (a dial refused, or
// COORDINATOR_NOT_AVAILABLE meanwhile).
func (e *exactly) snapshot(ctx context.Context) (snap eos.Snapshot, err error) {
	p := e.p
	warn := func(err error, wait time.Duration) {
		p.log.Warn().Err(err).Dur("retry_in", wait).Msg("exactly-once: reading the group's ledgers failed; retrying")
	}
	_, err = kafkaerr.Retry(ctx, e.retryPolicy(), time.Now().Add(eoTopicStateFor), nil, warn, func() (err error) {
		snap, err = p.eoIO.Snapshot(ctx)
		return err
	})
	return snap, err
}

// recreated is the error that stops the connector when tp's topic was
// deleted and recreated (why is the proof): one line with the fix, since
// the rows in the table at the new topic's offsets are the old topic's,
// and so would be the deduplication tokens of batches over the same
// offsets.
func (e *exactly) recreated(tp offsets.TP, why string, tableOf func(string) (string, bool)) error {
	p := e.p
	table, _ := tableOf(tp.Topic)
	setting, window := "non_replicated_deduplication_window", int64(0)
	if ts := p.cat.Table(table); ts != nil {
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
func (e *exactly) replay(ctx context.Context, in eos.Intent) error {
	p := e.p
	ts := p.cat.Table(in.Table)
	if ts == nil {
		return fmt.Errorf("exactly-once: pending batch for unknown table %s", in.Table)
	}
	// Each shard drops its part of a replay by the batch's token; a batch
	// split another way would give a shard rows under a token it holds
	// (dropped, so lost) and another shard rows it has (doubled).
	if in.Placement != "" {
		now, err := e.placement(ctx, ts)
		if err != nil {
			return fmt.Errorf("exactly-once: replaying a pending batch into %s: %w", in.Table, err)
		}
		if now != in.Placement {
			return fmt.Errorf("exactly-once: pending batch %s into %s was split under placement %s; the shards, weights or sharding key now place rows under %s (docs/cluster.md#exactly-once-on-a-cluster)",
				in.Token, in.Table, in.Placement, orNone(now))
		}
	}
	recs, err := p.eoIO.ReadRanges(ctx, in.Ranges)
	if err != nil {
		return fmt.Errorf("%w: %v", errUnreadable, err)
	}
	blk := ts.NewBlock()
	if ts.DeadLetter() {
		if err := e.deadLetterBlock(ctx, ts, in, recs, blk); err != nil {
			return fmt.Errorf("exactly-once: replaying a pending batch into %s: %w", in.Table, err)
		}
	} else {
		for _, r := range in.Ranges {
			for _, rec := range recs[r.TP] {
				rs, err := p.cat.RouteFor(ctx, rec.Topic)
				if err != nil || rs == nil || rs.Table() != ts {
					continue
				}
				// Tombstones and bad records made no row the first time either.
				_ = rs.Plan().Append(blk, rec)
			}
		}
	}
	if blk.Rows() == 0 {
		return nil
	}
	if err := p.fill.Fill(ctx, ts.Target(), blk); err != nil {
		return fmt.Errorf("exactly-once: replaying a pending batch into %s: %w", in.Table, err)
	}
	err = p.w.Insert(chtable.WithDedupToken(ctx, in.Token), ts.Target(), blk, 0, nil, nil)
	if err != nil {
		return fmt.Errorf("exactly-once: replaying a pending batch into %s: %w", in.Table, err)
	}
	p.log.Info().Str("table", in.Table).Str("token", in.Token).Int("rows", blk.Rows()).Int("partitions", len(in.Ranges)).
		Msg("exactly-once: pending batch replayed (dropped by ClickHouse if it had landed)")
	return nil
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
func (e *exactly) deadLetterBlock(ctx context.Context, ts *tables.Table, in eos.Intent, recs map[offsets.TP][]*kgo.Record, blk *decode.Block) error {
	p := e.p
	scratch := map[*tables.Table]*decode.Block{}
	for _, r := range in.Ranges {
		spans, err := p.eoIO.Present(ctx, ts.Target(), r.TP, r.First, r.Last+1)
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
			rs, cause, err := p.badNow(ctx, rec, scratch)
			if err != nil {
				return err
			}
			if cause == nil || p.cat.DeadLetters().TableOf(rs) != ts {
				continue
			}
			if err := p.cat.DeadLetters().Append(blk, ts, rec, cause, tables.MeantFor(rs)); err != nil {
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
func (p *Pipeline) badNow(ctx context.Context, rec *kgo.Record, scratch map[*tables.Table]*decode.Block) (rs *tables.Route, cause, err error) {
	rs, err = p.cat.RouteFor(ctx, rec.Topic)
	if err != nil {
		return nil, nil, err
	}
	if rs == nil {
		if p.cfg.Errors.Unrouted == "dlq" {
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

// orNone is s, or "none" when s is "".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

package delivery

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"sink/internal/backoff"
	"sink/internal/batch"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/eos"
	"sink/internal/kafkaerr"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// A batch's intent: its token and ranges, recorded in its partitions'
// ledgers by one commit before its INSERT (the committer makes it, in the
// order asked); the INSERT then carries the token and the rows in the
// canonical order (grouped by topic and partition, each in offset order),
// which a replay rebuilt from Kafka reproduces.

// rowParts is an open batch's rows by partition, in arrival order.
type rowParts struct {
	tps  []offsets.TP
	idx  map[offsets.TP]int32
	rows []int32
}

// eoBatch is what exactly-once knows of a sealed batch.
type eoBatch struct {
	token  string
	ranges []eos.Range
	perm   []int
	// recorded: its intent commit succeeded. Until then the batch is
	// dropped if one of its partitions is given up (OnRelease).
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

// eoMark is when a live token was recorded: its table's insert count then.
type eoMark struct {
	table *tables.Table
	at    int64
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
// the lost callback before it rejoins (OnRelease then drops the batch,
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
func (e *Exactly) retryPolicy() backoff.Policy {
	return backoff.Policy{Initial: e.cfg.ClickHouse.RetryInitial, Max: e.cfg.ClickHouse.RetryMax,
		Jitter: backoff.EqualJitter, Rand: e.Jitter}
}

// retryLater handles a failed intent of b: a retriable one puts b back at
// the head of its table's queue with a backoff (retryPolicy) and reports
// true; anything else is left to the caller, which fails the batch.
func (e *Exactly) retryLater(ts *tables.Table, b *Batch, err error) bool {
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
	r.at, r.lastErr = e.Now().Add(wait), err
	e.Batches.Requeue(ts, b)
	e.Log.Warn().Str("table", ts.Name()).Uint64("batch", b.ID).Int("attempt", r.attempt).
		Dur("retry_in", wait).Err(err).Msg("exactly-once: recording the batch before its INSERT failed; trying again")
	return true
}

// recorded ends ts's backoff after an intent went through.
func (e *Exactly) recorded(ts *tables.Table) { delete(e.retries, ts) }

// OnRow notes the partition of the row just appended to open batch id.
func (e *Exactly) OnRow(id uint64, tp offsets.TP) {
	rp := e.rows[id]
	if rp == nil {
		rp = &rowParts{idx: map[offsets.TP]int32{}}
		e.rows[id] = rp
	}
	i, ok := rp.idx[tp]
	if !ok {
		i = int32(len(rp.tps))
		rp.idx[tp] = i
		rp.tps = append(rp.tps, tp)
	}
	rp.rows = append(rp.rows, i)
}

// OnSeal computes the token and canonical row order of b, the batch of
// ts the open batch of the same id was just sealed as.
func (e *Exactly) OnSeal(ts *tables.Table, b *Batch) {
	eb := &eoBatch{ranges: eosRanges(b.Ranges)}
	eos.SortRanges(eb.ranges)
	eb.token = eos.Token(ts.Name(), eb.ranges)
	if rp := e.rows[b.ID]; rp != nil {
		eb.perm = canonical(rp)
		delete(e.rows, b.ID)
	}
	e.batches[b.ID] = eb
}

// canonical is the order of rp's rows grouped by partition (eos.LessTP),
// each partition's in arrival order: nil when they are in it already.
func canonical(rp *rowParts) []int {
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
	return eos.Canonical(parts, len(rp.tps))
}

// eosRanges are a batch's ranges as eos names them.
func eosRanges(rs []batch.Range) []eos.Range {
	out := make([]eos.Range, len(rs))
	for i, r := range rs {
		out[i] = eos.Range{TP: r.TP, First: r.First, Last: r.Last}
	}
	return out
}

// ask asks the committer for the commit of b's intent, which b's
// partitions' metadata records, in one commit, before its INSERT
// (intentJob builds it when its turn comes; recordedAs handles the
// result). It reports whether the result comes later, as an event; when
// Run is not running the commit is made at once.
func (e *Exactly) ask(ctx context.Context, ts *tables.Table, b *Batch) bool {
	e.asked[ts] = b.ID
	return e.Commits.InOrder(func() (Intent, bool) { return e.intentJob(ctx, ts, b) })
}

// intentJob is the commit of b's intent, built from the ledgers as the
// commits before it left them: every ledger of b's partitions with b's
// entry added. ok is false when there is nothing to send: b was dropped
// meanwhile (OnRelease), or the intent cannot be built, which is then
// b's answer.
func (e *Exactly) intentJob(ctx context.Context, ts *tables.Table, b *Batch) (Intent, bool) {
	if id, ok := e.asked[ts]; !ok || id != b.ID {
		return Intent{}, false
	}
	eb := e.batches[b.ID]
	if eb == nil {
		delete(e.asked, ts)
		return Intent{}, false
	}
	pos, meta, next, err := e.intentLedgers(ctx, ts, b, eb)
	if err != nil {
		e.recordedAs(ts, b.ID, nil, err)
		return Intent{}, false
	}
	eb.tried = true
	return Intent{Pos: pos, Meta: meta, Answer: func(err error) {
		if err != nil {
			err = &intentError{fmt.Errorf("exactly-once: recording batch %d before its INSERT failed: %w", b.ID, err)}
		}
		e.recordedAs(ts, b.ID, next, err)
	}}, true
}

// intentLedgers are the positions, metadata and ledgers of b's intent.
func (e *Exactly) intentLedgers(ctx context.Context, ts *tables.Table, b *Batch, eb *eoBatch) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, map[offsets.TP]eos.Ledger, error) {
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
// for intent. Either way ts's head batch no longer waits, and RetryDue
// (after the commit's result) pumps ts. It does not pump itself: the
// answer may come where no INSERT may start.
func (e *Exactly) recordedAs(ts *tables.Table, id uint64, next map[offsets.TP]eos.Ledger, err error) {
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
func (e *Exactly) intent(ctx context.Context, ts *tables.Table, b *Batch) (context.Context, chschema.Block, error) {
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
// now ("" when it does not split them; see Placer).
func (e *Exactly) placement(ctx context.Context, ts *tables.Table) (string, error) {
	ps, ok := e.Sink.(Placer)
	if !ok {
		return "", nil
	}
	return ps.Placement(ctx, ts.Target().Database, ts.Target().Name)
}

// position is what a commit of tp may say now: the handled prefix, or the
// offset already committed, or where consumption started.
func (e *Exactly) position(tp offsets.TP, l *eos.Ledger) offsets.Commit {
	if c, ok := e.Tracker.Position(tp); ok && c.Offset >= l.Offset {
		return c
	}
	if l.Offset >= 0 {
		return offsets.Commit{Offset: l.Offset, Epoch: -1}
	}
	return offsets.Commit{Offset: e.start[tp], Epoch: -1}
}

// commitLedgers turns a commit of positions into one that carries each
// partition's ledger, dropping partitions this member does not own.
func (e *Exactly) commitLedgers(c map[offsets.TP]offsets.Commit) (map[offsets.TP]offsets.Commit, map[offsets.TP]string, map[offsets.TP]eos.Ledger) {
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
func (e *Exactly) committed(next map[offsets.TP]eos.Ledger) {
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
	e.Catalog.EachTable(e.margin)
}

// margin sets ts's margin: its window minus the inserts since the oldest
// token still listed in a ledger was recorded.
func (e *Exactly) margin(ts *tables.Table) {
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
	e.Metrics.DedupMargin(ts.Name(), e.windows[ts]-(e.inserts[ts]-oldest))
}

package intake

import (
	"context"
	"iter"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/backoff"
	"sink/internal/cdc"
	"sink/internal/offsets"
	"sink/internal/tables"
)

// Records held until they can be decoded as they should.
//
// Two waits hold a record. A registry-framed record whose schema id is not
// known yet (its look-up is running, off the owner goroutine: lookup.go)
// or whose look-up failed (the registry is down or failing:
// decode.ErrUnavailable) is not a bad record: it will decode once the
// registry answers. And a record that carries a field its table is about
// to get a column for (internal/tables: an ADD COLUMN is running, or the table
// is being re-read because a person may have added it) would lose that
// field's value if decoded now. Either way the record is held, together
// with every record after it in its partition (order within a partition
// is kept: nothing of the partition is appended past it), and appended
// again: as soon as a look-up ends or the table's new description is
// applied for a column (the end of a look-up and of a table's re-read kick the retry), and
// after a backoff while the registry fails. Held records are not in the offsets
// tracker, so no commit passes them; while any are held no new fetch is
// requested (fetching stops rather than buffering without bound: what is
// held is at most the polled records, counted in batch.buffer_memory). A
// revoked or lost partition's held records are dropped: its next owner
// consumes them from the committed offset. At shutdown they are dropped
// the same way, uncommitted, so a restart reads them again: nothing is
// lost or duplicated.

// heldRetryFirst and heldRetryMax bound the backoff between two attempts
// at the oldest held record: doubling from the first, with jitter, up to
// the max. A registry restart takes seconds; an outage may take minutes,
// during which one lookup per heldRetryMax is cheap.
const (
	heldRetryFirst = 200 * time.Millisecond
	heldRetryMax   = 10 * time.Second
)

// heldRetry is that schedule.
var heldRetry = backoff.Policy{Initial: heldRetryFirst, Max: heldRetryMax, Jitter: backoff.EqualJitter}

// heldPart is a partition's held records, in offset order.
type heldPart struct {
	tp   offsets.TP
	recs []*kgo.Record
	// wait is why the first record is held: a *tables.Wait, a
	// *cdc.TruncateWait or
	// the registry's error.
	wait error
}

// isSchemaWait reports whether err holds a record for its table (its
// schema, or a TRUNCATE being applied: internal/cdc) rather than for the
// registry.
func isSchemaWait(err error) bool {
	switch err.(type) {
	case *tables.Wait, *cdc.TruncateWait:
		return true
	}
	return false
}

// heldState is the records held and the retry schedule. The zero value
// holds nothing. Owned by the owner goroutine: Held's calls around it
// (hold, Retry, drop) decode, log and publish; these keep the partitions,
// their bytes and the schedule consistent.
type heldState struct {
	parts   []*heldPart // in the order they were held
	bytes   int         // key and value bytes of the held records (part of the buffer budget)
	since   time.Time   // when the first record was held
	next    time.Time   // the next attempt
	backoff backoff.Backoff
	attempt int
	lastErr error // the registry's last error
}

// holding reports whether any record is held.
func (h *heldState) holding() bool { return len(h.parts) > 0 }

// part is tp's held records, or nil.
func (h *heldState) part(tp offsets.TP) *heldPart {
	for _, hp := range h.parts {
		if hp.tp == tp {
			return hp
		}
	}
	return nil
}

// has reports whether tp has records held.
func (h *heldState) has(tp offsets.TP) bool { return h.part(tp) != nil }

// hold appends recs to tp's held records (a new partition waits for err)
// and starts the schedule at now if nothing was held.
func (h *heldState) hold(tp offsets.TP, recs []*kgo.Record, err error, now time.Time) {
	part := h.part(tp)
	if part == nil {
		part = &heldPart{tp: tp, wait: err}
		h.parts = append(h.parts, part)
	}
	part.recs = append(part.recs, recs...)
	for _, r := range recs {
		h.bytes += len(r.Key) + len(r.Value)
	}
	if err != nil && !isSchemaWait(err) && !isLookupPending(err) {
		h.lastErr = err
	}
	if h.since.IsZero() {
		h.since = now
		h.backoff = backoff.New(heldRetry)
		h.attempt = 0
		h.next = now.Add(h.backoff.Next())
	}
}

// kick makes the next attempt due at now, when records are held.
func (h *heldState) kick(now time.Time) {
	if h.holding() {
		h.next = now
	}
}

// due reports whether records are held and their attempt is due at now.
func (h *heldState) due(now time.Time) bool { return h.holding() && !now.Before(h.next) }

// records counts the records held.
func (h *heldState) records() int {
	n := 0
	for _, hp := range h.parts {
		n += len(hp.recs)
	}
	return n
}

// counts splits the records held by what they wait for: the registry, or
// their table (isSchemaWait).
func (h *heldState) counts() (registry, schema int) {
	for _, hp := range h.parts {
		if isSchemaWait(hp.wait) {
			schema += len(hp.recs)
		} else {
			registry += len(hp.recs)
		}
	}
	return registry, schema
}

// waitingFor yields the held records of the partitions whose first record
// waits for table's new column (a *tables.Wait), in the order they were held.
func (h *heldState) waitingFor(table string) iter.Seq[*kgo.Record] {
	return func(yield func(*kgo.Record) bool) {
		for _, hp := range h.parts {
			if w, ok := hp.wait.(*tables.Wait); !ok || w.Table != table {
				continue
			}
			for _, r := range hp.recs {
				if !yield(r) {
					return
				}
			}
		}
	}
}

// pop takes hp's first record out of what is held.
func (h *heldState) pop(hp *heldPart) *kgo.Record {
	r := hp.recs[0]
	hp.recs[0] = nil
	hp.recs = hp.recs[1:]
	h.bytes -= len(r.Key) + len(r.Value)
	return r
}

// prune forgets the partitions left without records, and the schedule
// when none is left.
func (h *heldState) prune() {
	h.parts = slices.DeleteFunc(h.parts, func(hp *heldPart) bool { return len(hp.recs) == 0 })
	if len(h.parts) == 0 {
		*h = heldState{}
	}
}

// reschedule sets the next attempt after a round that left records held:
// after the next backoff step, or, when only look-ups still running held
// records (their ends kick the next round), after the current one, not
// counted.
func (h *heldState) reschedule(now time.Time, onlyPending bool) {
	if onlyPending {
		h.next = now.Add(h.backoff.Wait(h.backoff.Retries()))
	} else {
		h.next = now.Add(h.backoff.Next())
	}
}

// drop takes the held records of tps out of what is held and returns
// their partitions, for the caller to recycle.
func (h *heldState) drop(tps []offsets.TP) []*heldPart {
	var dropped []*heldPart
	h.parts = slices.DeleteFunc(h.parts, func(hp *heldPart) bool {
		if !slices.Contains(tps, hp.tp) {
			return false
		}
		for _, r := range hp.recs {
			h.bytes -= len(r.Key) + len(r.Value)
		}
		dropped = append(dropped, hp)
		return true
	})
	if len(h.parts) == 0 {
		*h = heldState{}
	}
	return dropped
}

// Held is the records held, with what decodes them again, logs and
// publishes their count. Owned by the owner goroutine, like the Intake it
// belongs to, but for Now.
type Held struct {
	heldState
	in  *Intake
	now atomic.Int64 // the records held, for other goroutines
}

// Held is the records held for the schema registry or a table's new
// column.
func (in *Intake) Held() *Held { return &in.held }

// hold holds recs (a partition's records from the one that cannot be
// decoded now). err is why: the registry's error, a *tables.Wait or a
// *cdc.TruncateWait; nil when recs join the partition's records already
// held.
func (h *Held) hold(tp offsets.TP, recs []*kgo.Record, err error) {
	in := h.in
	if !h.has(tp) {
		if sw, ok := err.(*tables.Wait); ok {
			in.log.Info().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", recs[0].Offset).
				Str("table", sw.Table).Str("field", sw.Field).Bool("reread", sw.Reread).
				Msg("a record carries a field its table is getting a column for: holding the partition's records until the table has it; fetching paused")
		} else if err != nil && !isLookupPending(err) && h.lastErr == nil {
			in.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", recs[0].Offset).
				Err(err).Msg("schema registry unavailable for a schema id not cached: holding the partition's records and retrying; fetching paused")
		}
	}
	h.heldState.hold(tp, recs, err, in.now())
	h.note()
}

// Kick makes the held records' next attempt due now: a table's new
// description was applied, a column's ALTER or a TRUNCATE ended, a schema
// look-up ended.
func (h *Held) Kick() { h.kick(h.in.now()) }

// note publishes the count of held records: to the metrics (by what they
// wait for), and for readers outside the owner goroutine (Now).
func (h *Held) note() {
	reg, sch := h.counts()
	h.now.Store(int64(reg + sch))
	h.in.m.SetRegistryWaiting(reg)
	h.in.m.SetSchemaWaiting(sch)
}

// Now is the count of held records; safe from any goroutine.
func (h *Held) Now() int { return int(h.now.Load()) }

// Holding reports whether records are held (no fetch is asked for
// meanwhile); Records counts them; Holds, whether tp's are.
func (h *Held) Holding() bool            { return h.holding() }
func (h *Held) Records() int             { return h.records() }
func (h *Held) Holds(tp offsets.TP) bool { return h.has(tp) }

// Next reports how long until the next attempt at the held records, when
// some are. (During a revoke the pipeline does not ask: the revoke's
// deadline wakes its loop; a paused connector decodes nothing.)
func (h *Held) Next(now time.Time) (time.Duration, bool) {
	if !h.holding() {
		return 0, false
	}
	return max(h.next.Sub(now), 0), true
}

// Retry appends the held records again, partition by partition in the
// order they were held, once their attempt is due. The first record the
// registry failed to serve ends the registry's part of the round (it is
// still down: asking again for the next partition would only start more
// look-ups that fail); a partition whose record waits for a look-up still
// running (lookup.go), or for its table's schema, stays held while the
// others go on. What is left waits for the backoff, or for the next Kick
// (a look-up ended, a table's description was applied). A round that ends
// only on look-ups still running does not lengthen the backoff: their
// ends kick the next round. The pipeline does not call it during a revoke
// or a pause.
func (h *Held) Retry(writeCtx context.Context) {
	in := h.in
	if !h.due(in.now()) {
		return
	}
	h.attempt++
	r := h.round(writeCtx)
	since, attempts := h.since, h.attempt
	h.prune()
	in.cat.Evolution().LaunchAlters(h.waitingFor)
	if !h.holding() {
		in.log.Info().Dur("held_for", in.now().Sub(since)).Int("attempts", attempts).
			Msg("held records decoded; fetching resumed")
		h.note()
		return
	}
	h.reschedule(in.now(), r.regErr == nil && r.pending)
	if r.regErr != nil {
		h.lastErr = r.regErr
		in.m.RegistryRetry()
		in.log.Warn().Str("topic", r.regAt.tp.Topic).Int32("partition", r.regAt.tp.Partition).Int64("offset", r.regOffset).
			Int("held", h.records()).Int("attempt", h.attempt).Dur("retry_in", h.next.Sub(in.now())).Err(r.regErr).
			Msg("schema registry still unavailable; records stay held")
	}
	h.note()
}

// round is what one attempt at the held records found: the registry's
// error that ended its part of the round (nil: none) and which record it
// was, and whether a record waits for a look-up still running.
type round struct {
	regErr    error
	regAt     *heldPart
	regOffset int64
	pending   bool
}

// round tries every held partition once, in the order they were held.
func (h *Held) round(writeCtx context.Context) round {
	var r round
	now := h.in.now()
	for _, hp := range h.parts {
		if h.in.own.Failed() || (r.regErr != nil && !isSchemaWait(hp.wait)) {
			continue
		}
		h.retryPart(writeCtx, now, hp, &r)
	}
	return r
}

// retryPart appends hp's held records again, in order, until one must
// still wait (noted in r).
func (h *Held) retryPart(writeCtx context.Context, now time.Time, hp *heldPart, r *round) {
	for len(hp.recs) > 0 && !h.in.own.Failed() {
		rec := hp.recs[0]
		err, held := h.in.routeRecord(writeCtx, now, hp.tp, rec)
		if !held {
			h.in.release(h.pop(hp))
			continue
		}
		hp.wait = err
		switch {
		case isLookupPending(err):
			r.pending = true
		case !isSchemaWait(err):
			r.regErr, r.regAt, r.regOffset = err, hp, rec.Offset
		}
		return
	}
}

// drop forgets the held records of partitions this member gives up (their
// next owner reads them again from the committed offset) or consumes again
// from an earlier offset, and the TRUNCATE events they held.
func (h *Held) drop(tps []offsets.TP) {
	in := h.in
	for _, hp := range h.heldState.drop(tps) {
		for _, r := range hp.recs {
			in.recycle(r)
		}
		in.log.Info().Str("topic", hp.tp.Topic).Int32("partition", hp.tp.Partition).Int("records", len(hp.recs)).
			Msg("held records dropped (partition given up, or consumed again from an earlier offset); they stay uncommitted")
	}
	h.note()
	in.truncs.Drop(tps)
}

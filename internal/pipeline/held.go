package pipeline

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/backoff"
	"sink/internal/cdc"
	"sink/internal/offsets"
	"sink/internal/status"
	"sink/internal/tables"
)

// Records held until they can be decoded as they should.
//
// Two waits hold a record. A registry-framed record whose schema id is not
// known yet (its look-up is running, off the owner goroutine: lookup.go)
// or whose look-up failed (the registry is down or failing:
// decode.ErrUnavailable) is not a bad record: it will decode once the
// registry answers. And a record that carries a field its table is about
// to get a column for (evolve.go: an ADD COLUMN is running, or the table
// is being re-read because a person may have added it) would lose that
// field's value if decoded now. Either way the record is held, together
// with every record after it in its partition (order within a partition
// is kept: nothing of the partition is appended past it), and appended
// again: as soon as a look-up ends or the table's new description is
// applied for a column (handleLookup and handleTable kick the retry), and
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
	// wait is why the first record is held: a *tables.Wait or
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
// holds nothing. Owned by the Run goroutine: the Pipeline's calls around it
// (holdFrom, retryHeld, dropHeld) decode, log and publish; these keep the
// partitions, their bytes and the schedule consistent.
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

// holdFrom holds recs (a partition's records from the one that cannot be
// decoded now). err is why: the registry's error, or a *tables.Wait; nil
// when recs join the partition's records already held.
func (p *Pipeline) holdFrom(tp offsets.TP, recs []*kgo.Record, err error) {
	if !p.held.has(tp) {
		if sw, ok := err.(*tables.Wait); ok {
			p.log.Info().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", recs[0].Offset).
				Str("table", sw.Table).Str("field", sw.Field).Bool("reread", sw.Reread).
				Msg("a record carries a field its table is getting a column for: holding the partition's records until the table has it; fetching paused")
		} else if err != nil && !isLookupPending(err) && p.held.lastErr == nil {
			p.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", recs[0].Offset).
				Err(err).Msg("schema registry unavailable for a schema id not cached: holding the partition's records and retrying; fetching paused")
		}
	}
	p.held.hold(tp, recs, err, p.now())
	p.noteHeld()
}

// kickHeld makes the held records' next attempt due now: a table's new
// description was applied, or a column's ALTER ended.
func (p *Pipeline) kickHeld() { p.held.kick(p.now()) }

// noteHeld publishes the count of held records: to the metrics (by what
// they wait for), and for readers outside the owner goroutine
// (heldRecordsNow).
func (p *Pipeline) noteHeld() {
	reg, sch := p.held.counts()
	p.heldNow.Store(int64(reg + sch))
	p.m.SetRegistryWaiting(reg)
	p.m.SetSchemaWaiting(sch)
}

// heldRecordsNow is the count of held records; safe from any goroutine.
func (p *Pipeline) heldRecordsNow() int { return int(p.heldNow.Load()) }

// heldNextRetry reports how long until the next attempt, when records are
// held.
func (p *Pipeline) heldNextRetry(now time.Time) (time.Duration, bool) {
	if !p.held.holding() || p.revoke != nil || p.state == status.Paused {
		// During a revoke retryHeld waits; its deadline wakes the loop.
		// A paused connector decodes nothing: resume wakes it.
		return 0, false
	}
	return max(p.held.next.Sub(now), 0), true
}

// retryHeld appends the held records again, partition by partition in the
// order they were held, once their attempt is due. The first record the
// registry failed to serve ends the registry's part of the round (it is
// still down: asking again for the next partition would only start more
// look-ups that fail); a partition whose record waits for a look-up still
// running (lookup.go), or for its table's schema, stays held while the
// others go on. What is left waits for the backoff, or for the next kick
// (kickHeld: a look-up ended, a table's description was applied). A round
// that ends only on look-ups still running does not lengthen the backoff:
// their ends kick the next round.
func (p *Pipeline) retryHeld(writeCtx context.Context) {
	h := &p.held
	if !h.due(p.now()) || p.revoke != nil || p.state == status.Paused {
		return
	}
	h.attempt++
	now := p.now()
	var regErr error // the registry is still down
	var regAt *heldPart
	var regOffset int64
	pending := false // a record waits for a look-up still running
	for _, hp := range h.parts {
		if p.fatal != nil || (regErr != nil && !isSchemaWait(hp.wait)) {
			continue
		}
		for len(hp.recs) > 0 && p.fatal == nil {
			r := hp.recs[0]
			if err, held := p.routeRecord(writeCtx, now, hp.tp, r); held {
				hp.wait = err
				switch {
				case isLookupPending(err):
					pending = true
				case !isSchemaWait(err):
					regErr, regAt, regOffset = err, hp, r.Offset
				}
				break
			}
			p.release(h.pop(hp))
		}
	}
	since, attempts := h.since, h.attempt
	h.prune()
	p.cat.Evolution().LaunchAlters(p.held.waitingFor)
	if !h.holding() {
		p.log.Info().Dur("held_for", p.now().Sub(since)).Int("attempts", attempts).
			Msg("held records decoded; fetching resumed")
		p.noteHeld()
		return
	}
	h.reschedule(p.now(), regErr == nil && pending)
	if regErr != nil {
		h.lastErr = regErr
		p.m.RegistryRetry()
		p.log.Warn().Str("topic", regAt.tp.Topic).Int32("partition", regAt.tp.Partition).Int64("offset", regOffset).
			Int("held", h.records()).Int("attempt", h.attempt).Dur("retry_in", h.next.Sub(p.now())).Err(regErr).
			Msg("schema registry still unavailable; records stay held")
	}
	p.noteHeld()
}

// dropHeld forgets the held records of partitions this member gives up
// (their next owner reads them again from the committed offset) or
// consumes again from an earlier offset.
func (p *Pipeline) dropHeld(tps []offsets.TP) {
	for _, hp := range p.held.drop(tps) {
		for _, r := range hp.recs {
			p.recycle(r)
		}
		p.log.Info().Str("topic", hp.tp.Topic).Int32("partition", hp.tp.Partition).Int("records", len(hp.recs)).
			Msg("held records dropped (partition given up, or consumed again from an earlier offset); they stay uncommitted")
	}
	p.noteHeld()
	p.truncs.Drop(tps)
}

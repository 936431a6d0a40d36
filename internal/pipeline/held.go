package pipeline

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/offsets"
	"sink/internal/status"
	"sink/internal/writer"
)

// Records held for the schema registry.
//
// A registry-framed record whose schema id is not cached while the
// registry cannot be asked (decode.ErrUnavailable) is not a bad record: it
// is fine, and will decode once the registry answers. So it is held,
// together with every record after it in its partition (order within a
// partition is kept: nothing of the partition is appended past it), and
// appended again after a backoff. Held records are not in the offsets
// tracker, so no commit passes them; while any are held no new fetch is
// requested (fetching stops rather than buffering without bound: what is
// held is at most one poll's records). A revoked or lost partition's held
// records are dropped: its next owner consumes them from the committed
// offset. At shutdown they are dropped the same way, uncommitted, so a
// restart reads them again: nothing is lost or duplicated.

// heldRetryFirst and heldRetryMax bound the backoff between two attempts
// at the oldest held record: doubling from the first, with jitter, up to
// the max. A registry restart takes seconds; an outage may take minutes,
// during which one lookup per heldRetryMax is cheap.
const (
	heldRetryFirst = 200 * time.Millisecond
	heldRetryMax   = 10 * time.Second
)

// heldPart is a partition's records waiting for the registry, in offset
// order.
type heldPart struct {
	tp   offsets.TP
	recs []*kgo.Record
}

// heldState is the records held and the retry schedule.
type heldState struct {
	parts   []*heldPart // in the order they were held
	bytes   int         // key and value bytes of the held records (part of the buffer budget)
	since   time.Time   // when the first record was held
	next    time.Time   // the next attempt
	wait    time.Duration
	attempt int
	lastErr error
}

// holdFrom holds recs (a partition's records from the one whose schema
// could not be fetched) until the registry answers. err is why.
func (p *Pipeline) holdFrom(tp offsets.TP, recs []*kgo.Record, err error) {
	h := &p.held
	var part *heldPart
	for _, hp := range h.parts {
		if hp.tp == tp {
			part = hp
			break
		}
	}
	if part == nil {
		part = &heldPart{tp: tp}
		h.parts = append(h.parts, part)
	}
	part.recs = append(part.recs, recs...)
	for _, r := range recs {
		h.bytes += len(r.Key) + len(r.Value)
	}
	h.lastErr = err
	if h.since.IsZero() {
		h.since = p.now()
		h.wait = heldRetryFirst
		h.attempt = 0
		p.log.Warn().Str("topic", tp.Topic).Int32("partition", tp.Partition).Int64("offset", recs[0].Offset).
			Err(err).Msg("schema registry unavailable for a schema id not cached: holding the partition's records and retrying; fetching paused")
		h.next = p.now().Add(writer.RetryWait(h.wait))
	}
	p.noteHeld()
}

// isHeld reports whether tp has records held.
func (p *Pipeline) isHeld(tp offsets.TP) bool {
	for _, hp := range p.held.parts {
		if hp.tp == tp {
			return true
		}
	}
	return false
}

// heldRecords counts the records held.
func (p *Pipeline) heldRecords() int {
	n := 0
	for _, hp := range p.held.parts {
		n += len(hp.recs)
	}
	return n
}

// noteHeld publishes the count of held records: to the metrics, and for
// readers outside the owner goroutine (heldRecordsNow).
func (p *Pipeline) noteHeld() {
	n := p.heldRecords()
	p.heldNow.Store(int64(n))
	p.m.SetRegistryWaiting(n)
}

// heldRecordsNow is the count of held records; safe from any goroutine.
func (p *Pipeline) heldRecordsNow() int { return int(p.heldNow.Load()) }

// heldNextRetry reports how long until the next attempt, when records are
// held.
func (p *Pipeline) heldNextRetry(now time.Time) (time.Duration, bool) {
	if len(p.held.parts) == 0 || p.revoke != nil || p.state == status.Paused {
		// During a revoke retryHeld waits; its deadline wakes the loop.
		// A paused connector decodes nothing: resume wakes it.
		return 0, false
	}
	return max(p.held.next.Sub(now), 0), true
}

// retryHeld appends the held records again, partition by partition in the
// order they were held, once their attempt is due. The first record that
// is still unavailable stops the round (the registry is still down: asking
// again for the next partition would only wait again) and backs off.
func (p *Pipeline) retryHeld(writeCtx context.Context) {
	h := &p.held
	if len(h.parts) == 0 || p.now().Before(h.next) || p.revoke != nil || p.state == status.Paused {
		return
	}
	h.attempt++
	now := p.now()
	for len(h.parts) > 0 && p.fatal == nil {
		hp := h.parts[0]
		for len(hp.recs) > 0 && p.fatal == nil {
			r := hp.recs[0]
			if err, held := p.routeRecord(writeCtx, now, hp.tp, r); held {
				h.lastErr = err
				h.wait = min(h.wait*2, heldRetryMax)
				h.next = p.now().Add(writer.RetryWait(h.wait))
				p.m.RegistryRetry()
				p.log.Warn().Str("topic", hp.tp.Topic).Int32("partition", hp.tp.Partition).Int64("offset", r.Offset).
					Int("held", p.heldRecords()).Int("attempt", h.attempt).Dur("retry_in", h.next.Sub(p.now())).Err(err).
					Msg("schema registry still unavailable; records stay held")
				p.noteHeld()
				return
			}
			hp.recs[0] = nil
			hp.recs = hp.recs[1:]
			h.bytes -= len(r.Key) + len(r.Value)
		}
		h.parts[0] = nil
		h.parts = h.parts[1:]
	}
	if len(h.parts) == 0 {
		p.log.Info().Dur("held_for", p.now().Sub(h.since)).Int("attempts", h.attempt).
			Msg("schema registry answers again: held records decoded; fetching resumed")
		p.held = heldState{}
	}
	p.noteHeld()
}

// dropHeld forgets the held records of partitions this member gives up
// (their next owner reads them again from the committed offset) or
// consumes again from an earlier offset.
func (p *Pipeline) dropHeld(tps []offsets.TP) {
	h := &p.held
	kept := h.parts[:0]
	for _, hp := range h.parts {
		drop := false
		for _, tp := range tps {
			if hp.tp == tp {
				drop = true
				break
			}
		}
		if !drop {
			kept = append(kept, hp)
			continue
		}
		for _, r := range hp.recs {
			h.bytes -= len(r.Key) + len(r.Value)
		}
		p.log.Info().Str("topic", hp.tp.Topic).Int32("partition", hp.tp.Partition).Int("records", len(hp.recs)).
			Msg("records that waited for the schema registry dropped (partition given up, or consumed again from an earlier offset); they stay uncommitted")
	}
	clear(h.parts[len(kept):])
	h.parts = kept
	if len(h.parts) == 0 {
		p.held = heldState{}
	}
	p.noteHeld()
}

package pipeline

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/offsets"
	"sink/internal/status"
)

// Fetching and decoding overlap. franz-go keeps at most one fetch per
// broker buffered and sends that broker's next fetch request only once
// the buffered one has been polled to its last record. Polling a few
// thousand records at a time therefore left the broker idle while the
// owner decoded all but the last of them, and the owner idle while the
// next fetch travelled and was parsed: with fetches of 12.8 MB (about
// 140,000 records of 180 bytes) the owner waited 40–160 ms for every
// fetch, 0.36–0.44 s of the ≈1.9 s it took for 1,000,000 records on a
// 2-core machine.
//
// So each poll takes everything buffered (franz-go then fetches the next
// response at once, on its own goroutine), and the owner keeps the
// records it has not decoded yet in pending, decoding at most maxDecode
// of them per turn of its loop so acks, group events and timers are
// handled in between, and only while the buffer budget has room. The
// next poll is requested when pending is empty: one fetch is decoded
// while the next is read, at most two fetches are held, which is what
// consumer.FetchLimitsFor sizes the fetches for.
//
// The owner lets a rebalance go on as soon as a poll is taken: records
// still pending for a revoked or lost partition are dropped (dropPending)
// before anything of theirs is tracked, so no offset is committed past
// them and the partition's next owner reads them again.

// maxDecode bounds the records decoded in one turn of the owner's loop.
const maxDecode = 10_000

// pendingPart is the part of one partition's polled records not decoded
// yet, in offset order.
type pendingPart struct {
	tp   offsets.TP
	hwm  int64 // the partition's high watermark when fetched
	recs []*kgo.Record
}

// takeFetches logs f's errors and queues its records for decoding.
func (p *Pipeline) takeFetches(f kgo.Fetches) {
	f.EachError(func(t string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		p.log.Warn().Str("topic", t).Int32("partition", part).Err(err).Msg("fetch error")
	})
	f.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) > 0 {
			p.pending = append(p.pending, pendingPart{
				tp:   offsets.TP{Topic: fp.Topic, Partition: fp.Partition},
				hwm:  fp.HighWatermark,
				recs: fp.Records,
			})
		}
	})
}

// pendingRecords counts the polled records not decoded yet.
func (p *Pipeline) pendingRecords() int {
	n := 0
	for _, pp := range p.pending {
		n += len(pp.recs)
	}
	return n
}

// closedChan is always ready: decodable's "go on".
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// decodable is ready (a closed channel) when pending records may be
// decoded now, and nil (never ready in a select) when there are none, the
// buffer budget is used up, a revoke is being handled, the loop is
// stopping or the connector is paused.
func (p *Pipeline) decodable() <-chan struct{} {
	if len(p.pending) == 0 || p.fatal != nil || p.revoke != nil || p.state == status.Paused || p.memUsed() >= int(p.cfg.Batch.BufferMemory) {
		return nil
	}
	return closedChan
}

// decodeSome decodes up to maxDecode pending records, in order.
func (p *Pipeline) decodeSome(writeCtx context.Context) {
	now := p.now()
	for n := maxDecode; n > 0 && len(p.pending) > 0 && p.fatal == nil; {
		pp := p.pending[0]
		take := min(n, len(pp.recs))
		n -= take
		if take == len(pp.recs) {
			p.pending[0] = pendingPart{}
			p.pending = p.pending[1:]
		} else {
			p.pending[0].recs = pp.recs[take:]
		}
		chunk := pp.recs[:take:take]
		p.handlePartition(writeCtx, now, pp.tp, pp.hwm, chunk)
		// Whatever still needs a record (a dead-letter produce, the
		// registry's hold) has its own reference, and the others were
		// recycled (release): the fetch's pointers to them go.
		clear(chunk)
	}
	p.cat.Evolution().LaunchAlters(p.held.waitingFor)
	if len(p.pending) == 0 {
		p.pending = nil // lets the emptied backing array go
	}
}

// dropPending forgets the pending records of partitions this member gives
// up, or consumes again from an earlier offset; none of them is tracked
// yet, so nothing is committed past them.
func (p *Pipeline) dropPending(tps []offsets.TP) {
	kept := p.pending[:0]
	for _, pp := range p.pending {
		if slices.Contains(tps, pp.tp) {
			p.log.Debug().Str("topic", pp.tp.Topic).Int32("partition", pp.tp.Partition).Int("records", len(pp.recs)).
				Msg("fetched records not decoded yet dropped (partition given up, or consumed again from an earlier offset); they stay uncommitted")
			for _, r := range pp.recs {
				p.recycle(r)
			}
			continue
		}
		kept = append(kept, pp)
	}
	clear(p.pending[len(kept):])
	p.pending = kept
}

// requestPoll asks for more records unless the buffer budget is used up,
// a revoke is being handled, records wait for the schema registry
// (held.go) or polled records are not decoded yet. Not polling is the
// backpressure: franz-go keeps at most one unpolled fetch per broker, so
// fetching stops too.
func (p *Pipeline) requestPoll() {
	if p.polling || p.revoke != nil || p.held.holding() {
		return
	}
	used, budget := p.memUsed(), int(p.cfg.Batch.BufferMemory)
	if used >= budget {
		if !p.paused {
			p.paused = true
			p.log.Info().Int("buffered_bytes", used).Int("buffer_memory", budget).
				Msg("buffer full: fetching paused until inserts free space")
		}
		p.m.SetBuffer(used, budget, true)
		return
	}
	p.m.SetBuffer(used, budget, false)
	if p.paused {
		p.paused = false
		p.log.Info().Int("buffered_bytes", used).Msg("fetching resumed")
	}
	if len(p.pending) > 0 {
		return
	}
	if _, ok := p.cons.(pauseSource); p.pausing() && !ok {
		return // a Source that cannot pause its fetching: stop polling instead
	}
	p.polling = true
	p.want <- struct{}{}
}

// handlePartition decodes recs, records of tp polled in order, whose
// partition's high watermark was hwm.
func (p *Pipeline) handlePartition(writeCtx context.Context, now time.Time, tp offsets.TP, hwm int64, recs []*kgo.Record) {
	last := recs[len(recs)-1]
	lag := hwm - last.Offset - 1
	p.lag[tp] = lag
	p.fetchedSeen(tp, hwm, lag, last.Timestamp)
	p.partMetrics(tp).SetLag(lag, last.Timestamp)
	// Counted per partition chunk, not per record: one add each.
	records, bytes := p.stats.Records, p.stats.Bytes
	defer func() {
		p.topicMetrics(tp.Topic).Consumed(int(p.stats.Records-records), int(p.stats.Bytes-bytes))
	}()
	if p.held.has(tp) {
		// Records of a partition already held (a fetch that was on
		// its way) wait behind them, in order.
		for _, r := range recs {
			p.consumed(r)
		}
		p.holdFrom(tp, recs, nil)
		return
	}
	for i, r := range recs {
		if err, held := p.handleRecord(writeCtx, now, tp, r); held {
			// This record and the rest of the partition's wait for
			// the schema registry or the table's new column (held.go).
			for _, rest := range recs[i+1:] {
				p.consumed(rest)
			}
			p.holdFrom(tp, recs[i:], err)
			return
		}
		p.release(r)
		if p.fatal != nil {
			return
		}
	}
}

// Records go back to franz-go's pool (consumer.Pool) one by one, once the
// pipeline no longer needs them: a record's Key, Value and header values
// are views into its batch's decompressed bytes, which the pool hands to
// the next fetch once every record of the batch is recycled. Each record
// is recycled exactly once, by whoever holds it last (docs/architecture.md,
// "Who holds a fetched record, and until when"):
//
//   - the decode loops (handlePartition, retryHeld) right after its decode
//     (release): its row is in the block by then, copied, and what else
//     knows of it are values (offset, epoch, timestamp, lengths);
//   - the dead-letter path once its produce is settled (dropDLQ), when
//     divert took it: franz-go's producer reads the copy's key and value,
//     which are the record's, until then;
//   - dropPending and dropHeld, for records of partitions given up or
//     sought back, which nothing has seen yet.
//
// A record left at shutdown, or whose dead-letter produce failed for good,
// is not recycled: its batch's memory is then garbage collected as it is
// without a pool. Records exactly-once replays are read by a client of
// their own (no pool) and are not recycled either.

// release recycles r after the decode loop handled it, unless the
// dead-letter produce took it (divert), which recycles it when settled.
func (p *Pipeline) release(r *kgo.Record) {
	if p.taken == r {
		p.taken = nil
		return
	}
	p.recycle(r)
}

// memUsed is the bytes held by open and unacknowledged batches, by bad
// records waiting for the dead-letter topic and by records waiting for the
// schema registry: what batch.buffer_memory bounds.
func (p *Pipeline) memUsed() int {
	return p.dlq.weight + p.held.bytes + p.disp.Bytes()
}

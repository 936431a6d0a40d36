// Package intake is the records on their way in: the fetches the poller
// hands the owner, decoded a turn at a time while the next fetch is read
// (pending), each record routed to its route's table (or, with when:
// conditions, to every table its routes pick: fanout.go) and decoded into
// that table's open batch; a record that cannot be decoded now held, with
// the rest of its partition, until the schema registry or its table's new
// column is there (held.go, lookup.go); a bad record diverted to the
// dead-letter topic and/or its dead-letter table (deadletter.go), or the
// connector stopped; a TRUNCATE event held until the table's earlier rows
// are in (internal/cdc). Every record handled is added to the offsets
// tracker under the unit of the batch (or the dead-letter produce) that
// holds it, so nothing is committed past a record before it is in.
//
// Intake reaches the rest through the interfaces it declares: Batches
// (the open batches: dispatch), Tracker, Delivery (what the guarantee
// decides of a record: already in, its row's partition), Producer (the
// Source's dead-letter produce) and Owner (the connector: stop, unit ids,
// goroutines and events, a dead-letter produce settled, a fetch seen).
// The routes and tables are internal/tables' Catalog.
//
// Concurrency: an Intake belongs to the pipeline's owner goroutine, which
// calls every method but HeldNow. The schema look-ups, the TRUNCATE
// TABLEs and the dead-letter produces' callbacks run elsewhere and hand
// their outcome back as events (Owner.Post), which the owner applies.
package intake

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/cdc"
	"sink/internal/decode"
	"sink/internal/metrics"
	"sink/internal/offsets"
	"sink/internal/pipeline/dispatch"
	"sink/internal/tables"
)

// Batches is where decoded rows go: the open batches (the pipeline's
// dispatch).
type Batches interface {
	// Open is the open batch a record of t from tp goes to.
	Open(t *tables.Table, tp offsets.TP) *dispatch.Open
	// Added accounts a record whose row was appended to a's block and
	// which the tracker knows: only then may its batch seal.
	Added(ctx context.Context, now time.Time, a *dispatch.Open, tp offsets.TP, r *kgo.Record)
	// PumpAll starts the INSERTs that may go now (a dead-letter produce
	// they waited for is settled).
	PumpAll(ctx context.Context)
	// SealTable and Pending are what a TRUNCATE waits for (cdc.Batches).
	cdc.Batches
}

// Tracker is where each record handled is noted, under the unit (a
// batch, a dead-letter produce) that holds it (offsets.Tracker).
type Tracker interface {
	Add(tp offsets.TP, offset int64, epoch int32, unit uint64)
	AddShared(tp offsets.TP, offset int64, epoch int32, units []uint64)
	Ack(unit uint64, tps []offsets.TP)
}

// Delivery is what the delivery guarantee decides of a record (the
// pipeline's delivery: exactly-once knows which offsets are in already).
type Delivery interface {
	Skip(tp offsets.TP, offset int64) bool
	CoveredRow(tp offsets.TP, offset int64) bool
	DeadLettered(tp offsets.TP, offset int64, rs *tables.Route) bool
	OnRow(id uint64, tp offsets.TP)
}

// Producer is the Source's dead-letter produce: a copy of rec, with why
// it could not be written, to the dead-letter topic (without its value
// when refOnly); done is called once with nil when Kafka has it, or with
// the error (kafkaerr.Classify sorts it), from any goroutine.
type Producer interface {
	ProduceDLQ(ctx context.Context, topic string, rec *kgo.Record, cause error, refOnly bool, done func(error))
}

// Event is an outcome handed back to the owner goroutine, which applies
// it there.
type Event interface{ Apply(ctx context.Context) }

// Owner is what intake asks of the connector it is part of.
type Owner interface {
	// Fail stops the connector with err, unless something already does;
	// Failed reports whether something does.
	Fail(err error)
	Failed() bool
	// NewID is a unit id for a dead-letter produce (dispatch's batches
	// draw from the same ids).
	NewID() uint64
	// Spawn runs f on a goroutine the connector joins before the Sink
	// closes; Post hands e to the owner goroutine (dropped once the
	// connector has made its last commit).
	Spawn(f func())
	Post(e Event)
	// Settled is told that unit id (a dead-letter produce) is settled: a
	// revoke waiting for it may go on.
	Settled(id uint64)
	// Fetched is told what the last fetch of tp said: its high
	// watermark, the lag after it and its last record's timestamp.
	Fetched(tp offsets.TP, hwm, lag int64, last time.Time)
}

// Registry is what the registry-framed formats ask for schemas
// (decode.Registry: the schema registry's client).
type Registry = decode.Registry

// Deps are what an Intake works with. Catalog may be given after New
// (the catalog compiles its plans with the intake's Registry).
type Deps struct {
	Catalog  *tables.Catalog
	Batches  Batches
	Tracker  Tracker
	Delivery Delivery
	Owner    Owner
	// Source gives the dead-letter produce (the consumer is attached after
	// New); Target is the Sink, for the TRUNCATEs it can run.
	Source func() Producer
	Target any
	// Registry is the schema registry (nil: none configured); Recycle
	// hands a record's memory back to franz-go's pool
	// ((*kgo.Record).Recycle; tests poison the record instead).
	Registry Registry
	Recycle  func(*kgo.Record)
	Metrics  *metrics.Metrics
	Log      zerolog.Logger
	Now      func() time.Time
}

// Intake is the records on their way in.
type Intake struct {
	cfg     *config.Config
	cat     *tables.Catalog
	batches Batches
	tracker Tracker
	dlv     Delivery
	own     Owner
	recycle func(*kgo.Record)
	log     zerolog.Logger
	now     func() time.Time
	m       *metrics.Metrics
	pending []pendingPart // polled records not decoded yet
	held    Held          // records held for the registry or a new column (held.go)
	look    *lookups      // the schema look-ups; nil without a registry (lookup.go)
	fan     fanState      // fan-out routing's per-record scratch (fanout.go)
	dlq     DeadLetters   // bad records on their way to the dead-letter topic (deadletter.go)
	src     func() Producer
	truncs  *cdc.Truncations
	// taken is the record the dead-letter produce just took, which the
	// decode loop must not recycle (release).
	taken *kgo.Record
	stats Stats
	// lag is each partition's lag after its last fetch; topicM and partM
	// the metric handles, resolved once per topic and partition so the
	// hot path never builds label strings (nil-safe without metrics).
	lag    map[offsets.TP]int64
	topicM map[string]*metrics.Topic
	partM  map[offsets.TP]*metrics.Partition
}

// Stats are the records consumed so far: their count and bytes, the bad
// ones dead-lettered, those that needed no row.
type Stats struct {
	Records, Bytes, DLQ, Skipped int64
}

// New is the intake of cfg's records over d.
func New(cfg *config.Config, d Deps) *Intake {
	in := &Intake{cfg: cfg, cat: d.Catalog, batches: d.Batches, tracker: d.Tracker, dlv: d.Delivery, own: d.Owner,
		recycle: d.Recycle, log: d.Log, now: d.Now, m: d.Metrics, src: d.Source,
		lag: map[offsets.TP]int64{}, topicM: map[string]*metrics.Topic{}, partM: map[offsets.TP]*metrics.Partition{}}
	in.dlq.in, in.held.in = in, in
	if d.Registry != nil {
		in.look = newLookups(d.Registry, d.Now)
	}
	in.truncs = cdc.NewTruncations(d.Target, d.Batches, truncOwner{in}, cfg.ClickHouse.Cluster, cfg.ClickHouse.QueryTimeout, d.Log, d.Now)
	return in
}

// SetCatalog gives the intake the routes and tables, once the catalog is
// open (it compiles its plans with the intake's Registry).
func (in *Intake) SetCatalog(c *tables.Catalog) { in.cat = c }

// SetDelivery gives the intake the delivery's hooks (exactly-once is
// built over the open catalog and the other parts).
func (in *Intake) SetDelivery(d Delivery) { in.dlv = d }

// Stats is the records consumed so far.
func (in *Intake) Stats() Stats { return in.stats }

// HasPending reports whether polled records wait to be decoded.
func (in *Intake) HasPending() bool { return len(in.pending) > 0 }

// Bytes is what intake holds of batch.buffer_memory: the key and value
// bytes of the held records and of the bad records on their way to the
// dead-letter topic.
func (in *Intake) Bytes() int { return in.held.bytes + in.dlq.weight }

// Drop forgets what intake holds of partitions this member gives up, or
// consumes again from an earlier offset: the records pending or held (and
// a TRUNCATE they held), none of them tracked yet, so nothing is
// committed past them.
func (in *Intake) Drop(tps []offsets.TP) {
	in.held.drop(tps)
	in.dropPending(tps)
}

// Forget forgets the partitions this member no longer owns: their lag and
// metric handles.
func (in *Intake) Forget(tps []offsets.TP) {
	for _, tp := range tps {
		delete(in.lag, tp)
		if _, ok := in.partM[tp]; ok {
			delete(in.partM, tp)
			in.m.ForgetPartition(tp.Topic, tp.Partition)
		}
	}
}

// Lag is the sum of the partitions' lag after their last fetch.
func (in *Intake) Lag() int64 {
	var lag int64
	for _, l := range in.lag {
		lag += l
	}
	return lag
}

// Landed is told that a batch of t is in: a TRUNCATE waiting for the
// table's earlier rows may go on.
func (in *Intake) Landed(ctx context.Context, t *tables.Table) {
	in.own.Fail(in.truncs.Step(ctx, t))
}

// truncOwner is what the TRUNCATE events ask of the connector.
type truncOwner struct{ in *Intake }

func (o truncOwner) Spawn(f func())            { o.in.own.Spawn(f) }
func (o truncOwner) Stopping() bool            { return o.in.own.Failed() }
func (o truncOwner) Truncated(r cdc.Truncated) { o.in.own.Post(truncated{in: o.in, r: r}) }

// truncated is the end of a TRUNCATE TABLE.
type truncated struct {
	in *Intake
	r  cdc.Truncated
}

// Apply lets the held event go on, or stops the connector.
func (e truncated) Apply(context.Context) {
	kick, err := e.in.truncs.Done(e.r)
	e.in.own.Fail(err)
	if kick {
		e.in.held.Kick()
	}
}

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
// records it has not decoded yet in pending, decoding at most MaxDecode
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

// MaxDecode bounds the records decoded in one turn of the owner's loop.
const MaxDecode = 10_000

// pendingPart is the part of one partition's polled records not decoded
// yet, in offset order.
type pendingPart struct {
	tp   offsets.TP
	hwm  int64 // the partition's high watermark when fetched
	recs []*kgo.Record
}

// Take logs f's errors and queues its records for decoding.
func (in *Intake) Take(f kgo.Fetches) {
	f.EachError(func(t string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		in.log.Warn().Str("topic", t).Int32("partition", part).Err(err).Msg("fetch error")
	})
	f.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) > 0 {
			in.pending = append(in.pending, pendingPart{
				tp:   offsets.TP{Topic: fp.Topic, Partition: fp.Partition},
				hwm:  fp.HighWatermark,
				recs: fp.Records,
			})
		}
	})
}

// Pending counts the polled records not decoded yet.
func (in *Intake) Pending() int {
	n := 0
	for _, pp := range in.pending {
		n += len(pp.recs)
	}
	return n
}

// DecodeSome decodes up to MaxDecode pending records, in order.
func (in *Intake) DecodeSome(writeCtx context.Context) {
	now := in.now()
	for n := MaxDecode; n > 0 && len(in.pending) > 0 && !in.own.Failed(); {
		pp := in.pending[0]
		take := min(n, len(pp.recs))
		n -= take
		if take == len(pp.recs) {
			in.pending[0] = pendingPart{}
			in.pending = in.pending[1:]
		} else {
			in.pending[0].recs = pp.recs[take:]
		}
		chunk := pp.recs[:take:take]
		in.handlePartition(writeCtx, now, pp.tp, pp.hwm, chunk)
		// Whatever still needs a record (a dead-letter produce, the
		// registry's hold) has its own reference, and the others were
		// recycled (release): the fetch's pointers to them go.
		clear(chunk)
	}
	in.cat.Evolution().LaunchAlters(in.held.waitingFor)
	if len(in.pending) == 0 {
		in.pending = nil // lets the emptied backing array go
	}
}

// dropPending forgets the pending records of partitions this member gives
// up, or consumes again from an earlier offset; none of them is tracked
// yet, so nothing is committed past them.
func (in *Intake) dropPending(tps []offsets.TP) {
	kept := in.pending[:0]
	for _, pp := range in.pending {
		if slices.Contains(tps, pp.tp) {
			in.log.Debug().Str("topic", pp.tp.Topic).Int32("partition", pp.tp.Partition).Int("records", len(pp.recs)).
				Msg("fetched records not decoded yet dropped (partition given up, or consumed again from an earlier offset); they stay uncommitted")
			for _, r := range pp.recs {
				in.recycle(r)
			}
			continue
		}
		kept = append(kept, pp)
	}
	clear(in.pending[len(kept):])
	in.pending = kept
}

// handlePartition decodes recs, records of tp polled in order, whose
// partition's high watermark was hwm.
func (in *Intake) handlePartition(writeCtx context.Context, now time.Time, tp offsets.TP, hwm int64, recs []*kgo.Record) {
	last := recs[len(recs)-1]
	lag := hwm - last.Offset - 1
	in.lag[tp] = lag
	in.own.Fetched(tp, hwm, lag, last.Timestamp)
	in.partMetrics(tp).SetLag(lag, last.Timestamp)
	// Counted per partition chunk, not per record: one add each.
	records, bytes := in.stats.Records, in.stats.Bytes
	defer func() {
		in.topicMetrics(tp.Topic).Consumed(int(in.stats.Records-records), int(in.stats.Bytes-bytes))
	}()
	if in.held.has(tp) {
		// Records of a partition already held (a fetch that was on
		// its way) wait behind them, in order.
		for _, r := range recs {
			in.consumed(r)
		}
		in.held.hold(tp, recs, nil)
		return
	}
	for i, r := range recs {
		if err, held := in.Record(writeCtx, now, tp, r); held {
			// This record and the rest of the partition's wait for
			// the schema registry or the table's new column (held.go).
			for _, rest := range recs[i+1:] {
				in.consumed(rest)
			}
			in.held.hold(tp, recs[i:], err)
			return
		}
		in.release(r)
		if in.own.Failed() {
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
//   - the decode loops (handlePartition, Held.Retry) right after its decode
//     (release): its row is in the block by then, copied, and what else
//     knows of it are values (offset, epoch, timestamp, lengths);
//   - the dead-letter path once its produce is settled
//     (DeadLetters.drop), when divert took it: franz-go's producer reads
//     the copy's key and value, which are the record's, until then;
//   - dropPending and Held.drop, for records of partitions given up or
//     sought back, which nothing has seen yet.
//
// A record left at shutdown, or whose dead-letter produce failed for good,
// is not recycled: its batch's memory is then garbage collected as it is
// without a pool. Records exactly-once replays are read by a client of
// their own (no pool) and are not recycled either.

// release recycles r after the decode loop handled it, unless the
// dead-letter produce took it (divert), which recycles it when settled.
func (in *Intake) release(r *kgo.Record) {
	if in.taken == r {
		in.taken = nil
		return
	}
	in.recycle(r)
}

// Package pipeline is the connector: it takes records from a Source (the
// Kafka consumer group), decodes them per route, accumulates them per table
// into large batches, inserts sealed batches through a Sink (ClickHouse),
// and commits each partition's offsets only up to the records that are in
// ClickHouse or in the dead-letter topic.
//
// Concurrency: one goroutine (Run's, "the owner") owns every piece of
// mutable state: routes and tables, accumulators, the offsets tracker, the
// batches in flight, dead-letter produces, the exactly-once ledgers and the
// counters. Everything else talks to it over channels: the poller hands it
// fetches only when it asked for them (so memory stays within
// batch.buffer_memory: when the budget is used up it stops asking, and
// fetching pauses), insert and describe goroutines report results, and the
// group callbacks (Hooks, on franz-go's goroutine) hand it assignments,
// revokes and losses and wait for the answer. Pause and Resume (POST
// /pause, /resume) are requests over a channel too, answered by the owner;
// Status hands any goroutine the last snapshot the owner published (an
// immutable copy, never the owner's maps). Every goroutine that uses the
// Sink (inserts, table and parts reads, ADD COLUMNs) is started with spawn,
// sends its result through a send that gives up once Run has made its last
// commit, and is joined (canceled, then waited for, boundedly) before Run
// returns: the caller may close the ClickHouse pool as soon as Run returned.
// New, Tables, ResolveTopics and CheckExactlyOnce are called before Run;
// Stats after it returned.
//
// What the owner waits for. Its channel operations return at once
// (replies go to buffered channels, the poller's request has a slot of
// one), and so do the Source's AllowRebalance, Seek, PauseFetch and
// ResumeFetch (franz-go's locks, no request). These calls wait on the
// network, each with its bound; while one runs, acks, group callbacks and
// the revoke deadline wait, so each is kept short or rare:
//
//   - An offset commit when a revoke's batches are in, at the revoke
//     deadline, when a pause is complete, at shutdown and when partitions
//     are given up (the commit still out is waited for first), and, with
//     exactly_once, the intent commit before each batch's INSERT
//     (internal/pipeline/exactly): each at most kafka.request_timeout
//     (commitOffsets),
//     after the commit still out; a commit that fails or times out is
//     retried by the next one, an intent after its backoff. The commits
//     after each INSERT and every kafka.commit_interval do not wait: they
//     go through the committer's goroutine (committer.go), one at a time,
//     and their results come back as events.
//   - Describing a table first needed by a new topic (routing.go,
//     resolveTopic: a table named after its topic): at most
//     clickhouse.query_timeout, once per topic.
//   - A dead-letter produce (dlq.go): franz-go's Produce returns at once
//     unless 50,000 records wait in its buffer; then it waits until one of
//     them is acknowledged or fails (each fails after 10 retries).
//   - Exactly-once recovery of newly assigned partitions (exactly's
//     recoverParts, while franz-go's assigned callback waits for it): the
//     group's ledgers (franz-go's request retries, 30 s), the topics' IDs
//     and log ends (retried for at most a minute), each pending batch read
//     back (at most 3 × kafka.request_timeout) and inserted again with its
//     token, and the table's present offsets (one query per partition).
//     The replay's INSERT is retried like any INSERT; the replays and the
//     presence queries together have kafka.rebalance_timeout, after which
//     the recovery fails and the connector stops (a restart recovers
//     again). Its schema look-ups wait for the registry (at most 5 s each),
//     since a replayed batch must decode every record it had.
//
// Schema-registry look-ups are not on that list: while Run loops, the id
// a record names that is not known yet is looked up on a goroutine of its
// own and the record is held until the answer comes back as an event
// (lookup.go), so a revoke never waits behind a slow registry. At
// shutdown Run waits for the inserts up to shutdown_timeout, then for the
// canceled Sink calls and look-ups up to cancelGrace each, and for the
// poller, whose Poll returns once canceled.
//
// The files follow the jobs: ports.go (Source, Sink, ExactlyOnce and
// every optional capability asked of them), fetched.go (polled records,
// decoded while the next fetch is read), dispatch.go (accumulators, each
// table's queue and in-flight slots, inserts and their acks), commit.go
// and committer.go (commits, off the owner), rebalance.go (assign, revoke
// with its deadline, loss), dlq.go (bad records), held.go (records held
// for the schema registry or a new column, in partition order), lookup.go
// (schema-registry look-ups off the owner goroutine), budget.go (the
// budget of INSERTs per server: which batch goes when), truncate.go
// (TRUNCATE events), delivery.go (what the delivery guarantee adds to the
// shared path, as hooks; at-least-once adds nothing; exactly-once is the
// other implementation, internal/pipeline/exactly), fanout.go (routes
// chosen per record by their when:, records in several tables), stats.go
// (summary line, metric handles), admin.go (the state, pause and resume,
// the status snapshot) and run.go (the loop, the poller, shutdown). The
// routes and their tables (created, changed, evolved, dead-letter tables)
// are internal/tables' Catalog; the fill of values a change event did not
// carry is internal/cdc's.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/metrics"
	"sink/internal/offsets"
	"sink/internal/pipeline/delivery"
	"sink/internal/pipeline/dispatch"
	"sink/internal/pipeline/intake"
	"sink/internal/status"
	"sink/internal/tables"
)

// Pipeline is one connector.
type Pipeline struct {
	cfg  *config.Config
	log  zerolog.Logger
	w    Sink
	cons Source

	cat     *tables.Catalog    // the routes and their tables (internal/tables)
	in      *intake.Intake     // the records on their way in (internal/pipeline/intake)
	disp    *dispatch.Dispatch // the open and the unacknowledged batches (internal/pipeline/dispatch)
	tracker *offsets.Tracker
	nextID  uint64

	inbox   chan event // outcomes of the goroutines the pipeline started (events.go)
	events  chan groupEvent
	fetches chan kgo.Fetches
	want    chan struct{}
	stopped chan struct{} // closed (stop) once Run's last commit is made
	stopOne sync.Once

	// calls are the goroutines that use the Sink (inserts, table re-reads,
	// parts reads, ADD COLUMNs), started with spawn; Run joins them, for
	// at most cancelGrace after canceling them, before it returns, so that
	// the caller may close the ClickHouse pool. callsLive counts them for
	// the error that names the ones still running.
	calls       sync.WaitGroup
	callsLive   atomic.Int64
	cancelGrace time.Duration

	committer *committer // the tracker and the commits (committer.go)

	polling bool // a poll was requested and not yet delivered
	// recycle hands a record's memory back to franz-go's pool
	// ((*kgo.Record).Recycle; tests poison the record instead).
	recycle func(*kgo.Record)
	paused  bool
	revoke  *revokeWait
	fatal   error
	now     func() time.Time
	// jitter draws the random part of exactly-once's retry waits
	// (backoff.Policy.Rand); nil is math/rand. Tests fix it.
	jitter func(n int64) int64

	m *metrics.Metrics // nil-safe: nil reports nothing

	// The operator's view and controls (admin.go): the state, pause and
	// resume requests, what the fetches and commits said per assigned
	// partition, and the last published snapshot (read by HTTP goroutines).
	state      status.State
	stateSince time.Time
	failure    error // why Run ended, once it did
	controls   chan controlReq
	started    chan struct{} // closed when Run starts
	seen       map[offsets.TP]*partSeen
	snap       atomic.Pointer[status.Snapshot]
	snapEvery  time.Duration // snapshotInterval
	posEvery   time.Duration // positionsInterval
	probingPos bool          // a positions probe is running

	// dlv is what the delivery guarantee adds to the shared path
	// (delivery.go); eo is its state under exactly_once (nil otherwise).
	dlv guarantee
	eo  *delivery.Exactly
	// eoIO is exactly-once's reading of ledgers, records and tables
	// (WithExactlyOnce); Run refuses that mode without it.
	eoIO delivery.IO

	// reg is the schema registry of the registry-framed formats (nil when
	// none is configured).
	reg intake.Registry
	// noCreate: New does not create missing tables (WithoutCreate);
	// sampler reads the records that type a missing table's columns
	// (WithSampler).
	noCreate bool
	sampler  tables.Sampler
	// allow gives each server's budget of INSERTs (WithAllowance; nil:
	// clickhouse.max_inserts_per_minute).
	allow dispatch.Allowance
}

// Stats are the totals of a run, reported at the end.
type Stats struct {
	Records, Bytes, Rows, Inserts, DLQ, Skipped int64
}

// Option configures a Pipeline beyond its config.
type Option func(*Pipeline)

// WithMetrics makes the pipeline report to m (see internal/metrics).
// Without it the pipeline reports nothing.
func WithMetrics(m *metrics.Metrics) Option { return func(p *Pipeline) { p.m = m } }

// WithRegistry gives the registry-framed formats (avro, protobuf,
// json-schema, debezium-avro) r as their schema registry: main makes a
// registry.Client from schema_registry. New refuses a config with
// schema_registry and no WithRegistry.
func WithRegistry(r intake.Registry) Option { return func(p *Pipeline) { p.reg = r } }

// New resolves every route's table and compiles its decode plan. It fails
// with one line naming the problem: a missing table, a column the mapping
// cannot fill, an unknown source.
func New(ctx context.Context, cfg *config.Config, log zerolog.Logger, w Sink, opts ...Option) (*Pipeline, error) {
	p := &Pipeline{
		cfg:       cfg,
		log:       log,
		w:         w,
		tracker:   offsets.New(),
		inbox:     make(chan event, 64),
		events:    make(chan groupEvent),
		fetches:   make(chan kgo.Fetches),
		want:      make(chan struct{}, 1),
		stopped:   make(chan struct{}),
		controls:  make(chan controlReq),
		started:   make(chan struct{}),
		seen:      map[offsets.TP]*partSeen{},
		state:     status.Starting,
		snapEvery: snapshotInterval,
		posEvery:  positionsInterval,
		now:       time.Now,
		recycle:   (*kgo.Record).Recycle,
	}
	p.cancelGrace = cancelGrace
	for _, o := range opts {
		o(p)
	}
	p.stateSince = p.now()
	p.committer = &committer{tracker: p.tracker, src: func() Source { return p.cons }, dlv: func() guarantee { return p.dlv },
		timeout: cfg.Kafka.RequestTimeout, log: log, m: p.m, now: func() time.Time { return p.now() },
		idle: func() bool { return p.unacked() == 0 && p.disp.OpenBatches() == 0 }, seen: p.committedSeen}
	if p.reg == nil && cfg.SchemaRegistry.Enabled() {
		return nil, errors.New("schema_registry is configured but the pipeline was given no registry client (pipeline.WithRegistry)")
	}
	now := func() time.Time { return p.now() }
	p.m.SetMaxWait(cfg.Batch.MaxWait)
	p.disp = dispatch.New(cfg, dispatch.Deps{Sink: w, Owner: dispatchOwner{p}, Tracker: p.tracker,
		Allowance: p.allow, Metrics: p.m, Log: log, Now: now})
	p.in = intake.New(cfg, intake.Deps{Batches: p.disp, Tracker: p.tracker, Owner: intakeOwner{p},
		Source: func() intake.Producer { return p.cons }, Target: w, Registry: p.reg,
		Recycle: func(r *kgo.Record) { p.recycle(r) }, Metrics: p.m, Log: log, Now: now})
	cat, err := tables.Open(ctx, cfg, tables.Options{Sink: w, Registry: p.reg, Lookups: p.in.Lookups(),
		Sampler: p.sampler, NoCreate: p.noCreate, Metrics: p.m, Log: log, Now: func() time.Time { return p.now() }, Owner: tablesOwner{p}})
	if err != nil {
		return nil, err
	}
	p.cat = cat
	p.disp.Catalog = cat
	p.in.SetCatalog(cat)
	p.initDelivery()
	p.disp.Delivery = p.dlv
	p.in.SetDelivery(p.dlv)
	return p, nil
}

// WithSampler gives schema.create: if_missing s to read the records that
// type a missing table's columns. Without it, New fails on a route with
// schema.create: if_missing whose table is missing.
func WithSampler(s tables.Sampler) Option { return func(p *Pipeline) { p.sampler = s } }

// WithoutCreate makes New leave missing tables missing, whatever
// schema.create says (sink check, which only prints the plans of
// tables.PlanCreates and tables.PlanDLQTables).
func WithoutCreate() Option { return func(p *Pipeline) { p.noCreate = true } }

// Catalog is the routes and their tables that New resolved; sink check
// reads them (Targets, Table, ResolveTopics, SampleDrift) before Run.
func (p *Pipeline) Catalog() *tables.Catalog { return p.cat }

// tablesOwner is what the catalog asks of the rest of the pipeline.
type tablesOwner struct{ p *Pipeline }

func (o tablesOwner) Spawn(f func())            { o.p.spawn(f) }
func (o tablesOwner) Described(r tables.Result) { o.p.post(described{p: o.p, r: r}) }
func (o tablesOwner) Stopping() bool            { return o.p.fatal != nil }

func (o tablesOwner) TableAdded(t *tables.Table)   { o.p.disp.TableAdded(t) }
func (o tablesOwner) TableBounded(t *tables.Table) { o.p.disp.Rebound(t) }
func (o tablesOwner) Reshape(ctx context.Context, t *tables.Table) {
	o.p.disp.Reshape(ctx, t)
}

// WithAllowance makes the budget of each server come from a (a share of a
// server's budget computed across the pods that write to it, for
// instance) instead of clickhouse.max_inserts_per_minute; the budget is
// then on even when that is 0.
func WithAllowance(a dispatch.Allowance) Option { return func(p *Pipeline) { p.allow = a } }

// dispatchOwner is what dispatch asks of the rest of the pipeline.
type dispatchOwner struct{ p *Pipeline }

func (o dispatchOwner) Spawn(f func())                 { o.p.spawn(f) }
func (o dispatchOwner) Post(e dispatch.Event)          { o.p.post(e) }
func (o dispatchOwner) NewID() uint64                  { return o.p.newID() }
func (o dispatchOwner) Blocked(b *dispatch.Batch) bool { return o.p.in.DeadLetters().Blocks(b) }

// Landed is the rest of the one path after an INSERT succeeds: a TRUNCATE
// that waited for the table's earlier rows goes on, the offsets are
// committed at once (inserts are few by design, so one commit round trip
// per insert is cheap, and it shrinks what a crash replays to the batches
// still in flight; commit_interval still covers dead letters and skips),
// and a revoke waiting for the batch is told.
func (o dispatchOwner) Landed(ctx context.Context, t *tables.Table, id uint64) {
	p := o.p
	p.in.Landed(ctx, t)
	if p.revoke == nil {
		p.committer.commit()
	}
	p.revokeDone(id)
}

// Failed: the batch stays unacknowledged in the tracker, so its offsets
// (and everything after them) are never committed, and the connector
// stops (err nil: canceled at shutdown).
func (o dispatchOwner) Failed(id uint64, err error) {
	o.p.failIf(err)
	o.p.revokeDone(id)
}

// Attach gives the pipeline its consumer. It is separate from New because
// the consumer's group callbacks call into the pipeline.
func (p *Pipeline) Attach(c Source) { p.cons = c }

// Stats returns the run's totals; valid after Run returned.
func (p *Pipeline) Stats() Stats {
	in := p.in.Stats()
	s := Stats{Records: in.Records, Bytes: in.Bytes, DLQ: in.DLQ, Skipped: in.Skipped}
	s.Rows, s.Inserts = p.disp.Totals()
	return s
}

func (p *Pipeline) newID() uint64 { p.nextID++; return p.nextID }

// cancelGrace is how long Run waits, once it canceled them, for the
// goroutines that use the Sink to return: a canceled INSERT or query ends
// as soon as the driver has told the server and closed its connection.
const cancelGrace = 5 * time.Second

// spawn runs f on a goroutine that Run joins before it returns (f uses
// the Sink, which the caller closes after Run).
func (p *Pipeline) spawn(f func()) {
	p.calls.Add(1)
	p.callsLive.Add(1)
	go func() {
		defer p.calls.Done()
		defer p.callsLive.Add(-1)
		f()
	}()
}

// stop closes stopped: from then on every event sent to the owner (post)
// is dropped instead of waiting for a loop that has ended, and group
// callbacks no longer wait for it.
func (p *Pipeline) stop() { p.stopOne.Do(func() { close(p.stopped) }) }

// join waits until every goroutine started with spawn has returned, for at
// most cancelGrace; the caller has canceled them. It reports the ones
// still running when the grace passed.
func (p *Pipeline) join() error {
	done := make(chan struct{})
	go func() { p.calls.Wait(); close(done) }()
	t := time.NewTimer(p.cancelGrace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("%d ClickHouse calls (INSERTs or queries) still running %s after they were canceled; the connection pool is closed under them",
			p.callsLive.Load(), p.cancelGrace)
	}
}

// intakeOwner is what intake asks of the rest of the pipeline.
type intakeOwner struct{ p *Pipeline }

func (o intakeOwner) Fail(err error)      { o.p.failIf(err) }
func (o intakeOwner) Failed() bool        { return o.p.fatal != nil }
func (o intakeOwner) NewID() uint64       { return o.p.newID() }
func (o intakeOwner) Spawn(f func())      { o.p.spawn(f) }
func (o intakeOwner) Post(e intake.Event) { o.p.post(e) }
func (o intakeOwner) Settled(id uint64)   { o.p.revokeDone(id) }
func (o intakeOwner) Fetched(tp offsets.TP, hwm, lag int64, last time.Time) {
	o.p.fetchedSeen(tp, hwm, lag, last)
}

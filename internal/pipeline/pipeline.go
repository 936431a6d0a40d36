// Package pipeline is the connector: it takes records from a Source (the
// Kafka consumer group), decodes them per route, accumulates them per table
// into large batches, inserts sealed batches through a Sink (ClickHouse),
// and commits each partition's offsets only up to the records that are in
// ClickHouse or in the dead-letter topic.
//
// The work is done by parts that each own their state and their
// behaviour, and reach one another only through interfaces they declare
// (the adapters of wire.go):
//
//   - the catalog (internal/tables): the routes and their tables, created,
//     re-read, evolved, the dead-letter tables;
//   - intake (internal/pipeline/intake): fetch, decode, hold: the polled
//     records decoded a turn at a time, each routed to its table's open
//     batch, held for the schema registry or a new column, bad ones to the
//     dead letters, TRUNCATE events (internal/cdc);
//   - dispatch (internal/pipeline/dispatch): the open batches and their
//     seal (its cadence: fixed, adaptive or the insert budget), each
//     table's queue and insert slots, the INSERTs and their outcomes;
//   - the committer (committer.go): the offsets tracker and the commits,
//     off the owner goroutine, their results back as events;
//   - the delivery guarantee (internal/pipeline/delivery: at-least-once,
//     or exactly-once's intents, ledgers and recovery), as hooks the
//     others call;
//   - the operator's view (view.go, admin.go): the state, pause and
//     resume, the status snapshot.
//
// Pipeline itself keeps the wiring (wire.go) and the event loop (run.go)
// that routes each event to the part it concerns: a fetch (poll.go decides
// when to poll and when to decode: the backpressure), an outcome in the
// inbox (events.go: each goroutine's result, applied by its part), a
// commit's result, a group callback (rebalance.go), a control request, a
// timer or a periodic tick. The Source port and its optional capabilities
// are ports.go; the parts declare the Sink's.
//
// Concurrency: one goroutine (Run's, "the owner") owns every piece of
// mutable state: the parts are called on it only. Everything else talks to
// it over channels: the poller hands it fetches only when it asked for
// them (so memory stays within batch.buffer_memory: when the budget is
// used up it stops asking, and fetching pauses), the goroutines the parts
// start (INSERTs, table reads, ALTERs, TRUNCATEs, parts reads, schema
// look-ups, dead-letter produces' callbacks) hand their outcome back as an
// event, and the group callbacks (on franz-go's goroutine) hand it
// assignments, revokes and losses and wait for the answer. Pause and
// Resume (POST /pause, /resume) are requests over a channel too, answered
// by the owner; Status hands any goroutine the last snapshot the owner
// published (an immutable copy, never the owner's maps). Every goroutine
// that uses the Sink is started with spawn (calls.go), sends its outcome
// through a send that gives up once Run has made its last commit, and is
// joined (canceled, then waited for, boundedly) before Run returns: the
// caller may close the ClickHouse pool as soon as Run returned. New,
// Catalog and CheckExactlyOnce are called before Run; Stats after it
// returned.
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
//     exactly_once, the intent commit before each batch's INSERT: each at
//     most kafka.request_timeout (the committer's send), after the commit
//     still out; a commit that fails or times out is retried by the next
//     one, an intent after its backoff. The commits after each INSERT and
//     every kafka.commit_interval do not wait: they go through the
//     committer's goroutine, one at a time, and their results come back
//     as events.
//   - Describing a table first needed by a new topic (the catalog's
//     resolveTopic: a table named after its topic): at most
//     clickhouse.query_timeout, once per topic, and once per
//     clickhouse.schema_refresh for a topic whose table is missing.
//   - A dead-letter produce (intake's dead letters): franz-go's Produce
//     returns at once unless 50,000 records wait in its buffer; then it
//     waits until one of them is acknowledged or fails (each fails after
//     10 retries).
//   - Exactly-once recovery of newly assigned partitions (the delivery's
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
// (intake's lookups), so a revoke never waits behind a slow registry. At
// shutdown Run waits for the inserts up to shutdown_timeout, then for the
// canceled Sink calls and look-ups up to cancelGrace each, and for the
// poller, whose Poll returns once canceled.
package pipeline

import (
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/metrics"
	"sink/internal/pipeline/delivery"
	"sink/internal/pipeline/dispatch"
	"sink/internal/pipeline/intake"
	"sink/internal/tables"
)

// Pipeline is one connector: the wiring of its parts and the event loop
// that routes each event to the part it concerns (run.go).
type Pipeline struct {
	cfg  *config.Config
	log  zerolog.Logger
	w    Sink
	cons Source
	m    *metrics.Metrics // nil-safe: nil reports nothing
	opts options

	// The parts, each the owner of its state and its behaviour.
	cat       *tables.Catalog    // the routes and their tables (internal/tables)
	in        *intake.Intake     // the records on their way in (internal/pipeline/intake)
	disp      *dispatch.Dispatch // the batches on their way to ClickHouse (internal/pipeline/dispatch)
	committer *committer         // the offsets tracker and the commits (committer.go)
	// dlv is what the delivery guarantee adds to the shared path
	// (guarantee.go); eo is exactly-once's, under exactly_once (nil
	// otherwise).
	dlv  guarantee
	eo   *delivery.Exactly
	view view // the operator's view and controls (admin.go)

	// The event loop's inputs (run.go), and the goroutines that use the
	// Sink, which Run joins before it returns (calls.go).
	inbox   chan event // outcomes of the goroutines the parts started (events.go)
	events  chan groupEvent
	fetches chan kgo.Fetches
	want    chan struct{}
	calls   goroutines

	polling bool // a poll was requested and not yet delivered
	paused  bool // fetching paused: the buffer budget is used up (poll.go)
	revoke  *revokeWait
	fatal   error
	nextID  uint64 // the last unit id (newID)
	now     func() time.Time
	// jitter draws the random part of exactly-once's retry waits
	// (backoff.Policy.Rand); nil is math/rand. Tests fix it.
	jitter func(n int64) int64
	// recycle hands a record's memory back to franz-go's pool
	// ((*kgo.Record).Recycle; tests poison the record instead).
	recycle func(*kgo.Record)
}

// options are what the Options give New beyond the config.
type options struct {
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
func WithRegistry(r intake.Registry) Option { return func(p *Pipeline) { p.opts.reg = r } }

// WithSampler gives schema.create: if_missing s to read the records that
// type a missing table's columns. Without it, New fails on a route with
// schema.create: if_missing whose table is missing.
func WithSampler(s tables.Sampler) Option { return func(p *Pipeline) { p.opts.sampler = s } }

// WithoutCreate makes New leave missing tables missing, whatever
// schema.create says (sink check, which only prints the plans of
// tables.PlanCreates and tables.PlanDLQTables).
func WithoutCreate() Option { return func(p *Pipeline) { p.opts.noCreate = true } }

// Catalog is the routes and their tables that New resolved; sink check
// reads them (Targets, Table, ResolveTopics, SampleDrift) before Run.
func (p *Pipeline) Catalog() *tables.Catalog { return p.cat }

// WithAllowance makes the budget of each server come from a (a share of a
// server's budget computed across the pods that write to it, for
// instance) instead of clickhouse.max_inserts_per_minute; the budget is
// then on even when that is 0.
func WithAllowance(a dispatch.Allowance) Option { return func(p *Pipeline) { p.opts.allow = a } }

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

// Package pipeline is the connector: it ties the Kafka consumer, the
// decoders, the per-table batch accumulators, the ClickHouse writer and the
// offsets tracker into one flow.
//
// One goroutine (Run's) owns every piece of mutable state: accumulators,
// the tracker, the in-flight table and the counters. Everything else talks
// to it over channels: the poller hands it fetches only when it asked for
// them (so memory stays within batch.buffer_memory: when the budget is used
// up it simply stops asking, and fetching pauses), insert goroutines report
// acks, and the group callbacks hand it revokes and losses and wait for the
// answer.
package pipeline

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/batch"
	"sink/internal/consumer"
	"sink/internal/decode"
	"sink/internal/metrics"
	"sink/internal/offsets"
	"sink/internal/writer"
)

// maxPoll bounds the records handled between two AllowRebalance calls, so
// a rebalance never waits long on us.
const maxPoll = 10_000

// statsInterval is how often the info-level summary line is written.
var statsInterval = 10 * time.Second

// tableState is one ClickHouse target table.
type tableState struct {
	t        *writer.Table
	plan     *decode.Plan    // any route's plan: all share the column layout
	free     []*decode.Block // reset blocks for reuse
	queue    []*batch.Batch  // sealed, waiting for an insert slot
	inflight int
	// describing: a re-read of the columns is running (describeTables)
	describing bool
	// counters for the summary; retries is written by insert goroutines
	rows, inserts int64
	retries       atomic.Int64
	lastErr       atomic.Pointer[string] // the last retried INSERT error
	m             *metrics.Table         // nil without metrics; safe from insert goroutines
}

// routeState is one route, compiled against its table.
type routeState struct {
	route config.Route
	plan  *decode.Plan
	table *tableState
}

// accKey names an accumulator: per table, or per table-partition when
// batch.ignore_partitions is false.
type accKey struct {
	table *tableState
	tp    offsets.TP
}

type accState struct {
	acc    *batch.Accumulator
	id     uint64 // the unit id the open batch's records are tracked under
	key    accKey
	oldest int64 // unix nanoseconds of the open batch's oldest record timestamp; 0: none known
}

type flight struct {
	b      *batch.Batch
	table  *tableState
	tab    *writer.Table // the table's columns the batch was decoded for
	bytes  int
	oldest int64 // accState.oldest at seal time: the start of the batch's end-to-end latency
}

type ack struct {
	id   uint64
	err  error
	dlq  bool
	took time.Duration
}

type groupEvent struct {
	kind  string // "assigned", "revoked", "lost"
	parts map[string][]int32
	done  chan struct{}
}

type revokeWait struct {
	tps      []offsets.TP
	waiting  map[uint64]bool
	done     chan struct{}
	start    time.Time
	deadline time.Time
}

// Stats are the totals of a run, reported at the end.
type Stats struct {
	Records, Bytes, Rows, Inserts, DLQ, Skipped int64
}

// Pipeline is one connector.
type Pipeline struct {
	cfg  *config.Config
	log  zerolog.Logger
	w    *writer.Writer
	cons *consumer.Consumer

	tables  map[string]*tableState // "db.table"
	routes  []*routeState
	byTopic map[string]*routeState

	accs    map[accKey]*accState
	tracker *offsets.Tracker
	flights map[uint64]*flight   // sealed batches not yet acknowledged
	dlqs    map[uint64]*dlqState // bad records whose dead-letter produce has not succeeded
	nextID  uint64
	// dlqBytes is the key and value bytes of the records in dlqs (part of
	// the buffer budget); dlqFailed counts those that failed for good.
	dlqBytes, dlqFailed int

	acks    chan ack
	events  chan groupEvent
	fetches chan kgo.Fetches
	schemas chan schemaResult
	want    chan struct{}
	stopped chan struct{} // closed when Run's loop has ended

	uncommitted map[offsets.TP]offsets.Commit // positions of a failed commit, retried

	polling bool // a poll was requested and not yet delivered
	paused  bool
	revoke  *revokeWait
	lag     map[offsets.TP]int64
	stats   Stats
	fatal   error
	now     func() time.Time

	// Metric handles, resolved once per topic and partition so the hot
	// path never builds label strings. All nil-safe when m is nil.
	m      *metrics.Metrics
	topicM map[string]*metrics.Topic
	partM  map[offsets.TP]*metrics.Partition

	eo *exactly // nil unless delivery is exactly_once (exactly.go)
}

// Option configures a Pipeline beyond its config.
type Option func(*Pipeline)

// WithMetrics makes the pipeline report to m (see internal/metrics).
// Without it the pipeline reports nothing.
func WithMetrics(m *metrics.Metrics) Option { return func(p *Pipeline) { p.m = m } }

// New resolves every route's table and compiles its decode plan. It fails
// with one line naming the problem: a missing table, a column the mapping
// cannot fill, an unknown source.
func New(ctx context.Context, cfg *config.Config, log zerolog.Logger, w *writer.Writer, opts ...Option) (*Pipeline, error) {
	p := &Pipeline{
		cfg:     cfg,
		log:     log,
		w:       w,
		tables:  map[string]*tableState{},
		byTopic: map[string]*routeState{},
		accs:    map[accKey]*accState{},
		tracker: offsets.New(),
		flights: map[uint64]*flight{},
		dlqs:    map[uint64]*dlqState{},
		acks:    make(chan ack, 64),
		events:  make(chan groupEvent),
		fetches: make(chan kgo.Fetches),
		schemas: make(chan schemaResult),
		want:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		lag:     map[offsets.TP]int64{},
		now:     time.Now,
		topicM:  map[string]*metrics.Topic{},
		partM:   map[offsets.TP]*metrics.Partition{},
	}
	for _, o := range opts {
		o(p)
	}
	p.initExactly()
	p.m.SetMaxWait(cfg.Batch.MaxWait)
	if err := p.resolve(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Tables describes the resolved routes for `sink check`.
func (p *Pipeline) Tables() []*writer.Table {
	out := make([]*writer.Table, 0, len(p.tables))
	add := func(rs *routeState) {
		if rs == nil || rs.table == nil {
			return // a table named after its topic, not resolved yet
		}
		for _, t := range out {
			if t == rs.table.t {
				return
			}
		}
		out = append(out, rs.table.t)
	}
	for _, r := range p.routes {
		add(r)
	}
	topics := make([]string, 0, len(p.byTopic))
	for t := range p.byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		add(p.byTopic[t])
	}
	return out
}

// ResolveTopics resolves the route and table of each topic now, as the
// first record of each would at run time, so that `sink check` reports a
// table named after a topic that does not exist. It returns the topics no
// route matches. Call it before Run, never during.
func (p *Pipeline) ResolveTopics(ctx context.Context, topics []string) (unrouted []string, err error) {
	for _, t := range topics {
		rs, err := p.routeFor(ctx, t)
		if err != nil {
			return nil, err
		}
		if rs == nil {
			unrouted = append(unrouted, t)
		}
	}
	return unrouted, nil
}

func (p *Pipeline) resolve(ctx context.Context) error {
	type group struct {
		db, name string
		routes   []config.Route
		idx      []int
	}
	var order []string
	groups := map[string]*group{}
	for i, r := range p.cfg.Routes {
		if r.TableFromTopic() {
			continue // resolved per topic by resolveTopic
		}
		db, name := p.cfg.TableFor(r)
		key := db + "." + name
		g := groups[key]
		if g == nil {
			g = &group{db: db, name: name}
			groups[key] = g
			order = append(order, key)
		}
		g.routes = append(g.routes, r)
		g.idx = append(g.idx, i)
	}
	p.routes = make([]*routeState, len(p.cfg.Routes))
	for i, r := range p.cfg.Routes {
		if r.TableFromTopic() {
			p.routes[i] = &routeState{route: r} // no table or plan until routeFor resolves a topic
		}
	}
	for _, key := range order {
		g := groups[key]
		schema, err := p.w.Describe(ctx, g.db, g.name)
		if err != nil {
			return fmt.Errorf("routes[%d]: %w", g.idx[0], err)
		}
		var mappings []map[string]string
		for _, r := range g.routes {
			mappings = append(mappings, r.Mapping())
		}
		insert := decode.InsertColumns(schema, mappings...)
		ts := &tableState{t: writer.NewTable(g.db, g.name, schema, insert), m: p.m.Table(key)}
		for j, r := range g.routes {
			plan, err := p.compile(r, insert)
			if err != nil {
				return fmt.Errorf("routes[%d] (table %s): %w", g.idx[j], key, err)
			}
			if ts.plan == nil {
				ts.plan = plan
			}
			p.routes[g.idx[j]] = &routeState{route: r, plan: plan, table: ts}
		}
		p.tables[key] = ts
	}
	return nil
}

// compile builds route r's plan for the table's insert columns, with the
// errors.on_missing / on_null / on_tombstone policy.
func (p *Pipeline) compile(r config.Route, insert []decode.ColumnSchema) (*decode.Plan, error) {
	plan, err := decode.Compile(r.Format, insert, r.Mapping())
	if err != nil {
		return nil, err
	}
	e := p.cfg.Errors
	plan.SetPolicy(decode.Policy{
		MissingBad:   e.OnMissing == "bad_record",
		NullBad:      e.OnNull == "bad_record",
		TombstoneBad: e.OnTombstone == "bad_record",
	})
	return plan, nil
}

// flushDefaults moves the counts of defaults given by ts's plans into the
// metrics; called when a batch of ts is sealed.
func (p *Pipeline) flushDefaults(ts *tableState) {
	if ts.m == nil {
		return
	}
	for _, rs := range p.allRoutes() {
		if rs.table == ts {
			rs.plan.TakeDefaults(ts.m.Defaulted)
		}
	}
}

// Attach gives the pipeline its consumer. It is separate from New because
// the consumer's group callbacks call into the pipeline.
func (p *Pipeline) Attach(c *consumer.Consumer) { p.cons = c }

// Hooks are the group callbacks to pass to consumer.New.
func (p *Pipeline) Hooks() consumer.Hooks {
	return consumer.Hooks{
		Assigned: func(ctx context.Context, m map[string][]int32) { p.groupEvent(ctx, "assigned", m) },
		Revoked:  func(ctx context.Context, m map[string][]int32) { p.groupEvent(ctx, "revoked", m) },
		Lost:     func(ctx context.Context, m map[string][]int32) { p.groupEvent(ctx, "lost", m) },
	}
}

// groupEvent hands a membership change to the owner and waits until it is
// handled: for a revoke, until the revoked partitions' rows are in
// ClickHouse and their offsets committed. Once the loop has stopped (it
// already flushed and committed everything it could), it returns at once.
func (p *Pipeline) groupEvent(ctx context.Context, kind string, m map[string][]int32) {
	ev := groupEvent{kind: kind, parts: m, done: make(chan struct{})}
	select {
	case p.events <- ev:
	case <-p.stopped:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-ev.done:
	case <-p.stopped:
	}
}

// Stats returns the run's totals; valid after Run returned.
func (p *Pipeline) Stats() Stats { return p.stats }

// routeFor returns the route of topic's records (nil: skip them). A route
// whose table is named after the topic is resolved for the topic here, the
// first time (resolveTopic); its error is fatal.
func (p *Pipeline) routeFor(ctx context.Context, topic string) (*routeState, error) {
	if rs, ok := p.byTopic[topic]; ok {
		return rs, nil
	}
	var found *routeState
	for _, rs := range p.routes {
		if rs.route.Matches(topic) {
			found = rs
			break
		}
	}
	if found != nil && found.table == nil {
		var err error
		if found, err = p.resolveTopic(ctx, found, topic); err != nil {
			return nil, err
		}
	}
	p.byTopic[topic] = found // nil is cached too: such records are skipped
	return found, nil
}

// topicMetrics returns topic's metric handle (nil without metrics).
func (p *Pipeline) topicMetrics(topic string) *metrics.Topic {
	if p.m == nil {
		return nil
	}
	t, ok := p.topicM[topic]
	if !ok {
		t = p.m.Topic(topic)
		p.topicM[topic] = t
	}
	return t
}

// partMetrics returns tp's metric handle (nil without metrics).
func (p *Pipeline) partMetrics(tp offsets.TP) *metrics.Partition {
	if p.m == nil {
		return nil
	}
	h, ok := p.partM[tp]
	if !ok {
		h = p.m.Partition(tp.Topic, tp.Partition)
		p.partM[tp] = h
	}
	return h
}

func (p *Pipeline) newID() uint64 { p.nextID++; return p.nextID }

func (p *Pipeline) accFor(ts *tableState, tp offsets.TP) *accState {
	key := accKey{table: ts}
	if !p.cfg.Batch.IgnorePartitions {
		key.tp = tp
	}
	if a, ok := p.accs[key]; ok {
		return a
	}
	pol := batch.Policy{
		MaxRows:  p.cfg.Batch.MaxRows,
		MaxBytes: int(p.cfg.Batch.MaxBytes),
		MaxWait:  p.cfg.Batch.MaxWait,
	}
	a := &accState{acc: batch.NewAccumulator(pol, p.block(ts)), id: p.newID(), key: key}
	p.accs[key] = a
	return a
}

// block returns an empty block for ts, reusing a freed one when there is.
func (p *Pipeline) block(ts *tableState) *decode.Block {
	if n := len(ts.free); n > 0 {
		b := ts.free[n-1]
		ts.free = ts.free[:n-1]
		return b
	}
	return ts.plan.NewBlock()
}

// memUsed is the bytes held by open and unacknowledged batches and by bad
// records waiting for the dead-letter topic.
func (p *Pipeline) memUsed() int {
	n := p.dlqBytes
	for _, a := range p.accs {
		n += a.acc.Data().Bytes()
	}
	for _, f := range p.flights {
		n += f.bytes
	}
	return n
}

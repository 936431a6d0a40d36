package tables

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/metrics"
)

// Catalog is the routes and their tables: the configured routes compiled
// against their tables (resolve), the tables by "db.table" (the routes'
// and the dead-letter tables), and each topic's candidate routes once a
// record of the topic asked (RoutesFor). Only the owner goroutine touches
// it.
type Catalog struct {
	cfg  *config.Config
	log  zerolog.Logger
	sink Describer
	// lookups is what the plans ask for schemas (the pipeline's schema
	// look-ups); nil when no registry is configured (Compile then
	// refuses the registry-framed formats).
	lookups decode.Registry
	m       *metrics.Metrics
	own     Owner
	now     func() time.Time

	tables  map[string]*Table   // "db.table"
	routes  []*Route            // one per configured route, in order
	byTopic map[string][]*Route // a topic's candidate routes (RoutesFor)
	// badTopics are the topics whose table a route's template names but
	// the route may not write, each until it is resolved again (topics.go).
	badTopics map[string]badTopic
	// lastTopic and lastRoutes repeat the last answer for a topic: the
	// records of one partition chunk share their topic, so most lookups
	// skip the map. byTopic's entries never change once set, so the copy
	// stays true.
	lastTopic  string
	lastRoutes []*Route
	lastOK     bool
	// fanout: some route has when: or fanout is all, so a record's routes
	// are chosen per record; false: a topic's first route takes all its
	// records.
	fanout bool

	dead     DeadLetters       // the dead-letter tables and counts (deadletter.go)
	evo      Evolution         // fields no column takes, and the columns added for them (evolve.go)
	unfilled map[string]string // the DEFAULT columns noteUnfilled has logged, with why
}

// Options is what Open builds the catalog from besides the config.
type Options struct {
	Sink Describer
	// Registry is the schema registry, asked synchronously by the table
	// creation's sample; Lookups is what the routes' plans ask (nil when
	// no registry is configured).
	Registry, Lookups decode.Registry
	// Sampler reads the records that type a missing table's columns;
	// NoCreate leaves missing tables missing, whatever schema.create says
	// (sink check, which only prints PlanCreates).
	Sampler  Sampler
	NoCreate bool
	Metrics  *metrics.Metrics
	Log      zerolog.Logger
	Now      func() time.Time
	Owner    Owner
}

// Open creates the missing tables of the routes with schema.create:
// if_missing, resolves every route's table and compiles its decode plan,
// and does the same for the dead-letter tables. It fails with one line
// naming the problem: a missing table, a column the mapping cannot fill,
// an unknown source.
func Open(ctx context.Context, cfg *config.Config, o Options) (*Catalog, error) {
	c := &Catalog{cfg: cfg, log: o.Log, sink: o.Sink, lookups: o.Lookups, m: o.Metrics, own: o.Owner, now: o.Now,
		tables: map[string]*Table{}, byTopic: map[string][]*Route{}}
	if c.now == nil {
		c.now = time.Now
	}
	c.fanout = cfg.Fanout == config.FanoutAll
	for _, r := range cfg.Routes {
		c.fanout = c.fanout || len(r.Conditions()) > 0
	}
	if !o.NoCreate {
		if err := c.create(ctx, o.Registry, o.Sampler); err != nil {
			return nil, err
		}
	}
	if err := c.resolve(ctx); err != nil {
		return nil, err
	}
	c.dead.c = c
	if err := c.dead.open(ctx, o.NoCreate); err != nil {
		return nil, err
	}
	c.evo.c = c
	if err := c.evo.open(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Evolution is the fields no column takes and the columns added for them.
func (c *Catalog) Evolution() *Evolution { return &c.evo }

// Fanout reports whether a record's routes are chosen per record (some
// route has when:, or fanout is all); otherwise a topic's first route
// takes every record.
func (c *Catalog) Fanout() bool { return c.fanout }

// Table returns the table named "db.table" (a route's or a dead-letter
// table), nil when there is none.
func (c *Catalog) Table(name string) *Table { return c.tables[name] }

// EachTable calls f with every table, in no particular order.
func (c *Catalog) EachTable(f func(t *Table)) {
	for _, t := range c.tables {
		f(t)
	}
}

// Names returns the tables' names, sorted.
func (c *Catalog) Names() []string {
	names := make([]string, 0, len(c.tables))
	for name := range c.tables {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// known returns topic's candidate routes when they were looked up before.
func (c *Catalog) known(topic string) ([]*Route, bool) {
	if c.lastOK && topic == c.lastTopic {
		return c.lastRoutes, true
	}
	rs, ok := c.byTopic[topic]
	if ok {
		c.lastTopic, c.lastRoutes, c.lastOK = topic, rs, true
	}
	return rs, ok
}

// remember records topic's candidate routes; nil is remembered too.
func (c *Catalog) remember(topic string, found []*Route) {
	c.byTopic[topic] = found
	c.lastTopic, c.lastRoutes, c.lastOK = topic, found, true
}

// Targets is every route's table, the configured routes' first, then
// those resolved per topic by topic name (sink check).
func (c *Catalog) Targets() []*chtable.Table {
	out := make([]*chtable.Table, 0, len(c.tables))
	add := func(rs *Route) {
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
	for _, rs := range c.routes {
		add(rs)
	}
	topics := make([]string, 0, len(c.byTopic))
	for t := range c.byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		for _, rs := range c.byTopic[t] {
			add(rs)
		}
	}
	return out
}

// ResolveTopics resolves the route and table of each topic now, as the
// first record of each would at run time, so that `sink check` reports a
// table named after a topic that does not exist. It returns the topics no
// route matches, and the topics whose records go to no table, with why
// (TopicError: their records will be bad records). Call it before Run,
// never during.
func (c *Catalog) ResolveTopics(ctx context.Context, topics []string) (unrouted []string, bad []*TopicError, err error) {
	for _, t := range topics {
		rs, err := c.RoutesFor(ctx, t)
		if te := TopicErrorOf(err); te != nil {
			bad = append(bad, te)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if len(rs) == 0 {
			unrouted = append(unrouted, t)
		}
	}
	return unrouted, bad, nil
}

// routeGroup is the configured routes into one table.
type routeGroup struct {
	db, name string
	routes   []config.Route
	idx      []int
}

// groups are the configured routes by their table, in order of first
// mention; routes whose table is named after their topic are left out
// (resolved per topic by resolveTopic).
func (c *Catalog) groups() ([]string, map[string]*routeGroup) {
	var order []string
	groups := map[string]*routeGroup{}
	for i, r := range c.cfg.Routes {
		if r.TableFromTopic() {
			continue
		}
		db, name := c.cfg.TableFor(r)
		key := db + "." + name
		g := groups[key]
		if g == nil {
			g = &routeGroup{db: db, name: name}
			groups[key] = g
			order = append(order, key)
		}
		g.routes = append(g.routes, r)
		g.idx = append(g.idx, i)
	}
	return order, groups
}

func (c *Catalog) resolve(ctx context.Context) error {
	order, groups := c.groups()
	c.routes = make([]*Route, len(c.cfg.Routes))
	for i, r := range c.cfg.Routes {
		if r.TableFromTopic() {
			c.routes[i] = &Route{cfg: r} // no table or plan until routeFor resolves a topic
		}
	}
	for _, key := range order {
		if err := c.resolveGroup(ctx, key, groups[key]); err != nil {
			return err
		}
	}
	return nil
}

// resolveGroup describes g's table and compiles each of its routes.
func (c *Catalog) resolveGroup(ctx context.Context, key string, g *routeGroup) error {
	schema, err := c.sink.Describe(ctx, g.db, g.name)
	if err != nil {
		return fmt.Errorf("routes[%d]: %w", g.idx[0], err)
	}
	var mappings []map[string]string
	var maxLatency time.Duration
	for _, r := range g.routes {
		mappings = append(mappings, r.Mapping())
		if r.MaxLatency > 0 && (maxLatency == 0 || r.MaxLatency < maxLatency) {
			maxLatency = r.MaxLatency
		}
	}
	insert := decode.InsertColumns(schema, mappings...)
	ts := c.newTable(chtable.NewTable(g.db, g.name, schema, insert), key, maxLatency)
	for j, r := range g.routes {
		plan, err := c.Compile(r, insert)
		if err != nil {
			return fmt.Errorf("routes[%d] (table %s): %w", g.idx[j], key, err)
		}
		if ts.plan == nil {
			ts.plan = plan
		}
		c.routes[g.idx[j]] = &Route{cfg: r, plan: plan, table: ts}
	}
	c.addTable(key, ts)
	return nil
}

// newTable makes the state of a resolved table; maxLatency is its routes'
// smallest max_latency (0: none).
func (c *Catalog) newTable(t *chtable.Table, key string, maxLatency time.Duration) *Table {
	c.noteUnfilled(t)
	sharder, _ := c.sink.(Sharder)
	return &Table{name: key, t: t, m: c.m.Table(key), maxLatency: maxLatency, sharder: sharder}
}

// addTable records ts as the table named "db.table" and tells the owner.
func (c *Catalog) addTable(name string, ts *Table) {
	c.tables[name] = ts
	c.own.TableAdded(ts)
}

// Compile builds route r's plan for the table's insert columns, with the
// errors.on_missing / on_null / on_tombstone policy and batch.max_bytes as
// the largest row.
func (c *Catalog) Compile(r config.Route, insert []chschema.ColumnSchema) (*decode.Plan, error) {
	plan, err := decode.Compile(r.Format, insert, r.Mapping(), decode.WithRegistry(c.lookups), decode.WithMessage(r.Message))
	if err != nil {
		return nil, err
	}
	e := c.cfg.Errors
	plan.SetPolicy(decode.Policy{
		MissingBad:   e.OnMissing == "bad_record",
		NullBad:      e.OnNull == "bad_record",
		TombstoneBad: e.OnTombstone == "bad_record",
		Unmapped:     r.Schema.Permits,
		// A row larger than a batch is a bad record (decode's limits).
		MaxRowBytes: int(c.cfg.Batch.MaxBytes),
	})
	return plan, nil
}

// RouteFor returns the first route of topic's records (nil: no route
// names the topic), as config.RouteFor says, whatever its when: says:
// exactly-once recovery, which refuses fan-out routing, and sink check use
// it. The per-record choice is RoutesFor plus the routes' conditions.
func (c *Catalog) RouteFor(ctx context.Context, topic string) (*Route, error) {
	rs, err := c.RoutesFor(ctx, topic)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	return rs[0], nil
}

// RoutesFor returns, in configuration order, the routes whose topic
// matches topic: the candidates whose when: a record of the topic is
// tested against (none: skip the topic's records). A route whose table is
// named after the topic is resolved for the topic here, the first time
// (resolveTopic). A *TopicError says that the topic's records go to no
// table (topics.go): they are bad records, and the topic is resolved
// again after recheckEvery; any other error is fatal.
func (c *Catalog) RoutesFor(ctx context.Context, topic string) ([]*Route, error) {
	if rs, ok := c.known(topic); ok {
		return rs, nil
	}
	if err := c.stillBad(topic); err != nil {
		return nil, err
	}
	var found []*Route
	for _, rs := range c.routes {
		if !rs.cfg.Matches(topic) {
			continue
		}
		if rs.table == nil {
			var err error
			if rs, err = c.resolveTopic(ctx, rs, topic); err != nil {
				return nil, err
			}
		}
		found = append(found, rs)
		if !c.fanout {
			break // without when: or fanout: all, the first route takes every record
		}
	}
	c.remember(topic, found) // nil is cached too: such records are skipped
	return found, nil
}

// resolveTopic resolves, for one topic, a route whose table is named after
// the topic (config.Route.TableFromTopic: one route for every table of a
// Debezium server): it describes the table the first time any topic needs
// it, compiles the route's plan against it, and returns the topic's own
// Route. It runs on the owner goroutine, once per new topic (and once per
// recheckEvery for a topic without a table), so a slow system.columns
// query holds the loop at most clickhouse.query_timeout. A topic whose
// table the route may not write (no table name, a dead-letter table, a
// missing table, one the mapping cannot fill) is a *TopicError naming the
// route, the topic and the table (topics.go); any other error (ClickHouse
// does not answer) stops the connector before the topic's first record,
// so nothing of it is committed.
func (c *Catalog) resolveTopic(ctx context.Context, rs *Route, topic string) (*Route, error) {
	idx := slices.Index(c.routes, rs)
	db, name, err := c.cfg.TableForTopic(rs.cfg, topic)
	if err == nil {
		err = c.tableJob(db, name, rs.cfg.Table, topic)
	}
	if err != nil {
		return nil, c.refuseTopic(rs, topic, fmt.Errorf("routes[%d]: %w", idx, err))
	}
	key := db + "." + name
	ts := c.tables[key]
	var schema, insert []chschema.ColumnSchema
	if ts != nil {
		// A table another route already resolved keeps its INSERT
		// columns, so that all its plans share one block layout.
		insert = ts.t.Insert
	} else {
		if schema, err = c.describeForTopic(ctx, rs, topic, db, name); err != nil {
			return nil, err
		}
		insert = decode.InsertColumns(schema, rs.cfg.Mapping())
	}
	plan, err := c.Compile(rs.cfg, insert)
	if err != nil {
		return nil, c.refuseTopic(rs, topic, fmt.Errorf("routes[%d] (table %s for topic %q): %w", idx, key, topic, err))
	}
	if ts == nil {
		ts = c.newTable(chtable.NewTable(db, name, schema, insert), key, rs.cfg.MaxLatency)
		ts.plan = plan
		c.addTable(key, ts)
	} else {
		c.tighten(ts, rs.cfg.MaxLatency)
	}
	c.log.Info().Str("topic", topic).Str("table", key).Int("route", idx).Msg("table resolved for topic")
	return &Route{cfg: rs.cfg, plan: plan, table: ts}, nil
}

// tighten makes d (a route's max_latency; 0: none) ts's bound when it is
// tighter than the one it has, and tells the owner.
func (c *Catalog) tighten(ts *Table, d time.Duration) {
	if d > 0 && (ts.maxLatency == 0 || d < ts.maxLatency) {
		ts.maxLatency = d
		c.own.TableBounded(ts)
	}
}

// RoutesInto is every compiled route into ts: the configured ones and
// those resolved per topic (a table named after its topic).
func (c *Catalog) RoutesInto(ts *Table) []*Route {
	var out []*Route
	c.eachRouteInto(ts, func(rs *Route) { out = append(out, rs) })
	return out
}

// eachRouteInto calls fn with every compiled route into ts, once each:
// the configured ones, then those resolved per topic. It allocates
// nothing: the seal of every batch calls it (FlushDefaults, FlushDrift).
func (c *Catalog) eachRouteInto(ts *Table, fn func(rs *Route)) {
	for _, rs := range c.routes {
		if rs != nil && rs.table == ts {
			fn(rs)
		}
	}
	for _, list := range c.byTopic {
		for _, rs := range list {
			// A topic's candidates may be configured routes, called above.
			if rs.table == ts && !slices.Contains(c.routes, rs) {
				fn(rs)
			}
		}
	}
}

// FlushDefaults moves the counts of defaults given by ts's plans into the
// metrics; called when a batch of ts is sealed.
func (c *Catalog) FlushDefaults(ts *Table) {
	c.flushUnfilled(ts)
	if ts.m == nil {
		return
	}
	c.eachRouteInto(ts, func(rs *Route) { rs.plan.TakeDefaults(ts.m.Defaulted) })
}

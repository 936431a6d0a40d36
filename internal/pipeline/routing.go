package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
)

// routeState is one route, compiled against its table.
type routeState struct {
	route config.Route
	plan  *decode.Plan
	table *tableState
	// settled caches the last unmapped fields of this route's records
	// that had nothing to wait for (evolve.go: schemaWaitFor).
	settled settledFields
}

// routing is the routes and their tables: the configured routes compiled
// against their tables (resolve), the tables by "db.table" (the routes' and
// the dead-letter tables), and each topic's candidate routes once a record
// of the topic asked (routesFor). Only the owner goroutine touches it.
type routing struct {
	tables  map[string]*tableState   // "db.table"
	routes  []*routeState            // one per configured route, in order
	byTopic map[string][]*routeState // a topic's candidate routes (routesFor)
	// lastTopic and lastRoutes repeat the last answer for a topic: the
	// records of one partition chunk share their topic, so most lookups
	// skip the map. byTopic's entries never change once set, so the copy
	// stays true.
	lastTopic  string
	lastRoutes []*routeState
	lastOK     bool
	// fanout: some route has when: or fanout is all, so a record's routes
	// are chosen per record (fanout.go); false: a topic's first route
	// takes all its records.
	fanout bool
	fan    fanState
}

// newRouting returns an empty routing, its maps made.
func newRouting() routing {
	return routing{tables: map[string]*tableState{}, byTopic: map[string][]*routeState{}}
}

// table returns the table named "db.table", nil when there is none.
func (r *routing) table(name string) *tableState { return r.tables[name] }

// addTable records ts as the table named "db.table".
func (r *routing) addTable(name string, ts *tableState) { r.tables[name] = ts }

// eachTable calls f with every table, in no particular order.
func (r *routing) eachTable(f func(ts *tableState)) {
	for _, ts := range r.tables {
		f(ts)
	}
}

// tableNames returns the tables' names, sorted.
func (r *routing) tableNames() []string {
	names := make([]string, 0, len(r.tables))
	for name := range r.tables {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// known returns topic's candidate routes when they were looked up before.
func (r *routing) known(topic string) ([]*routeState, bool) {
	if r.lastOK && topic == r.lastTopic {
		return r.lastRoutes, true
	}
	rs, ok := r.byTopic[topic]
	if ok {
		r.lastTopic, r.lastRoutes, r.lastOK = topic, rs, true
	}
	return rs, ok
}

// remember records topic's candidate routes; nil is remembered too.
func (r *routing) remember(topic string, found []*routeState) {
	r.byTopic[topic] = found
	r.lastTopic, r.lastRoutes, r.lastOK = topic, found, true
}

// Tables describes the resolved routes for `sink check`.
func (p *Pipeline) Tables() []*chtable.Table { return p.rt.chTables() }

// chTables is every route's table, the configured routes' first, then
// those resolved per topic by topic name.
func (r *routing) chTables() []*chtable.Table {
	out := make([]*chtable.Table, 0, len(r.tables))
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
	for _, rs := range r.routes {
		add(rs)
	}
	topics := make([]string, 0, len(r.byTopic))
	for t := range r.byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		for _, rs := range r.byTopic[t] {
			add(rs)
		}
	}
	return out
}

// ResolveTopics resolves the route and table of each topic now, as the
// first record of each would at run time, so that `sink check` reports a
// table named after a topic that does not exist. It returns the topics no
// route matches. Call it before Run, never during.
func (p *Pipeline) ResolveTopics(ctx context.Context, topics []string) (unrouted []string, err error) {
	for _, t := range topics {
		rs, err := p.routesFor(ctx, t)
		if err != nil {
			return nil, err
		}
		if len(rs) == 0 {
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
	p.rt.routes = make([]*routeState, len(p.cfg.Routes))
	for i, r := range p.cfg.Routes {
		if r.TableFromTopic() {
			p.rt.routes[i] = &routeState{route: r} // no table or plan until routeFor resolves a topic
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
		var maxLatency time.Duration
		for _, r := range g.routes {
			if r.MaxLatency > 0 && (maxLatency == 0 || r.MaxLatency < maxLatency) {
				maxLatency = r.MaxLatency
			}
		}
		ts := p.newTable(chtable.NewTable(g.db, g.name, schema, insert), key, maxLatency)
		for j, r := range g.routes {
			plan, err := p.compile(r, insert)
			if err != nil {
				return fmt.Errorf("routes[%d] (table %s): %w", g.idx[j], key, err)
			}
			if ts.plan == nil {
				ts.plan = plan
			}
			p.rt.routes[g.idx[j]] = &routeState{route: r, plan: plan, table: ts}
		}
		p.rt.addTable(key, ts)
	}
	return nil
}

// compile builds route r's plan for the table's insert columns, with the
// errors.on_missing / on_null / on_tombstone policy.
func (p *Pipeline) compile(r config.Route, insert []chschema.ColumnSchema) (*decode.Plan, error) {
	plan, err := decode.Compile(r.Format, insert, r.Mapping(), decode.WithRegistry(p.planRegistry()), decode.WithMessage(r.Message))
	if err != nil {
		return nil, err
	}
	e := p.cfg.Errors
	plan.SetPolicy(decode.Policy{
		MissingBad:   e.OnMissing == "bad_record",
		NullBad:      e.OnNull == "bad_record",
		TombstoneBad: e.OnTombstone == "bad_record",
		Unmapped:     r.Schema.Permits,
	})
	return plan, nil
}

// routeFor returns the first route of topic's records (nil: no route
// names the topic), as config.RouteFor says, whatever its when: says:
// exactly-once recovery, which refuses fan-out routing, and sink check use
// it. The per-record choice is routesFor plus the routes' conditions.
func (p *Pipeline) routeFor(ctx context.Context, topic string) (*routeState, error) {
	rs, err := p.routesFor(ctx, topic)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	return rs[0], nil
}

// routesFor returns, in configuration order, the routes whose topic matches
// topic: the candidates whose when: a record of the topic is tested
// against (none: skip the topic's records). A route whose table is named
// after the topic is resolved for the topic here, the first time
// (resolveTopic); its error is fatal.
func (p *Pipeline) routesFor(ctx context.Context, topic string) ([]*routeState, error) {
	if rs, ok := p.rt.known(topic); ok {
		return rs, nil
	}
	var found []*routeState
	for _, rs := range p.rt.routes {
		if !rs.route.Matches(topic) {
			continue
		}
		if rs.table == nil {
			var err error
			if rs, err = p.resolveTopic(ctx, rs, topic); err != nil {
				return nil, err
			}
		}
		found = append(found, rs)
		if !p.rt.fanout {
			break // without when: or fanout: all, the first route takes every record
		}
	}
	p.rt.remember(topic, found) // nil is cached too: such records are skipped
	return found, nil
}

// resolveTopic resolves, for one topic, a route whose table is named after
// the topic (config.Route.TableFromTopic: one route for every table of a
// Debezium server): it describes the table the first time any topic needs
// it, compiles the route's plan against it, and returns the topic's own
// routeState. It runs on the owner goroutine, once per new topic, so a slow
// system.columns query holds the loop at most clickhouse.query_timeout. A
// missing table, or one the mapping cannot fill, is an error naming the
// route, the topic and the table; the caller stops the connector before the
// topic's first record, so nothing of it is committed.
func (p *Pipeline) resolveTopic(ctx context.Context, rs *routeState, topic string) (*routeState, error) {
	idx := slices.Index(p.rt.routes, rs)
	db, name, err := p.cfg.TableForTopic(rs.route, topic)
	if err != nil {
		return nil, fmt.Errorf("routes[%d]: %w", idx, err)
	}
	key := db + "." + name
	mapping := rs.route.Mapping()
	ts := p.rt.table(key)
	if ts == nil {
		dctx, cancel := context.WithTimeout(ctx, p.cfg.ClickHouse.QueryTimeout)
		defer cancel()
		schema, err := p.w.Describe(dctx, db, name)
		if err != nil {
			return nil, fmt.Errorf("routes[%d] (table %q for topic %q): %w", idx, rs.route.Table, topic, err)
		}
		insert := decode.InsertColumns(schema, mapping)
		ts = p.newTable(chtable.NewTable(db, name, schema, insert), key, rs.route.MaxLatency)
	} else {
		p.tighten(ts, rs.route.MaxLatency)
	}
	// A table another route already resolved keeps its INSERT columns, so
	// that all its plans share one block layout.
	plan, err := p.compile(rs.route, ts.t.Insert)
	if err != nil {
		return nil, fmt.Errorf("routes[%d] (table %s for topic %q): %w", idx, key, topic, err)
	}
	if ts.plan == nil {
		ts.plan = plan
		p.rt.addTable(key, ts)
	}
	p.log.Info().Str("topic", topic).Str("table", key).Int("route", idx).Msg("table resolved for topic")
	return &routeState{route: rs.route, plan: plan, table: ts}, nil
}

// allRoutes is every compiled route: the configured ones and those resolved
// per topic (a table named after its topic).
func (r *routing) allRoutes() []*routeState {
	out := make([]*routeState, 0, len(r.routes)+len(r.byTopic))
	for _, rs := range r.routes {
		if rs != nil && rs.table != nil {
			out = append(out, rs)
		}
	}
	for _, list := range r.byTopic {
		for _, rs := range list {
			if rs.table != nil && !slices.Contains(out, rs) {
				out = append(out, rs)
			}
		}
	}
	return out
}

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

// Tables describes the resolved routes for `sink check`.
func (p *Pipeline) Tables() []*chtable.Table {
	out := make([]*chtable.Table, 0, len(p.tables))
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
		for _, rs := range p.byTopic[t] {
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
			p.routes[g.idx[j]] = &routeState{route: r, plan: plan, table: ts}
		}
		p.tables[key] = ts
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
	if p.lastOK && topic == p.lastTopic {
		return p.lastRoutes, nil
	}
	if rs, ok := p.byTopic[topic]; ok {
		p.lastTopic, p.lastRoutes, p.lastOK = topic, rs, true
		return rs, nil
	}
	var found []*routeState
	for _, rs := range p.routes {
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
		if !p.fanout {
			break // without when: or fanout: all, the first route takes every record
		}
	}
	p.byTopic[topic] = found // nil is cached too: such records are skipped
	p.lastTopic, p.lastRoutes, p.lastOK = topic, found, true
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
	idx := slices.Index(p.routes, rs)
	db, name, err := p.cfg.TableForTopic(rs.route, topic)
	if err != nil {
		return nil, fmt.Errorf("routes[%d]: %w", idx, err)
	}
	key := db + "." + name
	mapping := rs.route.Mapping()
	ts := p.tables[key]
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
		p.tables[key] = ts
	}
	p.log.Info().Str("topic", topic).Str("table", key).Int("route", idx).Msg("table resolved for topic")
	return &routeState{route: rs.route, plan: plan, table: ts}, nil
}

// allRoutes is every compiled route: the configured ones and those resolved
// per topic (a table named after its topic).
func (p *Pipeline) allRoutes() []*routeState {
	out := make([]*routeState, 0, len(p.routes)+len(p.byTopic))
	for _, rs := range p.routes {
		if rs != nil && rs.table != nil {
			out = append(out, rs)
		}
	}
	for _, list := range p.byTopic {
		for _, rs := range list {
			if rs.table != nil && !slices.Contains(out, rs) {
				out = append(out, rs)
			}
		}
	}
	return out
}

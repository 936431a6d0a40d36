package pipeline

import (
	"context"
	"fmt"
	"slices"

	"sink/internal/decode"
	"sink/internal/writer"
)

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
		ts = &tableState{t: writer.NewTable(db, name, schema, insert), m: p.m.Table(key)}
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

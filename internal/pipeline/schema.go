package pipeline

import (
	"context"
	"fmt"
	"slices"

	"sink/internal/batch"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
)

// Tables change while the sink runs. Each table is described again every
// clickhouse.schema_refresh (describeTables) and whenever an INSERT fails
// with an unknown column or table (the insert goroutine's refresh, which
// also adapts its own batch with chtable.Project). The owner applies a new
// description with applySchema: it recompiles every route into the table,
// seals the open batches built for the old columns, and decodes the records
// that follow against the new columns. So a column added to the table is
// filled from the records that carry it from then on, and a dropped column
// stops being sent; sealed batches keep their layout and are adapted only if
// the server refuses them, so no row is lost and none is inserted twice (a
// refused INSERT writes nothing).

// schemaResult is a table's description, read off the owner goroutine.
type schemaResult struct {
	ts   *tableState
	cols []chschema.ColumnSchema
	err  error
	// evolve, when set, says the description follows an ADD COLUMN
	// (evolve.go), whose outcome it carries.
	evolve *evolveResult
}

// describeTables starts a description of every table that is not already
// being described; the results come back on p.schemas.
func (p *Pipeline) describeTables(ctx context.Context) {
	p.rt.eachTable(func(ts *tableState) { p.describeTable(ctx, ts) })
}

// describeTable starts a description of ts unless one is running.
func (p *Pipeline) describeTable(ctx context.Context, ts *tableState) {
	if ts.describing {
		return
	}
	ts.describing = true
	db, name := ts.t.Database, ts.t.Name
	p.spawn(func() {
		dctx, cancel := context.WithTimeout(ctx, p.cfg.ClickHouse.QueryTimeout)
		defer cancel()
		cols, err := p.w.Describe(dctx, db, name)
		p.sendSchema(schemaResult{ts: ts, cols: cols, err: err})
	})
}

func (p *Pipeline) sendSchema(r schemaResult) {
	select {
	case p.schemas <- r:
	case <-p.stopped:
	}
}

// refreshFor is the chtable.Refresh of an INSERT into ts: it re-reads the
// table, hands the description to the owner for the batches to come, and
// returns the failed batch adapted to the table's columns now.
func (p *Pipeline) refreshFor(ts *tableState) chtable.Refresh {
	return func(ctx context.Context, t *chtable.Table, blk chschema.Block) (*chtable.Table, chschema.Block, error) {
		cols, err := p.w.Describe(ctx, t.Database, t.Name)
		if err != nil {
			return nil, nil, err
		}
		p.sendSchema(schemaResult{ts: ts, cols: cols})
		nt, nb := chtable.Project(t.Database, t.Name, cols, blk)
		p.log.Warn().Str("table", t.FullName()).Strs("columns_before", names(t.Insert)).Strs("columns_now", names(nt.Insert)).
			Msg("table changed under a sealed batch: retrying it with the columns the table has now")
		return nt, nb, nil
	}
}

// handleSchema applies a description that came back from describeTables or
// an insert's refresh.
func (p *Pipeline) handleSchema(writeCtx context.Context, r schemaResult) {
	if r.evolve != nil {
		p.evolved(writeCtx, r)
		return
	}
	// Records held for this read (evolve.go) go on: with a new column if
	// the table got one.
	p.rereadDone(r.ts)
	if r.err == nil {
		p.applySchema(writeCtx, r.ts, r.cols)
		r.ts.describing = false
		return
	}
	r.ts.describing = false
	// A failed periodic read changes nothing: the INSERTs themselves say
	// when the table is gone.
	p.log.Warn().Err(r.err).Str("table", r.ts.t.FullName()).Msg("re-reading the table's columns failed; keeping the ones known")
}

// rereadDone ends the waits for a re-read of ts (evolve.go) and lets the
// held records go on.
func (p *Pipeline) rereadDone(ts *tableState) {
	if ts.drift != nil {
		for _, fd := range ts.drift.fields {
			fd.rereading = false
		}
	}
	p.kickHeld()
}

// applySchema switches ts to schema if its columns changed: every route
// into ts is compiled again (a mapping the table can no longer satisfy
// stops the connector with one line), the open batches are sealed with the
// old layout, and the next records are decoded with the new one.
func (p *Pipeline) applySchema(writeCtx context.Context, ts *tableState, schema []chschema.ColumnSchema) {
	if slices.Equal(schema, ts.t.Schema) || p.fatal != nil {
		return
	}
	var routes []*routeState
	var mappings []map[string]string
	for _, rs := range p.rt.allRoutes() {
		if rs.table == ts {
			routes = append(routes, rs)
			mappings = append(mappings, rs.route.Mapping())
		}
	}
	insert := decode.InsertColumns(schema, mappings...)
	plans := make([]*decode.Plan, len(routes))
	for i, rs := range routes {
		plan, err := p.compile(rs.route, insert)
		if err != nil {
			p.fatal = fmt.Errorf("table %s changed while running and a route into it no longer fits: %w (stopping; fix the table or the route)", ts.t.FullName(), err)
			return
		}
		plans[i] = plan
	}
	dlqPlan, err := p.dlqReplan(ts, insert) // nil unless ts is a dead-letter table
	if err != nil {
		p.fatal = err
		return
	}
	old := ts.t
	// The open batches were decoded for the old columns: insert them as
	// they are (with the old table, see flight.tab) and start new ones.
	p.disp.eachOpenOf(ts, func(a *accState) {
		p.seal(writeCtx, a, batch.ReasonSchema)
		p.dropAcc(a.key)
	})
	ts.t = chtable.NewTable(old.Database, old.Name, schema, insert)
	p.noteUnfilled(ts.t)
	ts.free = nil
	for i, rs := range routes {
		rs.plan = plans[i]
	}
	if len(plans) > 0 {
		ts.plan = plans[0]
	} else if dlqPlan != nil {
		ts.plan = dlqPlan
	}
	if ts.drift != nil {
		for _, fd := range ts.drift.fields {
			fd.known = false // look again: the table may have a column for it now
		}
		ts.drift.epoch++
	}
	added, dropped := diff(names(old.Insert), names(insert))
	p.log.Info().Str("table", ts.t.FullName()).Strs("added", added).Strs("dropped", dropped).Int("columns", len(insert)).
		Msg("table columns changed: records from now on are decoded for the new columns")
}

// noteUnfilled logs, once per table, column and reason, each DEFAULT
// column of t that the INSERT leaves out because its expression cannot be
// computed once (decode.UnfilledDefault): records' values for it are not
// inserted, the server computes it for every row.
func (p *Pipeline) noteUnfilled(t *chtable.Table) {
	decode.UnfilledDefaults(t.Schema, t.Insert, func(c chschema.ColumnSchema, why string) {
		key := t.FullName() + "\x00" + c.Name
		if p.unfilled[key] == why {
			return
		}
		if p.unfilled == nil {
			p.unfilled = map[string]string{}
		}
		p.unfilled[key] = why
		p.log.Warn().Str("table", t.FullName()).Str("column", c.Name).Str("default", c.DefaultExpr).Str("why", why).
			Msg("records' values for this DEFAULT column are not inserted: the INSERT leaves it out and the server computes it for every row (map it in the route's columns to insert record values, with the type's zero for a missing one)")
	})
}

func names(cols []chschema.ColumnSchema) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name + " " + c.Type
	}
	return out
}

// diff returns what is in after but not in before, and the reverse.
func diff(before, after []string) (added, dropped []string) {
	for _, a := range after {
		if !slices.Contains(before, a) {
			added = append(added, a)
		}
	}
	for _, b := range before {
		if !slices.Contains(after, b) {
			dropped = append(dropped, b)
		}
	}
	return added, dropped
}

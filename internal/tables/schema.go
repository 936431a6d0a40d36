package tables

import (
	"context"
	"fmt"
	"slices"

	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
)

// Tables change while the sink runs. Each table is described again every
// clickhouse.schema_refresh (DescribeAll) and whenever an INSERT fails
// with an unknown column or table (the insert goroutine's Refresh, which
// also adapts its own batch with chtable.Project). The owner applies a new
// description with apply: it recompiles every route into the table, has
// the open batches built for the old columns sealed (Owner.Reshape), and
// the records that follow are decoded against the new columns. So a
// column added to the table is filled from the records that carry it from
// then on, and a dropped column stops being sent; sealed batches keep
// their layout and are adapted only if the server refuses them, so no row
// is lost and none is inserted twice (a refused INSERT writes nothing).

// Result is a table's description, read off the owner goroutine; Handle
// applies it.
type Result struct {
	ts   *Table
	cols []chschema.ColumnSchema
	err  error
	// evolve, when set, says the description follows an ADD COLUMN
	// (evolve.go), whose outcome it carries.
	evolve *evolveResult
}

// DescribeAll starts a description of every table that is not already
// being described; the results come back through Owner.Described.
func (c *Catalog) DescribeAll(ctx context.Context) {
	for _, ts := range c.tables {
		c.describe(ctx, ts)
	}
}

// describe starts a description of ts unless one is running.
func (c *Catalog) describe(ctx context.Context, ts *Table) {
	if ts.describing {
		return
	}
	ts.describing = true
	db, name := ts.t.Database, ts.t.Name
	c.own.Spawn(func() {
		dctx, cancel := context.WithTimeout(ctx, c.cfg.ClickHouse.QueryTimeout)
		defer cancel()
		cols, err := c.sink.Describe(dctx, db, name)
		c.own.Described(Result{ts: ts, cols: cols, err: err})
	})
}

// Refresh is the chtable.Refresh of an INSERT into ts: it re-reads the
// table, hands the description to the owner for the batches to come, and
// returns the failed batch adapted to the table's columns now. It runs on
// the INSERT's goroutine.
func (c *Catalog) Refresh(ts *Table) chtable.Refresh {
	return func(ctx context.Context, t *chtable.Table, blk chschema.Block) (*chtable.Table, chschema.Block, error) {
		cols, err := c.sink.Describe(ctx, t.Database, t.Name)
		if err != nil {
			return nil, nil, err
		}
		c.own.Described(Result{ts: ts, cols: cols})
		nt, nb := chtable.Project(t.Database, t.Name, cols, blk)
		c.log.Warn().Str("table", t.FullName()).Strs("columns_before", names(t.Insert)).Strs("columns_now", names(nt.Insert)).
			Msg("table changed under a sealed batch: retrying it with the columns the table has now")
		return nt, nb, nil
	}
}

// Handle applies a description that came back from DescribeAll, an
// insert's Refresh or an ALTER (evolve.go). The records held for the
// table (a column being added, a re-read) may go on afterwards: the caller
// tries them again. An error stops the connector: a route that no longer
// fits the table.
func (c *Catalog) Handle(writeCtx context.Context, r Result) error {
	if r.evolve != nil {
		return c.evo.evolved(writeCtx, r)
	}
	// Records held for this read (evolve.go) go on: with a new column if
	// the table got one.
	c.rereadDone(r.ts)
	r.ts.describing = false
	if r.err != nil {
		// A failed periodic read changes nothing: the INSERTs themselves
		// say when the table is gone.
		c.log.Warn().Err(r.err).Str("table", r.ts.t.FullName()).Msg("re-reading the table's columns failed; keeping the ones known")
		return nil
	}
	return c.apply(writeCtx, r.ts, r.cols)
}

// rereadDone ends the waits for a re-read of ts (evolve.go).
func (c *Catalog) rereadDone(ts *Table) {
	if ts.drift != nil {
		for _, fd := range ts.drift.fields {
			fd.rereading = false
		}
	}
}

// apply switches ts to schema if its columns changed: every route into ts
// is compiled again (a mapping the table can no longer satisfy stops the
// connector with one line), the open batches are sealed with the old
// layout (Owner.Reshape), and the next records are decoded with the new
// one.
func (c *Catalog) apply(writeCtx context.Context, ts *Table, schema []chschema.ColumnSchema) error {
	if slices.Equal(schema, ts.t.Schema) || c.own.Stopping() {
		return nil
	}
	routes := c.RoutesInto(ts)
	var mappings []map[string]string
	for _, rs := range routes {
		mappings = append(mappings, rs.cfg.Mapping())
	}
	insert := decode.InsertColumns(schema, mappings...)
	plans := make([]*decode.Plan, len(routes))
	for i, rs := range routes {
		plan, err := c.Compile(rs.cfg, insert)
		if err != nil {
			return fmt.Errorf("table %s changed while running and a route into it no longer fits: %w (stopping; fix the table or the route)", ts.t.FullName(), err)
		}
		plans[i] = plan
	}
	dlqPlan, err := c.dead.plan(ts, insert) // nil unless ts is a dead-letter table
	if err != nil {
		return err
	}
	old := ts.t
	// The open batches were decoded for the old columns: they are inserted
	// as they are (with the old table) and new ones start.
	c.own.Reshape(writeCtx, ts)
	ts.t = chtable.NewTable(old.Database, old.Name, schema, insert)
	c.noteUnfilled(ts.t)
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
	c.log.Info().Str("table", ts.t.FullName()).Strs("added", added).Strs("dropped", dropped).Int("columns", len(insert)).
		Msg("table columns changed: records from now on are decoded for the new columns")
	return nil
}

// NoteUnfilled logs, once per table, column and reason, each DEFAULT
// column of t that the INSERT leaves out because its expression cannot be
// computed once (decode.UnfilledDefault): records' values for it are not
// inserted, the server computes it for every row.
func (c *Catalog) noteUnfilled(t *chtable.Table) {
	decode.UnfilledDefaults(t.Schema, t.Insert, func(col chschema.ColumnSchema, why string) {
		key := t.FullName() + "\x00" + col.Name
		if c.unfilled[key] == why {
			return
		}
		if c.unfilled == nil {
			c.unfilled = map[string]string{}
		}
		c.unfilled[key] = why
		c.log.Warn().Str("table", t.FullName()).Str("column", col.Name).Str("default", col.DefaultExpr).Str("why", why).
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

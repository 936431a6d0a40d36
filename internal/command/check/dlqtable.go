package check

import (
	"context"
	"fmt"
	"io"

	"sink/config"
	"sink/internal/pipeline"
	"sink/internal/tables"
)

// dlqTables prints each dead-letter table (errors.dlq_table, routes'
// dlq_table): the columns run inserts when it exists (New has described it
// and compiled its plan, so a table the rows cannot go into has failed by
// now), or the statements run would create it with (a dry run, as for
// schema.create).
func dlqTables(ctx context.Context, cfg *config.Config, w tables.Creator, p *pipeline.Pipeline, stdout io.Writer) error {
	plans, err := tables.PlanDLQTables(ctx, cfg, w)
	if err != nil {
		return err
	}
	for _, pl := range plans {
		if !pl.Exists {
			fmt.Fprintf(stdout, "dead-letter table %s does not exist; run would create it with:\n", pl.Table)
			for _, q := range pl.DDL {
				fmt.Fprintf(stdout, "dead-letter table:   %s\n", q)
			}
			continue
		}
		ts := p.Catalog().Table(pl.Table)
		if ts == nil {
			continue
		}
		t := ts.Target()
		fmt.Fprintf(stdout, "dead-letter table %s: INSERT names %d of %d columns: %s\n",
			pl.Table, len(t.Insert), len(t.Schema), insertColumns(t))
	}
	return nil
}

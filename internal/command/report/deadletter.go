package report

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/chschema"
)

// DeadLettered is how many records meant for the report's table one
// dead-letter table (errors.dlq_table) got in the report's window: each
// record once, however often a crash made the sink write it.
type DeadLettered struct {
	DLQTable string `json:"dlq_table"`
	Records  uint64 `json:"records"`
}

// deadLettered counts, in each of o.DeadLetters, the records meant for
// o.Target dead-lettered between o.Since and o.Until. A dead-letter table
// that cannot be read is said in a note, not an error: the report is
// about the inserts.
func deadLettered(ctx context.Context, conn driver.Conn, o Options) (out []DeadLettered, notes []string) {
	for _, d := range o.DeadLetters {
		var n uint64
		q := "SELECT uniqExact(_topic, _partition, _offset) FROM " + chschema.QuoteIdent(d.Database) + "." + chschema.QuoteIdent(d.Table) +
			" WHERE target_table = ? AND dead_lettered_at >= ? AND dead_lettered_at < ?"
		if err := conn.QueryRow(ctx, q, o.Target.FullName(), o.Since.UTC().Truncate(time.Second), o.Until.UTC().Add(time.Second).Truncate(time.Second)).Scan(&n); err != nil {
			notes = append(notes, fmt.Sprintf("dead-letter table %s: not read: %v", d.FullName(), err))
			continue
		}
		out = append(out, DeadLettered{DLQTable: d.FullName(), Records: n})
		notes = append(notes, fmt.Sprintf("dead-lettered: %d records meant for %s are in %s for this window", n, o.Target.FullName(), d.FullName()))
	}
	return out, notes
}

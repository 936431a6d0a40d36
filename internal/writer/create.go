package writer

import (
	"context"
	"fmt"

	"sink/internal/chtable"
)

// CreateTable runs the statements of chtable.CreateTableDDL(s) unless db.table
// exists, and reports whether it ran them. Several sinks may start at once
// and race to create the same table: IF NOT EXISTS makes every one of
// them succeed and leaves the first one's table, which each then reads
// back like any other table (the caller's Describe).
func (w *Writer) CreateTable(ctx context.Context, s TableSpec) (ddl []string, created bool, err error) {
	if exists, err := w.TableExists(ctx, s.Database, s.Table); err != nil || exists {
		return nil, false, err
	}
	ddl, err = chtable.CreateTableDDL(s)
	if err != nil {
		return nil, false, err
	}
	for _, q := range ddl {
		if err := w.conn.Exec(ctx, q); err != nil {
			return ddl, false, fmt.Errorf("clickhouse: %s: %w", q, err)
		}
	}
	return ddl, true, nil
}

// TableExists reports whether db.table exists.
func (w *Writer) TableExists(ctx context.Context, db, table string) (bool, error) {
	var n uint64
	if err := w.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&n); err != nil {
		return false, fmt.Errorf("clickhouse: looking up %s.%s: %w", db, table, err)
	}
	return n > 0, nil
}

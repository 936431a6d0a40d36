package writer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sink/internal/chschema"
)

// The DDL the running sink issues on its own: schema evolution's ALTER
// TABLE … ADD COLUMN, which only ever adds a column, and the TRUNCATE TABLE
// of a CDC route with truncate: apply. (schema.create's CREATE TABLE is in
// create.go.)

// Features probes the server (Probe) on the writer's connection.
func (w *Writer) Features(ctx context.Context) (chschema.ServerInfo, error) {
	return Probe(ctx, w.conn)
}

// AddColumnDDL is the statement that adds column name of type typ to
// db.table, ON CLUSTER cluster when cluster is set, with IF NOT EXISTS when
// ifNotExists. Every name is quoted; typ comes from
// decode.FieldType.Column, never from a record.
func AddColumnDDL(db, table, cluster, name, typ string, ifNotExists bool) string {
	var b strings.Builder
	b.WriteString("ALTER TABLE ")
	b.WriteString(chschema.QuoteIdent(db))
	b.WriteByte('.')
	b.WriteString(chschema.QuoteIdent(table))
	if cluster != "" {
		b.WriteString(" ON CLUSTER ")
		b.WriteString(chschema.QuoteIdent(cluster))
	}
	b.WriteString(" ADD COLUMN ")
	if ifNotExists {
		b.WriteString("IF NOT EXISTS ")
	}
	b.WriteString(chschema.QuoteIdent(name))
	b.WriteByte(' ')
	b.WriteString(typ)
	return b.String()
}

// Exception codes of an ADD COLUMN that lost a race: 44 ILLEGAL_COLUMN
// (18.16) and 15 DUPLICATE_COLUMN (current servers), "column with this name
// already exists".
var columnExistsCodes = []int32{15, 44}

// AddColumn adds column name of type typ to db.table, unless the table
// already has a column of that name (then added is false and the existing
// column is left as it is, whatever its type). Several sink instances may
// race to add the same column: the check before the ALTER, IF NOT EXISTS
// where the server has it, and treating "already exists" as success when
// the column is then there, make every racer succeed and leave one column.
// It returns the statement it ran ("" when the column was there before).
func (w *Writer) AddColumn(ctx context.Context, info chschema.ServerInfo, db, table, cluster, name, typ string) (ddl string, added bool, err error) {
	has := func() (bool, error) {
		cols, err := w.Describe(ctx, db, table)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(cols, func(c chschema.ColumnSchema) bool { return c.Name == name }), nil
	}
	if ok, err := has(); err != nil || ok {
		return "", false, err
	}
	if err := checkColumnName(name); err != nil {
		return "", false, err
	}
	ddl = AddColumnDDL(db, table, cluster, name, typ, info.AddIfNotExists())
	if err := w.conn.Exec(ctx, ddl); err != nil {
		if slices.Contains(columnExistsCodes, Code(err)) {
			if ok, herr := has(); herr == nil && ok {
				return ddl, false, nil // another instance added it first
			}
		}
		return ddl, false, fmt.Errorf("clickhouse: %s: %w", ddl, err)
	}
	return ddl, true, nil
}

// TruncateDDL is the statement that empties db.table, ON CLUSTER cluster
// when cluster is set. Every name is quoted.
func TruncateDDL(db, table, cluster string) string {
	s := "TRUNCATE TABLE " + chschema.QuoteIdent(db) + "." + chschema.QuoteIdent(table)
	if cluster != "" {
		s += " ON CLUSTER " + chschema.QuoteIdent(cluster)
	}
	return s
}

// Truncate runs TruncateDDL for a TRUNCATE event of a CDC route (its
// truncate: apply) and returns the statement.
func (w *Writer) Truncate(ctx context.Context, db, table, cluster string) (string, error) {
	ddl := TruncateDDL(db, table, cluster)
	if err := w.conn.Exec(ctx, ddl); err != nil {
		return ddl, fmt.Errorf("clickhouse: %s: %w", ddl, err)
	}
	return ddl, nil
}

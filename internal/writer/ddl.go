package writer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sink/internal/decode"
)

// Schema evolution's one statement: ALTER TABLE … ADD COLUMN. It is the only
// DDL the sink runs, and it only ever adds a column.

// EvolveTypes is what a server offers for inferred column types
// (decode.FieldType.Column, decode.SchemaType.Column): Bool since 21.12,
// DateTime64 since 20.1, the JSON type when Probe found it, Date32 since
// 21.9, Map since 21.8 (no longer experimental).
func (i ServerInfo) EvolveTypes() decode.ServerTypes {
	return decode.ServerTypes{
		Bool:       i.Version.AtLeast(21, 12),
		DateTime64: i.Version.AtLeast(20, 1),
		JSON:       i.JSONType,
		Date32:     i.Version.AtLeast(21, 9),
		Map:        i.Version.AtLeast(21, 8),
	}
}

// Features probes the server (Probe) on the writer's connection.
func (w *Writer) Features(ctx context.Context) (ServerInfo, error) { return Probe(ctx, w.conn) }

// AddIfNotExists reports whether the server takes ADD COLUMN IF NOT EXISTS
// (18.16 does not: a syntax error).
func (i ServerInfo) AddIfNotExists() bool { return i.Version.AtLeast(20, 1) }

// AddColumnDDL is the statement that adds column name of type typ to
// db.table, ON CLUSTER cluster when cluster is set, with IF NOT EXISTS when
// ifNotExists. Every name is quoted; typ comes from
// decode.FieldType.Column, never from a record.
func AddColumnDDL(db, table, cluster, name, typ string, ifNotExists bool) string {
	var b strings.Builder
	b.WriteString("ALTER TABLE ")
	b.WriteString(QuoteIdent(db))
	b.WriteByte('.')
	b.WriteString(QuoteIdent(table))
	if cluster != "" {
		b.WriteString(" ON CLUSTER ")
		b.WriteString(QuoteIdent(cluster))
	}
	b.WriteString(" ADD COLUMN ")
	if ifNotExists {
		b.WriteString("IF NOT EXISTS ")
	}
	b.WriteString(QuoteIdent(name))
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
func (w *Writer) AddColumn(ctx context.Context, info ServerInfo, db, table, cluster, name, typ string) (ddl string, added bool, err error) {
	has := func() (bool, error) {
		cols, err := w.Describe(ctx, db, table)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(cols, func(c decode.ColumnSchema) bool { return c.Name == name }), nil
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

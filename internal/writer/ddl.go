package writer

import (
	"context"
	"fmt"
	"slices"

	"sink/internal/chschema"
	"sink/internal/chtable"
)

// The DDL the running sink issues on its own: schema evolution's ALTER
// TABLE … ADD COLUMN, which only ever adds a column, and the TRUNCATE TABLE
// of a CDC route with truncate: apply. (schema.create's CREATE TABLE is in
// create.go.)

// Features probes the server (Probe) on the writer's connection.
func (w *Writer) Features(ctx context.Context) (chschema.ServerInfo, error) {
	return Probe(ctx, w.conn)
}

// noDistributedDDLCodes are the answers of a server that cannot run ON
// CLUSTER DDL at all, so nothing of it ran anywhere: clickhouse-local (and so
// chdb) refuses it ("Replicated DDL queries are disabled", 392), a server
// without <distributed_ddl> in its config answers 139.
var noDistributedDDLCodes = map[int32]string{
	139: "NO_ELEMENTS_IN_CONFIG",
	392: "QUERY_IS_PROHIBITED",
}

// NoDistributedDDL reports whether err says the server cannot run ON CLUSTER
// DDL (no Keeper, no distributed_ddl): the statement is to be run node by node.
func NoDistributedDDL(err error) bool {
	_, ok := noDistributedDDLCodes[chtable.Code(err)]
	return ok
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
	if err := chtable.CheckColumnName(name); err != nil {
		return "", false, err
	}
	ddl = chtable.AddColumnDDL(db, table, cluster, name, typ, info.AddIfNotExists())
	if err := w.conn.Exec(ctx, ddl); err != nil {
		if slices.Contains(columnExistsCodes, chtable.Code(err)) {
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

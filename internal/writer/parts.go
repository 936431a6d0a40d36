package writer

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sink/internal/adapt"
	"sink/internal/chschema"
)

// partsSettingRE finds a parts threshold in a table's SETTINGS clause
// (system.tables.engine_full), e.g. "parts_to_delay_insert = 20".
var partsSettingRE = regexp.MustCompile(`\b(parts_to_delay_insert|parts_to_throw_insert)\s*=\s*'?(\d+)`)

// Parts reads what the adaptive batching controller needs from ClickHouse
// about db.table (PartsOf for one table). Safe for concurrent use.
func (w *Writer) Parts(ctx context.Context, db, table string) (adapt.Parts, error) {
	key := TableName{Database: db, Name: table}
	m, err := w.PartsOf(ctx, []TableName{key})
	if err != nil {
		return adapt.Parts{}, err
	}
	return m[key], nil
}

// PartsOf reads, for every table of tables at once, what the adaptive
// batching controller needs: the largest count of active parts in one
// partition, and parts_to_delay_insert / parts_to_throw_insert, from the
// table's own SETTINGS when it sets them and from
// system.merge_tree_settings otherwise. Three queries on system tables
// that 18.16 and today's servers both have, with the same columns,
// however many tables: a connector writing to a hundred tables reads them
// with three queries, not three hundred. A table with no part yet has
// Active 0. Safe for concurrent use.
func (w *Writer) PartsOf(ctx context.Context, tables []TableName) (map[TableName]adapt.Parts, error) {
	out := make(map[TableName]adapt.Parts, len(tables))
	if len(tables) == 0 {
		return out, nil
	}
	fail := func(what string, err error) (map[TableName]adapt.Parts, error) {
		return nil, fmt.Errorf("clickhouse: reading %s of %d tables: %w", what, len(tables), err)
	}
	defaults, err := w.partsDefaults(ctx)
	if err != nil {
		return fail("merge_tree_settings", err)
	}
	for _, t := range tables {
		out[t] = defaults
	}
	inDBs := databasesIn(tables)
	if err := w.activeParts(ctx, inDBs, out); err != nil {
		return fail("active parts", err)
	}
	if err := w.tableThresholds(ctx, inDBs, out); err != nil {
		return fail("the tables' settings", err)
	}
	return out, nil
}

// databasesIn is the SQL list of the databases of tables, each once:
// ('db1', 'db2').
func databasesIn(tables []TableName) string {
	var dbs []string
	for _, t := range tables {
		if !slices.Contains(dbs, t.Database) {
			dbs = append(dbs, t.Database)
		}
	}
	in := make([]string, len(dbs))
	for i, db := range dbs {
		in[i] = chschema.QuoteString(db)
	}
	return "(" + strings.Join(in, ", ") + ")"
}

// partsDefaults reads the server's parts_to_delay_insert and
// parts_to_throw_insert from system.merge_tree_settings.
func (w *Writer) partsDefaults(ctx context.Context) (adapt.Parts, error) {
	var defaults adapt.Parts
	rows, err := w.conn.Query(ctx,
		"SELECT name, value FROM system.merge_tree_settings WHERE name IN ('parts_to_delay_insert', 'parts_to_throw_insert')")
	if err != nil {
		return defaults, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return defaults, err
		}
		setThreshold(&defaults, name, value)
	}
	return defaults, rows.Err()
}

// activeParts sets Active of every table of out to its largest count of
// active parts in one partition, reading system.parts of the databases
// inDBs once.
func (w *Writer) activeParts(ctx context.Context, inDBs string, out map[TableName]adapt.Parts) error {
	// count() is UInt64 on both servers.
	rows, err := w.conn.Query(ctx,
		"SELECT database, table, partition_id, count() FROM system.parts WHERE active AND database IN "+inDBs+
			" GROUP BY database, table, partition_id")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			t         TableName
			partition string
			n         uint64
		)
		if err := rows.Scan(&t.Database, &t.Name, &partition, &n); err != nil {
			return err
		}
		if p, ok := out[t]; ok && int(n) > p.Active {
			p.Active = int(n)
			out[t] = p
		}
	}
	return rows.Err()
}

// tableThresholds sets the parts thresholds of every table of out whose
// own SETTINGS clause names them, reading system.tables of the databases
// inDBs once.
func (w *Writer) tableThresholds(ctx context.Context, inDBs string, out map[TableName]adapt.Parts) error {
	rows, err := w.conn.Query(ctx, "SELECT database, name, engine_full FROM system.tables WHERE database IN "+inDBs)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			t      TableName
			engine string
		)
		if err := rows.Scan(&t.Database, &t.Name, &engine); err != nil {
			return err
		}
		p, ok := out[t]
		if !ok {
			continue
		}
		for _, m := range partsSettingRE.FindAllStringSubmatch(engine, -1) {
			setThreshold(&p, m[1], m[2])
		}
		out[t] = p
	}
	return rows.Err()
}

func setThreshold(p *adapt.Parts, name, value string) {
	n, err := strconv.Atoi(value)
	if err != nil {
		return
	}
	switch name {
	case "parts_to_delay_insert":
		p.DelayAt = n
	case "parts_to_throw_insert":
		p.ThrowAt = n
	}
}

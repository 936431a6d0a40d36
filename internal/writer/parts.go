package writer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"sink/internal/adapt"
)

// CodeTooManyParts is ClickHouse's TOO_MANY_PARTS: the partition has
// parts_to_throw_insert active parts and the INSERT was refused.
const CodeTooManyParts = 252

// partsSettingRE finds a parts threshold in a table's SETTINGS clause
// (system.tables.engine_full), e.g. "parts_to_delay_insert = 20".
var partsSettingRE = regexp.MustCompile(`\b(parts_to_delay_insert|parts_to_throw_insert)\s*=\s*'?(\d+)`)

// Parts reads what the adaptive batching controller needs from ClickHouse
// about db.table: the largest count of active parts in one partition, and
// parts_to_delay_insert / parts_to_throw_insert, from the table's own
// SETTINGS when it sets them and from system.merge_tree_settings otherwise.
// Three small queries on system tables that 18.16 and today's servers
// both have, with the same columns. Safe for concurrent use.
func (w *Writer) Parts(ctx context.Context, db, table string) (adapt.Parts, error) {
	var p adapt.Parts
	fail := func(what string, err error) (adapt.Parts, error) {
		return adapt.Parts{}, fmt.Errorf("clickhouse: reading %s of %s.%s: %w", what, db, table, err)
	}
	// uint64 on both servers (count() is UInt64).
	var active uint64
	err := w.conn.QueryRow(ctx,
		"SELECT count() AS n FROM system.parts WHERE database = ? AND table = ? AND active GROUP BY partition_id ORDER BY n DESC LIMIT 1",
		db, table).Scan(&active)
	if err != nil && !isNoRows(err) {
		return fail("active parts", err)
	}
	p.Active = int(active)

	rows, err := w.conn.Query(ctx,
		"SELECT name, value FROM system.merge_tree_settings WHERE name IN ('parts_to_delay_insert', 'parts_to_throw_insert')")
	if err != nil {
		return fail("merge_tree_settings", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return fail("merge_tree_settings", err)
		}
		setThreshold(&p, name, value)
	}
	if err := rows.Err(); err != nil {
		return fail("merge_tree_settings", err)
	}

	var engine string
	if err := w.conn.QueryRow(ctx, "SELECT engine_full FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&engine); err != nil && !isNoRows(err) {
		return fail("the table's settings", err)
	}
	for _, m := range partsSettingRE.FindAllStringSubmatch(engine, -1) {
		setThreshold(&p, m[1], m[2])
	}
	return p, nil
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

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

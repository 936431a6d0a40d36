package writer

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/chschema"
)

// ViewDedups walks the materialized views triggered by INSERTs into tables
// (system.tables.dependencies_*), and the views triggered by those views'
// target tables, and returns each with its target's deduplication. It only
// reads system tables. A view whose target cannot be found is left out.
func ViewDedups(ctx context.Context, conn driver.Conn, tables []*Table) ([]chschema.ViewDedup, error) {
	defaults, err := nameValues(ctx, conn, "SELECT name, value FROM system.merge_tree_settings WHERE name IN ('non_replicated_deduplication_window', 'replicated_deduplication_window')")
	if err != nil {
		return nil, err
	}
	type name struct{ db, table string }
	var queue []name
	seen := map[name]bool{}
	for _, t := range tables {
		n := name{t.Database, t.Name}
		if !seen[n] {
			seen[n] = true
			queue = append(queue, n)
		}
	}
	var out []chschema.ViewDedup
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		var dbs, views []string
		err := conn.QueryRow(ctx, "SELECT dependencies_database, dependencies_table FROM system.tables WHERE database = ? AND name = ?",
			from.db, from.table).Scan(&dbs, &views)
		if err != nil {
			return nil, fmt.Errorf("clickhouse: reading the views of %s.%s: %w", from.db, from.table, err)
		}
		for i := range views {
			var engine, uuid, create string
			err := conn.QueryRow(ctx, "SELECT engine, toString(uuid), create_table_query FROM system.tables WHERE database = ? AND name = ?",
				dbs[i], views[i]).Scan(&engine, &uuid, &create)
			if err != nil {
				return nil, fmt.Errorf("clickhouse: reading view %s.%s: %w", dbs[i], views[i], err)
			}
			if engine != "MaterializedView" {
				continue // a plain view stores nothing
			}
			target, ok, err := viewTarget(ctx, conn, dbs[i], views[i], uuid, create)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			var tEngine, tFull string
			err = conn.QueryRow(ctx, "SELECT engine, engine_full FROM system.tables WHERE database = ? AND name = ?",
				target.db, target.table).Scan(&tEngine, &tFull)
			if err != nil {
				return nil, fmt.Errorf("clickhouse: reading the engine of %s.%s: %w", target.db, target.table, err)
			}
			out = append(out, chschema.ViewDedup{
				View:   dbs[i] + "." + views[i],
				From:   from.db + "." + from.table,
				Target: tableDedup(target.db+"."+target.table, tEngine, tFull, defaults),
				Quoted: chschema.QuoteIdent(target.db) + "." + chschema.QuoteIdent(target.table),
			})
			if !seen[target] {
				seen[target] = true
				queue = append(queue, target)
			}
		}
	}
	return out, nil
}

// CanSetDependentDedup reports whether this user may set
// deduplicate_blocks_in_dependent_materialized_views = 1 (a readonly
// profile or a constraint forbids it): nil, or the server's refusal.
func CanSetDependentDedup(ctx context.Context, conn driver.Conn) error {
	var one uint8
	return conn.QueryRow(ctx, "SELECT 1 SETTINGS deduplicate_blocks_in_dependent_materialized_views = 1").Scan(&one)
}

// viewTarget finds the table a materialized view writes into: the one its
// TO clause names, else its implicit inner table.
func viewTarget(ctx context.Context, conn driver.Conn, db, view, uuid, create string) (struct{ db, table string }, bool, error) {
	type name = struct{ db, table string }
	if tdb, table, ok := ViewTo(create); ok {
		if tdb == "" {
			tdb = db
		}
		return name{tdb, table}, true, nil
	}
	for _, inner := range []string{".inner_id." + uuid, ".inner." + view} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", db, inner).Scan(&n); err != nil {
			return name{}, false, fmt.Errorf("clickhouse: looking for the inner table of view %s.%s: %w", db, view, err)
		}
		if n > 0 {
			return name{db, inner}, true, nil
		}
	}
	return name{}, false, nil
}

// An identifier as system.tables.create_table_query writes it: back-quoted
// (with backslash escapes) or bare.
const identRE = "(?:`(?:[^`\\\\]|\\\\.)*`|[^\\s.`(]+)"

var viewToRE = regexp.MustCompile("^CREATE MATERIALIZED VIEW (?:IF NOT EXISTS )?" + identRE + "(?:\\." + identRE + ")? TO (" + identRE + ")(?:\\.(" + identRE + "))?[\\s(]")

// ViewTo returns the table a CREATE MATERIALIZED VIEW statement's TO clause
// names (db "" when it names no database), or ok false when the view has
// no TO clause (it writes into its inner table).
func ViewTo(create string) (db, table string, ok bool) {
	m := viewToRE.FindStringSubmatch(create)
	if m == nil {
		return "", "", false
	}
	if m[2] == "" {
		return "", unquoteIdent(m[1]), true
	}
	return unquoteIdent(m[1]), unquoteIdent(m[2]), true
}

func unquoteIdent(s string) string {
	if len(s) < 2 || s[0] != '`' {
		return s
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
			if s[i] == 'x' && i+2 < len(s)-1 { // \xHH, as chschema.QuoteIdent writes control bytes
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

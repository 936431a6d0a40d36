package writer

import "testing"

// TestViewTo reads the TO clause of CREATE MATERIALIZED VIEW statements as
// system.tables.create_table_query writes them.
func TestViewTo(t *testing.T) {
	f := func(create, wantDB, wantTable string, wantOK bool) {
		t.Helper()
		db, table, ok := ViewTo(create)
		if db != wantDB || table != wantTable || ok != wantOK {
			t.Fatalf("ViewTo(%q) = %q, %q, %v; want %q, %q, %v", create, db, table, ok, wantDB, wantTable, wantOK)
		}
	}
	f("CREATE MATERIALIZED VIEW d.mv TO d.agg (`id` UInt64, `c` UInt64) AS SELECT id, count() AS c FROM d.src GROUP BY id", "d", "agg", true)
	f("CREATE MATERIALIZED VIEW `my db`.`mv` TO `my db`.`a\\`b` (`id` UInt64) AS SELECT id FROM `my db`.src", "my db", "a`b", true)
	f("CREATE MATERIALIZED VIEW mv TO agg (`id` UInt64) AS SELECT id FROM src", "", "agg", true)
	f("CREATE MATERIALIZED VIEW IF NOT EXISTS d.mv TO d.agg(`id` UInt64) AS SELECT 1", "d", "agg", true)
	f("CREATE MATERIALIZED VIEW d.`x\\x01y` TO d.`t\\x01u` (`id` UInt64) AS SELECT 1", "d", "t\x01u", true)
	// No TO: the view writes into its inner table.
	f("CREATE MATERIALIZED VIEW d.mv (`id` UInt64) ENGINE = MergeTree ORDER BY id SETTINGS index_granularity = 8192 AS SELECT id FROM d.src", "", "", false)
	// " TO " inside the SELECT is not a TO clause.
	f("CREATE MATERIALIZED VIEW d.mv (`s` String) ENGINE = MergeTree ORDER BY s AS SELECT 'a TO b' AS s FROM d.src", "", "", false)
	f("", "", "", false)
}

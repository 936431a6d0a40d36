package tables

import (
	"strings"
	"testing"
	"time"

	"sink/config"
)

// TestTableJob: a table named after a topic may not be one the config
// names for another job: errors.dlq_table, a route's dlq_table, and on a
// cluster the local table behind either; any other table passes.
func TestTableJob(t *testing.T) {
	cfg := &config.Config{
		ClickHouse: config.ClickHouse{Database: "db"},
		Errors:     config.Errors{DLQTable: "dead"},
		Routes:     []config.Route{{TopicRegex: ".*", Table: "${topic}", DLQTable: "other.route_dead"}},
	}
	c := &Catalog{cfg: cfg}
	for _, tc := range []struct {
		db, table string
		want      string // "" passes
	}{
		{"db", "dead", "is the dead-letter table"},
		{"other", "route_dead", "is the dead-letter table"},
		{"db", "orders", ""},
		{"other", "dead", ""},
		{"db", "dead_local", ""}, // not clustered: no local table
	} {
		err := c.tableJob(tc.db, tc.table, "${topic}", tc.table)
		if got := errText(err); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s.%s: %q, want %q", tc.db, tc.table, got, tc.want)
		}
	}
	cfg.ClickHouse.Cluster = "c"
	if err := c.tableJob("db", "dead_local", "${topic}", "dead_local"); !strings.Contains(errText(err), "the local table behind the dead-letter table db.dead") {
		t.Errorf("on a cluster, db.dead_local: %v; want it refused as the local table behind db.dead", err)
	}
}

// TestRecheckEvery: a topic without a table is looked up again every
// clickhouse.schema_refresh, and every 30 s when that is 0 (never on
// every record).
func TestRecheckEvery(t *testing.T) {
	c := &Catalog{cfg: &config.Config{}}
	if d := c.recheckEvery(); d != defaultRecheck {
		t.Errorf("schema_refresh 0: %s, want %s", d, defaultRecheck)
	}
	c.cfg.ClickHouse.SchemaRefresh = 5 * time.Second
	if d := c.recheckEvery(); d != 5*time.Second {
		t.Errorf("schema_refresh 5s: %s, want 5s", d)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

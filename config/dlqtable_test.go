package config

import (
	"strings"
	"testing"
)

func TestValidateDLQTable(t *testing.T) {
	all := "SINK_ERRORS__TOLERANCE=all"
	for _, tc := range []struct {
		yaml string
		env  []string
		want string // "" : valid
	}{
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=orders_dlq"}, ""},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=dl.orders_dlq", "SINK_ERRORS__DLQ_TOPIC=orders_dlq"}, ""},
		{"", []string{"SINK_ERRORS__DLQ_TABLE=orders_dlq"}, "errors.dlq_table: set, but errors.tolerance is none"},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=a.b.c"}, `errors.dlq_table: "a.b.c" must be "table" or "database.table"`},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=orders"}, "errors.dlq_table: default.orders is routes[0]'s table"},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_ERRORS__DLQ_TABLE_TTL=-1h"}, "errors.dlq_table_ttl: -1h0m0s is negative"},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_ERRORS__DLQ_TABLE_TTL=1500ms"}, "errors.dlq_table_ttl: 1.5s is not a whole number of seconds"},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_ERRORS__DLQ_TABLE_TTL=720h"}, ""},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_ERRORS__DLQ_VALUE_MAX=0"}, "errors.dlq_value_max: must be positive"},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_ERRORS__DLQ_VALUE_MAX=1GiB"}, "errors.dlq_value_max: 1073741824 bytes is more than 64MiB"},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_DELIVERY=exactly_once"}, ""},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_DELIVERY=exactly_once", "SINK_CLICKHOUSE__CLUSTER=c"}, "errors.dlq_table: not available with delivery: exactly_once on a cluster"},
		{"kafka: {topics: [orders]}\nclickhouse: {shards: [[\"a:9000\"]]}\nroutes: [{topic: orders, table: orders, dlq_table: orders_bad}]\n", []string{all, "SINK_DELIVERY=exactly_once"}, "routes[0].dlq_table: not available with delivery: exactly_once on a cluster"},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_CLICKHOUSE__CLUSTER=c"}, ""},
		{"", []string{all}, "errors.dlq_topic: required when errors.tolerance is all (or errors.dlq_table)"},
		{"", []string{all, "SINK_ERRORS__DLQ_TABLE=x", "SINK_ERRORS__UNROUTED=dlq"}, ""},
		{"", []string{"SINK_ERRORS__UNROUTED=dlq"}, "errors.unrouted: dlq needs errors.dlq_topic or errors.dlq_table"},
		{"kafka: {topics: [orders]}\nroutes: [{topic: orders, table: orders, dlq_table: \"bad table.x\"}]\n", []string{all, "SINK_ERRORS__DLQ_TOPIC=d"}, ""},
		{"kafka: {topics: [orders]}\nroutes: [{topic: orders, table: orders, dlq_table: \"a.b.c\"}]\n", []string{all, "SINK_ERRORS__DLQ_TOPIC=d"}, `routes[0].dlq_table: "a.b.c" must be`},
		{"kafka: {topics: [orders]}\nroutes: [{topic: orders, table: orders, dlq_table: orders_bad}]\n", []string{"SINK_ERRORS__DLQ_TOPIC=d"}, "routes[0].dlq_table: set, but errors.tolerance is none"},
		{"kafka: {topics: [orders, b]}\nroutes: [{topic: orders, table: orders, dlq_table: orders_bad}, {topic: b, table: b}]\n", []string{all}, "routes[1]: errors.tolerance is all but its bad records have nowhere to go"},
		{"kafka: {topics: [orders]}\nroutes: [{topic: orders, table: orders, dlq_table: orders_bad}]\n", []string{all}, ""},
	} {
		doc := tc.yaml
		if doc == "" {
			doc = base
		} else {
			doc = "name: s\n" + doc
		}
		_, err := Parse([]byte(doc), tc.env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: unexpected error: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "config: "+tc.want)):
			t.Errorf("%v: error %v, want it to contain %q", tc.env, err, tc.want)
		}
	}
}

func TestDLQTableFor(t *testing.T) {
	c := defaults()
	c.ClickHouse.Database = "an"
	c.Errors.DLQTable = "bad"
	c.Routes = []Route{{Topic: "a", Table: "a"}, {Topic: "b", Table: "b", DLQTable: "x.b_bad"}, {Topic: "c", Table: "c", DLQTable: "bad"}}
	for i, want := range []string{"an.bad", "an.bad", "x.b_bad", "an.bad"} {
		db, tb, ok := c.DLQTableFor(i - 1)
		if !ok || db+"."+tb != want {
			t.Errorf("DLQTableFor(%d) = %s.%s %v, want %s", i-1, db, tb, ok, want)
		}
	}
	if got := strings.Join(c.DLQTables(), ","); got != "an.bad,x.b_bad" {
		t.Errorf("DLQTables = %s", got)
	}
	c.Errors.DLQTable = ""
	if _, _, ok := c.DLQTableFor(0); ok {
		t.Errorf("route 0 has no dead-letter table without errors.dlq_table")
	}
}

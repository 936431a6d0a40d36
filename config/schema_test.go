package config

import (
	"strings"
	"testing"
)

func TestRouteSchemaValidation(t *testing.T) {
	const head = "name: t\nkafka: {topics: [orders]}\nschema_registry: {urls: [\"http://127.0.0.1:8081\"]}\n"
	for _, tc := range []struct {
		routes, cluster string
		want            string // "" : valid
	}{
		{`[{topic: orders, table: o, schema: {evolve: add_columns, nullable: true, allow: ["a_*", b], deny: ["a_secret"]}}]`, "", ""},
		{`[{topic: orders, table: o, schema: {evolve: none}}]`, "main", ""},
		{`[{topic: orders, table: o, schema: {evolve: add}}]`, "", `routes[0].schema.evolve: "add" is not one of none, add_columns`},
		{`[{topic: orders, table: o, format: debezium-json, schema: {evolve: add_columns}}]`, "", "routes[0].schema.evolve: add_columns does not work with format debezium-json"},
		{`[{topic: orders, table: o, format: debezium-avro, schema: {evolve: add_columns}}]`, "", "routes[0].schema.evolve: add_columns does not work with format debezium-avro"},
		{`[{topic: orders, table: o, format: avro, schema: {evolve: add_columns}}]`, "", ""},
		{`[{topic: orders, table: o, format: protobuf, schema: {evolve: add_columns}}]`, "", ""},
		{`[{topic: orders, table: o, format: json-schema, schema: {evolve: add_columns}}]`, "", ""},
		{`[{topic: orders, table: o, schema: {max_new_columns_per_hour: -1}}]`, "", "routes[0].schema.max_new_columns_per_hour (-1) must be at least 1"},
		{`[{topic: orders, table: o, schema: {allow: ["[a-"]}}]`, "", `routes[0].schema.allow: "[a-" is not a valid pattern`},
		{`[{topic: orders, table: o, schema: {deny: [""]}}]`, "", `routes[0].schema.deny: "" is not a valid pattern`},
		{`[{topic: orders, table: o}]`, "a.b", `clickhouse.cluster: "a.b" is not a valid cluster name`},
	} {
		yaml := head + "routes: " + tc.routes + "\n"
		if tc.cluster != "" {
			yaml += "clickhouse: {cluster: " + tc.cluster + "}\n"
		}
		_, err := Parse([]byte(yaml), nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.routes, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v; want %q", tc.routes, err, tc.want)
		}
	}
}

func TestRouteSchemaPermits(t *testing.T) {
	s := RouteSchema{Allow: []string{"attr_*", "price"}, Deny: []string{"attr_secret*"}}
	for field, want := range map[string]bool{
		"attr_color": true, "price": true, "attr_secret": false, "attr_secret_2": false, "other": false, "prices": false,
	} {
		if got := s.Permits(field); got != want {
			t.Errorf("Permits(%q) = %v, want %v", field, got, want)
		}
	}
	if !(RouteSchema{}).Permits("anything") {
		t.Error("no lists: every field is permitted")
	}
	if (RouteSchema{Deny: []string{"*"}}).Permits("x") {
		t.Error("deny * permits x")
	}
}

func TestRouteCreateValidation(t *testing.T) {
	const head = "name: t\nkafka: {topics: [orders]}\nschema_registry: {urls: [\"http://127.0.0.1:8081\"]}\n"
	for _, tc := range []struct {
		routes string
		want   string // "" : valid
	}{
		{`[{topic: orders, table: o, schema: {create: if_missing, order_by: id}}]`, ""},
		{`[{topic: orders, table: o, format: avro, schema: {create: if_missing, engine: MergeTree, order_by: "(a, b)", partition_by: toYYYYMM(ts), settings: {index_granularity: 1024, storage_policy: hot, x: true, y: 0.5}}}]`, ""},
		{`[{topic: orders, table: o, schema: {create: if_missing, engine: "ReplacingMergeTree(_offset)", order_by: id}}]`, ""},
		{`[{topic: orders, table: o, schema: {create: never}}]`, ""},
		{`[{topic: orders, table: o, schema: {create: if_missing}}]`, `routes[0].schema.order_by: required with create: if_missing`},
		{`[{topic: orders, table: o, schema: {create: if_missing, order_by: "  "}}]`, `routes[0].schema.order_by: required with create: if_missing`},
		{`[{topic: orders, table: o, schema: {create: yes, order_by: id}}]`, `routes[0].schema.create: "yes" is not one of never, if_missing`},
		{`[{topic: orders, table: o, schema: {create: if_missing, order_by: id, engine: Log}}]`, `routes[0].schema.engine: "Log" is not one of ReplacingMergeTree (versioned by _offset, with the Kafka columns) or MergeTree`},
		{`[{topic: orders, table: o, schema: {order_by: id}}]`, `routes[0].schema.order_by: only used with create: if_missing`},
		{`[{topic: orders, table: o, schema: {engine: MergeTree}}]`, `routes[0].schema.engine: only used with create: if_missing`},
		{`[{topic: orders, table: o, schema: {settings: {a: 1}}}]`, `routes[0].schema.settings: only used with create: if_missing`},
		{`[{topic_regex: "ord.*", table: o, schema: {create: if_missing, order_by: id}}]`, `routes[0].schema.create: if_missing needs a route with topic:`},
		{`[{topic: orders, table: "${topic}", schema: {create: if_missing, order_by: id}}]`, `routes[0].schema.create: if_missing needs a table name without placeholders ("${topic}")`},
		{`[{topic: orders, table: o, format: debezium-json, schema: {create: if_missing, order_by: id}}]`, `routes[0].schema.create: if_missing does not work with format debezium-json`},
		{`[{topic: orders, table: o, columns: {a: b}, schema: {create: if_missing, order_by: id}}]`, `routes[0].schema.create: if_missing makes a column of each top-level field of the records; it cannot be combined with columns:`},
		{`[{topic: orders, table: o, schema: {create: if_missing, order_by: "id; DROP TABLE x"}}]`, `routes[0].schema.order_by: "id; DROP TABLE x": an expression, without ';'`},
		{`[{topic: orders, table: o, schema: {create: if_missing, order_by: id, settings: {"bad name": 1}}}]`, `routes[0].schema.settings: "bad name" is not a setting name`},
		{`[{topic: orders, table: o, schema: {create: if_missing, order_by: id, settings: {a: [1, 2]}}}]`, `routes[0].schema.settings.a: [1 2] is not a number, a boolean or a string`},
	} {
		_, err := Parse([]byte(head+"routes: "+tc.routes+"\n"), nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.routes, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v; want %q", tc.routes, err, tc.want)
		}
	}
	c, err := Parse([]byte(head+"routes: [{topic: orders, table: o, schema: {create: if_missing, order_by: id}}]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Routes[0].Schema; s.Engine != EngineReplacingMergeTree || !s.Replacing() || !s.CreatesTable() {
		t.Fatalf("default engine %q (replacing %v, creates %v); want ReplacingMergeTree", s.Engine, s.Replacing(), s.CreatesTable())
	}
}

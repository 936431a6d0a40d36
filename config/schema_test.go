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

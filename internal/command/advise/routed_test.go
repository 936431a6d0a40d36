package advise

import (
	"strings"
	"testing"

	"sink/config"
)

// A route whose table is a template gets the table named after each
// topic, and the first matching route wins.
func TestRoutedResolvesTemplates(t *testing.T) {
	cur, err := config.Parse([]byte(`
name: x
kafka: {topic_regex: "srv\\..*"}
clickhouse: {database: cdc}
routes:
  - {topic: srv.inventory.orders, table: db.orders_static}
  - {topic_regex: "srv\\.inventory\\..*", table: "${topic.last}"}
  - {topic_regex: "srv\\..*", table: "never_${topic.last}"}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	tables, matched, err := Routed(cur, []string{"other", "srv.inventory.customers", "srv.inventory.orders"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"srv.inventory.customers": "cdc.customers", "srv.inventory.orders": "db.orders_static"}
	if len(tables) != len(want) || tables["srv.inventory.customers"] != want["srv.inventory.customers"] ||
		tables["srv.inventory.orders"] != want["srv.inventory.orders"] || strings.Join(matched, ",") != "srv.inventory.customers,srv.inventory.orders" {
		t.Fatalf("Routed = %v, %v; want %v for the two srv topics in order", tables, matched, want)
	}
}

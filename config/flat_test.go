package config

import (
	"strings"
	"testing"
)

// TestFlat: the config as dotted key paths and text values, every secret
// masked, lists joined, routes and maps under their index and key.
func TestFlat(t *testing.T) {
	yaml := `
name: orders-sink
kafka:
  brokers: [k1:9092, k2:9092]
  topics: [orders, refunds]
  sasl: {mechanism: SCRAM-SHA-512, username: sink}
clickhouse:
  addrs: [ch1:9000]
  database: shop
  settings: {insert_quorum: 2}
batch: {max_rows: 5000, max_latency: 2s, max_bytes: 16MiB}
schema_registry: {urls: ["http://registry:8081"], username: reg}
routes:
  - {topic: orders, table: orders, columns: {id: order.id}}
  - {topic: refunds, table: refunds}
http: {listen: "127.0.0.1:8080", admin: true}
`
	secrets := map[string]string{
		"SINK_CLICKHOUSE__PASSWORD":      "ch-hunter2",
		"SINK_KAFKA__SASL__PASSWORD":     "kafka-swordfish",
		"SINK_SCHEMA_REGISTRY__PASSWORD": "registry-opensesame",
		"SINK_HTTP__ADMIN_TOKEN":         "admin-token-0123456789",
	}
	var env []string
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	cfg, err := Parse([]byte(yaml), env)
	if err != nil {
		t.Fatal(err)
	}
	flat := cfg.Flat()
	want := map[string]string{
		"name":                              "orders-sink",
		"kafka.brokers":                     "k1:9092,k2:9092",
		"kafka.topics":                      "orders,refunds",
		"kafka.group":                       "orders-sink",
		"kafka.sasl.username":               "sink",
		"kafka.sasl.password":               "******",
		"clickhouse.password":               "******",
		"schema_registry.password":          "******",
		"http.admin_token":                  "******",
		"clickhouse.settings.insert_quorum": "2",
		"batch.max_rows":                    "5000",
		"batch.max_latency":                 "2s",
		"batch.max_bytes":                   "16MiB",
		"routes.0.topic":                    "orders",
		"routes.0.columns.id":               "order.id",
		"routes.1.table":                    "refunds",
		"kafka.topic_regex":                 "",
	}
	for k, v := range want {
		if got, ok := flat[k]; !ok || got != v {
			t.Errorf("Flat()[%q] = %q (present %v); want %q", k, got, ok, v)
		}
	}
	for k, v := range flat {
		for _, s := range secrets {
			if strings.Contains(v, s) || strings.Contains(k, s) {
				t.Fatalf("Flat()[%q] = %q reveals a secret", k, v)
			}
		}
		if strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") || strings.Contains(k, "..") {
			t.Fatalf("malformed key %q", k)
		}
	}
	// The defaults are there too, under the keys example.yaml names.
	for _, k := range []string{"delivery", "shutdown_timeout", "log.level", "errors.tolerance", "clickhouse.tls.enabled", "kafka.start_offset", "batch.buffer_memory"} {
		if flat[k] == "" {
			t.Errorf("Flat()[%q] is missing or empty", k)
		}
	}
}

package connectimport

import (
	"strings"
	"testing"

	"sink/config"
)

// TestConnectConfig: the sink's config under the official connector's keys
// where it has them, under the sink's own key paths otherwise, the
// password masked and unset keys left out.
func TestConnectConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(`
name: orders-sink
delivery: exactly_once
kafka: {brokers: [k1:9092, k2:9092], topics: [orders], fetch_min_bytes: 1MiB, fetch_max_wait: 750ms}
clickhouse: {protocol: http, addrs: ["ch.example:8123"], database: shop, username: sink}
batch: {max_rows: 5000, max_latency: 2750ms}
routes: [{topic: orders, table: orders}]
errors: {tolerance: all, dlq_topic: orders-dlq}
`), []string{"SINK_CLICKHOUSE__PASSWORD=hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	got := ConnectConfig(cfg)
	want := map[string]string{
		"name": "orders-sink", "connector.class": ConnectClass, "tasks.max": "1",
		"topics":                              "orders",
		"consumer.override.group.id":          "orders-sink",
		"consumer.override.bootstrap.servers": "k1:9092,k2:9092",
		"consumer.override.fetch.min.bytes":   "1048576",
		"consumer.override.fetch.max.wait.ms": "750",
		"hostname":                            "ch.example",
		"port":                                "8123",
		"database":                            "shop",
		"username":                            "sink",
		"password":                            "******",
		"bufferCount":                         "5000",
		"bufferFlushTime":                     "2000",
		"errors.tolerance":                    "all",
		"errors.deadletterqueue.topic.name":   "orders-dlq",
		"exactlyOnce":                         "true",
		"routes.0.table":                      "orders",
		"batch.max_bytes":                     "32MiB",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"kafka.topics", "clickhouse.addrs", "batch.max_rows", "batch.max_latency", "batch.max_wait", "delivery", "topics.regex", "kafka.topic_regex", "clickhouse.password"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %q: want it left out (mapped, or not set)", k, v)
		}
	}
	for k, v := range got {
		if strings.Contains(v, "hunter2") {
			t.Fatalf("%s reveals the password", k)
		}
	}
}

// TestConnectConfigAdaptive: adaptive batching has no flush time, so its
// latency bound stays under the sink's own key.
func TestConnectConfigAdaptive(t *testing.T) {
	cfg, err := config.Parse([]byte(`
name: a
kafka: {brokers: [k1:9092], topics: [a]}
batch: {mode: adaptive, max_latency: 40s}
routes: [{topic: a, table: a}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := ConnectConfig(cfg)
	if v, ok := got["bufferFlushTime"]; ok || got["batch.max_latency"] != "40s" || got["batch.mode"] != "adaptive" {
		t.Fatalf("bufferFlushTime %q (present %v), batch.max_latency %q; want no flush time and 40s", v, ok, got["batch.max_latency"])
	}
}

// TestConnectConfigImportsBack: every key ConnectConfig writes under the
// official connector's name is one `sink import` reads (carried, or not
// needed for a default), carried to the very key it came from, and the
// imported config has the original's values for them: the two directions
// agree on the names and the units.
func TestConnectConfigImportsBack(t *testing.T) {
	cfg, err := config.Parse([]byte(`
name: orders
kafka:
  brokers: [k1:9092]
  topics: [orders, refunds]
  client_id: orders-client
  fetch_min_bytes: 2MiB
  fetch_max_wait: 1500ms
  request_timeout: 40s
  session_timeout: 12s
  start_offset: latest
clickhouse: {protocol: http, addrs: ["ch:8123"], database: shop, username: sink, query_timeout: 45s, schema_refresh: 2m, tls: {enabled: true}}
batch: {max_rows: 7000, max_latency: 4500ms, ignore_partitions: true}
routes: [{topic: orders, table: orders}, {topic: refunds, table: refunds}]
errors: {tolerance: all, dlq_topic: orders-dlq}
delivery: exactly_once
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	exported := ConnectConfig(cfg)
	in := Connector{Name: cfg.Name, Config: map[string]string{"connector.class": SinkClass,
		"value.converter": jsonConverter, "value.converter.schemas.enable": "false"}}
	from := map[string]string{"hostname": "clickhouse.addrs", "port": "clickhouse.addrs"}
	for _, r := range exportRules {
		from[r.to] = r.from
	}
	for k, v := range exported {
		if _, ok := from[k]; ok || k == "name" {
			in.Config[k] = v
		}
	}
	res, back := convert(t, in, Options{})
	flat, backFlat := cfg.Flat(), back.Flat()
	for k := range in.Config {
		f, src := fate(res, k), from[k]
		if src == "" {
			continue
		}
		if f.Kind != Carried || !strings.Contains(f.To, src) {
			t.Errorf("%s (from %s): import says %s to %q (%s); want carried to %s", k, src, f.Kind, f.To, f.Why, src)
		}
		if backFlat[src] != flat[src] {
			t.Errorf("%s: %q after export and import, was %q", src, backFlat[src], flat[src])
		}
	}
	if len(in.Config) < len(exportRules) {
		t.Fatalf("only %d keys exported for %d rules: the config above should set every one", len(in.Config), len(exportRules))
	}
}

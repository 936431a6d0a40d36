package config

import (
	"strings"
	"testing"
	"time"
)

// Every deprecated key is still accepted, from the file and from the
// environment, is mapped onto its replacement (or kept as a lower bound when
// the sink derives the value), warns exactly once naming the replacement,
// and conflicts with a replacement set to another value.
func TestDeprecatedKeys(t *testing.T) {
	const doc = "name: x\nkafka: {topics: [a]%s}\nclickhouse: {%s}\nroutes: [{topic: a, table: t}]\n"
	type check func(*Config) bool
	f := func(kafka, clickhouse string, env []string, wantErr string, wantWarn string, ok check) {
		t.Helper()
		cfg, err := Parse([]byte(strings.Replace(strings.Replace(doc, "%s", kafka, 1), "%s", clickhouse, 1)), env)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("kafka {%s} clickhouse {%s} %v: got %v, want an error containing %q", kafka, clickhouse, env, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("kafka {%s} clickhouse {%s} %v: %v", kafka, clickhouse, env, err)
		}
		var dep []string
		for _, w := range cfg.Warnings() {
			if strings.Contains(w, "deprecated") {
				dep = append(dep, w)
			}
		}
		switch {
		case wantWarn == "" && len(dep) != 0:
			t.Fatalf("kafka {%s} clickhouse {%s} %v: deprecation warnings %q, want none", kafka, clickhouse, env, dep)
		case wantWarn != "" && (len(dep) != 1 || !strings.Contains(dep[0], wantWarn) || !strings.Contains(dep[0], DeprecatedDoc)):
			t.Fatalf("kafka {%s} clickhouse {%s} %v: deprecation warnings %q, want one containing %q and %s", kafka, clickhouse, env, dep, wantWarn, DeprecatedDoc)
		}
		if !ok(cfg) {
			t.Fatalf("kafka {%s} clickhouse {%s} %v: not mapped: settings %v, kafka %+v", kafka, clickhouse, env, cfg.ClickHouse.Settings, cfg.Kafka)
		}
	}
	quorum := func(q, timeout any) check {
		return func(c *Config) bool {
			gq, hasQ := c.ClickHouse.Settings["insert_quorum"]
			gt, hasT := c.ClickHouse.Settings["insert_quorum_timeout"]
			return hasQ == (q != nil) && hasT == (timeout != nil) && (q == nil || gq == q) && (timeout == nil || gt == timeout)
		}
	}
	fetch := func(max, part ByteSize) check {
		return func(c *Config) bool { return c.Kafka.FetchMaxBytes == max && c.Kafka.MaxPartitionFetchBytes == part }
	}

	// Neither key: no warning, nothing set.
	f("", "", nil, "", "", quorum(nil, nil))
	f("", "", nil, "", "", fetch(0, 0))
	// The replacement alone: no warning.
	f("", "settings: {insert_quorum: 2, insert_quorum_timeout: 60000}", nil, "", "", quorum(2, 60000))

	// clickhouse.insert_quorum → clickhouse.settings.insert_quorum.
	f("", "insert_quorum: 2", nil, "", "clickhouse.insert_quorum is deprecated: set clickhouse.settings.insert_quorum instead", quorum(2, nil))
	f("", "", []string{"SINK_CLICKHOUSE__INSERT_QUORUM=2"}, "", "clickhouse.insert_quorum (from SINK_CLICKHOUSE__INSERT_QUORUM) is deprecated", quorum(2, nil))
	// 0 was the server's setting: accepted, warned, nothing sent.
	f("", "insert_quorum: 0", nil, "", "clickhouse.insert_quorum is deprecated", quorum(nil, nil))
	// The file's key and the environment's are one key: one warning.
	f("", "insert_quorum: 3", []string{"SINK_CLICKHOUSE__INSERT_QUORUM=2"}, "", "clickhouse.insert_quorum (from SINK_CLICKHOUSE__INSERT_QUORUM)", quorum(2, nil))
	// Both, the same value: accepted; different values: an error naming both.
	f("", "insert_quorum: 2, settings: {insert_quorum: 2}", nil, "", "clickhouse.insert_quorum is deprecated", quorum(2, nil))
	f("", "insert_quorum: 2", []string{"SINK_CLICKHOUSE__SETTINGS__INSERT_QUORUM=2"}, "", "clickhouse.insert_quorum is deprecated", quorum("2", nil))
	f("", "insert_quorum: 2, settings: {insert_quorum: 3}", nil, "clickhouse.insert_quorum (2) and clickhouse.settings.insert_quorum (3) differ", "", nil)
	f("", "", []string{"SINK_CLICKHOUSE__INSERT_QUORUM=1", "SINK_CLICKHOUSE__SETTINGS__INSERT_QUORUM=2"}, "clickhouse.insert_quorum (1) and clickhouse.settings.insert_quorum (2) differ", "", nil)
	f("", "insert_quorum: -1", nil, "clickhouse.insert_quorum (-1) must be 0", "", nil)
	f("", "insert_quorum: two", nil, `clickhouse.insert_quorum: invalid integer "two"`, "", nil)

	// clickhouse.insert_quorum_timeout (a duration) → the setting, in ms.
	f("", "insert_quorum_timeout: 20s", nil, "", "clickhouse.insert_quorum_timeout is deprecated: set clickhouse.settings.insert_quorum_timeout instead", quorum(nil, 20000))
	f("", "", []string{"SINK_CLICKHOUSE__INSERT_QUORUM_TIMEOUT=1m"}, "", "(from SINK_CLICKHOUSE__INSERT_QUORUM_TIMEOUT) is deprecated", quorum(nil, 60000))
	f("", "insert_quorum_timeout: 0s", nil, "", "clickhouse.insert_quorum_timeout is deprecated", quorum(nil, nil))
	f("", "insert_quorum_timeout: 20s, settings: {insert_quorum_timeout: 20000}", nil, "", "clickhouse.insert_quorum_timeout is deprecated", quorum(nil, 20000))
	f("", "insert_quorum_timeout: 20s, settings: {insert_quorum_timeout: 30000}", nil, "clickhouse.insert_quorum_timeout (20s) and clickhouse.settings.insert_quorum_timeout (30000) differ", "", nil)
	f("", "insert_quorum_timeout: -1s", nil, "clickhouse.insert_quorum_timeout (-1s) must be 0", "", nil)
	f("", "insert_quorum_timeout: 5", nil, "clickhouse.insert_quorum_timeout: invalid duration 5", "", nil)

	// kafka.fetch_max_bytes and max_partition_fetch_bytes: the sink derives
	// both; a value set is kept (it lowers the derived size) and warned.
	f(", fetch_max_bytes: 16MiB", "", nil, "", "kafka.fetch_max_bytes is deprecated: the sink sizes fetches from batch.buffer_memory", fetch(16*MiB, 0))
	f("", "", []string{"SINK_KAFKA__FETCH_MAX_BYTES=1MiB"}, "", "kafka.fetch_max_bytes (from SINK_KAFKA__FETCH_MAX_BYTES) is deprecated", fetch(MiB, 0))
	f(", max_partition_fetch_bytes: 1MiB", "", nil, "", "kafka.max_partition_fetch_bytes is deprecated: the sink sizes fetches", fetch(0, MiB))
	f("", "", []string{"SINK_KAFKA__MAX_PARTITION_FETCH_BYTES=64KiB"}, "", "(from SINK_KAFKA__MAX_PARTITION_FETCH_BYTES) is deprecated", fetch(0, 64<<10))
	// The two together: still checked against each other.
	f(", fetch_max_bytes: 1MiB, max_partition_fetch_bytes: 2MiB", "", nil, "kafka.max_partition_fetch_bytes (2MiB) must be at most kafka.fetch_max_bytes (1MiB)", "", nil)
}

// Two deprecated keys give two lines, in a fixed order, and the printed
// configuration leaves out the deprecated keys nobody set.
func TestDeprecatedWarningsAndPrint(t *testing.T) {
	cfg, err := Parse([]byte("name: x\nkafka: {topics: [a], max_partition_fetch_bytes: 1MiB, fetch_max_bytes: 4MiB}\nroutes: [{topic: a, table: t}]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Warnings()
	if len(w) != 2 || !strings.HasPrefix(w[0], "kafka.fetch_max_bytes ") || !strings.HasPrefix(w[1], "kafka.max_partition_fetch_bytes ") {
		t.Fatalf("warnings %q", w)
	}
	if s := cfg.String(); !strings.Contains(s, "fetch_max_bytes: 4MiB") {
		t.Fatalf("a deprecated key that is set is not printed:\n%s", s)
	}
	cfg, err = Parse([]byte("name: x\nkafka: {topics: [a]}\nroutes: [{topic: a, table: t}]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.String(); strings.Contains(s, "fetch_max_bytes") || strings.Contains(s, "insert_quorum") {
		t.Fatalf("deprecated keys printed though unset:\n%s", s)
	}
}

// TestMaxWaitDeprecated: batch.max_wait still sets the batch's wait, with
// a warning naming batch.max_latency, and keeps the latency bound's old
// default; without it the wait follows max_latency.
func TestMaxWaitDeprecated(t *testing.T) {
	const doc = "name: t\nkafka: {topics: [a], fetch_max_wait: 200ms}\n"
	c, err := Parse([]byte(doc+"batch: {max_wait: 2s}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Warnings()
	if c.Batch.MaxWait != 2*time.Second || c.Batch.MaxLatency != 30*time.Second || len(w) != 1 ||
		!strings.Contains(w[0], "batch.max_wait is deprecated: set batch.max_latency instead") ||
		!strings.Contains(w[0], "the same wait in fixed mode is batch.max_latency: 2.2s") {
		t.Errorf("max_wait 2s: wait %v, bound %v, warnings %q", c.Batch.MaxWait, c.Batch.MaxLatency, w)
	}
	for _, tc := range []struct {
		yaml       string
		wait, last time.Duration
	}{
		{"", 5 * time.Second, 5200 * time.Millisecond},
		{"batch: {max_latency: 1m}\n", time.Minute - 200*time.Millisecond, time.Minute},
		{"batch: {mode: adaptive}\n", 30*time.Second - 200*time.Millisecond, 30 * time.Second},
	} {
		c, err := Parse([]byte(doc+tc.yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Batch.MaxWait != tc.wait || c.Batch.MaxLatency != tc.last || len(c.Warnings()) != 0 {
			t.Errorf("%q: wait %v, bound %v, warnings %q; want %v, %v, none", tc.yaml, c.Batch.MaxWait, c.Batch.MaxLatency, c.Warnings(), tc.wait, tc.last)
		}
	}
	_, err = Parse([]byte(doc+"batch: {max_latency: 150ms}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "batch.max_latency (150ms) must exceed kafka.fetch_max_wait (200ms)") {
		t.Errorf("a bound under fetch_max_wait: %v", err)
	}
}

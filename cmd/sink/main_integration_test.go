//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// TestFailFast: problems `run` would hit are reported by both `check` and
// `run` at start, with one line naming the problem, and a non-zero exit.
func TestFailFast(t *testing.T) {
	testenv.EachServer(t, testFailFast)
}

func testFailFast(t *testing.T, s testenv.Server) {
	brokers := testenv.Kafka(t)
	chAddr := s.Addr
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".agg (id UInt64, u AggregateFunction(uniq, UInt64)) ENGINE = AggregatingMergeTree ORDER BY id")
	testenv.Exec(t, ch, "CREATE TABLE "+db+".ok (id UInt64, name String) ENGINE = MergeTree ORDER BY id")
	cfg := func(brokers, table, columns string) string {
		return writeConfig(t, fmt.Sprintf(`
name: failfast
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: %s, columns: {%s}}]
http: {listen: ""}
`, brokers, topic, chAddr, db, topic, table, columns))
	}
	f := func(path, want string) {
		t.Helper()
		for _, cmd := range []string{"check", "run"} {
			code, _, errOut := sinkCmd(t, cmd, "--config", path)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(errOut, want) {
				t.Fatalf("sink %s: exit %d, stderr %q; want exit 1 and one line containing %q", cmd, code, errOut, want)
			}
		}
	}
	f(cfg(brokers[0], "missing", ""), "table "+db+".missing does not exist")
	f(cfg(brokers[0], "agg", ""), `column "u"`)
	f(cfg(brokers[0], "ok", "nosuch: id"), `"nosuch"`)
	f(cfg(brokers[0], "ok", "name: $nosuch"), `$nosuch`)
	f(cfg("127.0.0.1:1", "ok", ""), "127.0.0.1:1")

	// and a good config passes check, printing what it found
	code, out, errOut := sinkCmd(t, "check", "--config", cfg(brokers[0], "ok", ""))
	if code != 0 || !strings.Contains(out, "check: ok") || !strings.Contains(out, db+".ok") || !strings.Contains(out, "1 partitions") {
		t.Fatalf("check of a good config: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// A route whose table is named after its topic is checked against every
// topic that exists now. A missing table is a warning, not a failure (its
// topic's records will be bad records, whoever created the topic), which
// says what becomes of them: here, under errors.tolerance none, the first
// stops the connector.
func TestCheckTableFromTopic(t *testing.T) {
	testenv.EachServer(t, testCheckTableFromTopic)
}

func testCheckTableFromTopic(t *testing.T, s testenv.Server) {
	brokers := testenv.Kafka(t)
	chAddr := s.Addr
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	a := testenv.NewTopic(t, 1)
	b := testenv.NewTopic(t, 1)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".`"+a+"` (id UInt64) ENGINE = MergeTree ORDER BY id")
	path := writeConfig(t, fmt.Sprintf(`
name: fromtopic
kafka: {brokers: [%q], topics: [%q, %q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic_regex: "test_.*", table: "${topic}"}]
http: {listen: ""}
`, brokers[0], a, b, chAddr, db))
	code, out, errOut := sinkCmd(t, "check", "--config", path)
	warning := "route: warning: topic " + b + ": "
	fate := "its records will be bad records, and the first stops the connector (errors.tolerance: none)"
	if code != 0 || !strings.Contains(out, warning) || !strings.Contains(out, "table "+db+"."+b+" does not exist") ||
		!strings.Contains(out, fate) || !strings.Contains(out, db+"."+a+":") {
		t.Fatalf("check with a missing per-topic table: exit %d\nstdout %s\nstderr %s\nwant exit 0, %s's table listed and a warning for %s: %q", code, out, errOut, a, b, fate)
	}
	testenv.Exec(t, ch, "CREATE TABLE "+db+".`"+b+"` (id UInt64) ENGINE = MergeTree ORDER BY id")
	code, out, errOut = sinkCmd(t, "check", "--config", path)
	if code != 0 || !strings.Contains(out, db+"."+a+":") || !strings.Contains(out, db+"."+b+":") || strings.Contains(out, warning) {
		t.Fatalf("check with both tables: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

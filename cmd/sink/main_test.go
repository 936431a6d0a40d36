package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// sinkCmd runs the command line in-process and returns exit code and output.
func sinkCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := realMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sink.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUsage(t *testing.T) {
	f := func(args []string, wantCode int, wantIn string) {
		t.Helper()
		code, out, errOut := sinkCmd(t, args...)
		if code != wantCode || !strings.Contains(out+errOut, wantIn) {
			t.Fatalf("sink %v: exit %d, output %q; want exit %d containing %q", args, code, out+errOut, wantCode, wantIn)
		}
	}
	f(nil, 2, "Usage:")
	f([]string{"--help"}, 0, "sink check   --config FILE")
	f([]string{"version"}, 0, "sink dev")
	f([]string{"report", "--help"}, 0, "-config file")
	f([]string{"report", "-h"}, 0, "Usage: sink report --table DB.TABLE")
	f([]string{"advise", "--help"}, 0, "Usage: sink advise --config FILE")
	f([]string{"check", "--help"}, 0, "path to the connector's YAML config")
	f([]string{"report", "--nosuch"}, 2, "flag provided but not defined: -nosuch")
	f([]string{"run"}, 2, "--config FILE is required")
	f([]string{"frobnicate"}, 2, `unknown command "frobnicate"`)
	f([]string{"check", "--config", "/nonexistent/sink.yaml"}, 1, "/nonexistent/sink.yaml")
}

func TestBadConfigOneLinePerProblem(t *testing.T) {
	path := writeConfig(t, "name: x\nkafka: {topics: [a]}\nbatch: {max_row: 5}\nroutes: [{topic: a, table: t}]\n")
	code, _, errOut := sinkCmd(t, "run", "--config", path)
	if code != 1 || !strings.Contains(errOut, `"batch.max_row"`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

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

// The report never takes a password on the command line (ps would show
// it); a missing password file is one clear line.
func TestReportPasswordFile(t *testing.T) {
	code, _, errOut := sinkCmd(t, "report", "--table", "t", "--password", "secret")
	if code != 2 || !strings.Contains(errOut, "-password") {
		t.Fatalf("--password accepted: exit %d, %q", code, errOut)
	}
	code, _, errOut = sinkCmd(t, "report", "--table", "t", "--password-file", "/nonexistent/pw")
	if code != 1 || !strings.Contains(errOut, "--password-file") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("missing password file: exit %d, %q", code, errOut)
	}
}

// A route whose table is named after its topic is checked against every
// topic that exists now: a missing table fails check like a static one.
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
	code, _, errOut := sinkCmd(t, "check", "--config", path)
	if code != 1 || !strings.Contains(errOut, "table "+db+"."+b+" does not exist") {
		t.Fatalf("check with a missing per-topic table: exit %d, stderr %q", code, errOut)
	}
	testenv.Exec(t, ch, "CREATE TABLE "+db+".`"+b+"` (id UInt64) ENGINE = MergeTree ORDER BY id")
	code, out, errOut := sinkCmd(t, "check", "--config", path)
	if code != 0 || !strings.Contains(out, db+"."+a+":") || !strings.Contains(out, db+"."+b+":") {
		t.Fatalf("check with both tables: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// check prints the config's warnings before it reaches any server.
func TestCheckPrintsWarnings(t *testing.T) {
	path := writeConfig(t, "name: w\nkafka: {brokers: [\"127.0.0.1:1\"], topics: [a]}\nbatch: {buffer_memory: 64MiB}\nroutes: [{topic: a, table: t}]\nhttp: {listen: \"\"}\n")
	code, out, _ := sinkCmd(t, "check", "--config", path)
	if code != 1 || !strings.Contains(out, "config: warning: kafka.fetch_max_bytes (50MiB)") {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	f([]string{"check", "--help"}, 0, "the connector's YAML config file (required)")
	f([]string{"check", "-h"}, 0, "Usage: sink check --config FILE")
	f([]string{"check", "-h"}, 0, "It runs none of them, joins no group and commits")
	f([]string{"check", "-h"}, 0, "Exit status: 0 when every check passed")
	f([]string{"run", "-h"}, 0, "Usage: sink run --config FILE")
	f([]string{"run", "--help"}, 0, "-config file")
	f([]string{"run", "-h"}, 0, "130 when a")
	f([]string{"run", "--nosuch"}, 2, "Usage: sink run --config FILE")
	f([]string{"--help"}, 0, "sink offsets show|reset --config FILE")
	f([]string{"offsets", "--help"}, 0, "Usage: sink offsets show  --config FILE")
	f([]string{"offsets", "reset", "--help"}, 0, "confirm a forward move")
	f([]string{"offsets"}, 2, "Usage: sink offsets show")
	f([]string{"offsets", "move"}, 2, "Usage: sink offsets show")
	f([]string{"offsets", "show"}, 2, "--config FILE is required")
	f([]string{"offsets", "show", "--config", "x.yaml", "--to", "latest"}, 2, "takes only --config")
	f([]string{"offsets", "reset", "--config", "x.yaml"}, 2, "give either --to or TOPIC:PARTITION=OFFSET values")
	f([]string{"offsets", "reset", "--config", "x.yaml", "--to", "latest", "t:0=1"}, 2, "give either --to or TOPIC:PARTITION=OFFSET values")
	f([]string{"offsets", "reset", "--config", "x.yaml", "--to", "yesterday"}, 2, "want earliest, latest")
	f([]string{"offsets", "reset", "--config", "x.yaml", "t=1"}, 2, "want topic:partition=offset")
	f([]string{"offsets", "reset", "--config", "x.yaml", "--to", "latest", "--partition", "1"}, 2, "--partition needs --topic")
	f([]string{"offsets", "reset", "t:0=1", "--config", "/nonexistent/sink.yaml", "--execute"}, 1, "/nonexistent/sink.yaml")
	f([]string{"import", "--help"}, 0, "Usage: sink import [--out DIR | --stdout]")
	f([]string{"import"}, 2, "name at least one connector file or directory")
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

// check prints the config's warnings, a deprecated key's first, before it
// reaches any server.
func TestCheckPrintsWarnings(t *testing.T) {
	path := writeConfig(t, "name: w\nkafka: {brokers: [\"127.0.0.1:1\"], topics: [a]}\nclickhouse: {insert_quorum: 2}\nbatch: {buffer_memory: 48MiB}\nroutes: [{topic: a, table: t}]\nhttp: {listen: \"\"}\n")
	code, out, _ := sinkCmd(t, "check", "--config", path)
	dep := "config: warning: clickhouse.insert_quorum is deprecated: set clickhouse.settings.insert_quorum instead"
	if code != 1 || strings.Count(out, dep) != 1 || !strings.Contains(out, "config: warning: batch.buffer_memory (48MiB)") ||
		strings.Index(out, dep) > strings.Index(out, "batch.buffer_memory") {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

// run logs one warning line per deprecated key at start, before it
// connects to anything.
func TestRunLogsDeprecatedKeysOnce(t *testing.T) {
	path := writeConfig(t, "name: w\nkafka: {brokers: [\"127.0.0.1:1\"], topics: [a], fetch_max_bytes: 4MiB}\n"+
		"clickhouse: {addrs: [\"127.0.0.1:1\"], dial_timeout: 1s, insert_quorum_timeout: 5s}\nroutes: [{topic: a, table: t}]\nhttp: {listen: \"\"}\n")
	code, _, errOut := sinkCmd(t, "run", "--config", path)
	for _, key := range []string{"kafka.fetch_max_bytes", "clickhouse.insert_quorum_timeout"} {
		n := 0
		for _, line := range strings.Split(errOut, "\n") {
			var l struct{ Level, Message string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Level == "warn" && strings.HasPrefix(l.Message, key+" is deprecated") {
				n++
			}
		}
		if code != 1 || n != 1 {
			t.Fatalf("exit %d, %d warnings for %s in %q", code, n, key, errOut)
		}
	}
}

// Every command's -h has the same shape: a synopsis naming the command, what
// it does, then its flags with their defaults; all on stderr, exit 0.
func TestCommandHelpShape(t *testing.T) {
	for _, cmd := range []string{"run", "check", "report", "advise", "import"} {
		code, out, errOut := sinkCmd(t, cmd, "-h")
		synopsis, rest, _ := strings.Cut(errOut, "\n\n")
		desc, flags, ok := strings.Cut(rest, "\nFlags:\n")
		if code != 0 || out != "" || !strings.HasPrefix(synopsis, "Usage: sink "+cmd+" ") || !ok ||
			len(strings.TrimSpace(desc)) < 100 || !strings.HasPrefix(flags, "  -") {
			t.Errorf("sink %s -h: exit %d, stdout %q, stderr:\n%s", cmd, code, out, errOut)
		}
	}
}

// TestConfigFromEnvironment: without --config, run, check, advise and
// offsets read the file SINK_CONFIG names; --config wins over it.
func TestConfigFromEnvironment(t *testing.T) {
	path := writeConfig(t, "name: \"bad name\"\n")
	t.Setenv("SINK_CONFIG", path)
	for _, args := range [][]string{{"check"}, {"run"}, {"advise"}, {"offsets", "show"}} {
		code, _, errOut := sinkCmd(t, args...)
		if code != 1 || !strings.Contains(errOut, path) || !strings.Contains(errOut, `name: "bad name" must be`) {
			t.Errorf("sink %v with SINK_CONFIG: exit %d, stderr %q; want exit 1 naming %s and its problem", args, code, errOut, path)
		}
	}
	other := writeConfig(t, "name: \"other bad\"\n")
	if code, _, errOut := sinkCmd(t, "check", "--config", other); code != 1 || !strings.Contains(errOut, `"other bad"`) {
		t.Errorf("--config beside SINK_CONFIG: exit %d, stderr %q; want the flag's file read", code, errOut)
	}
}

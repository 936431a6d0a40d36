package main

import (
	"strings"
	"testing"
)

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestReportFlagErrors(t *testing.T) {
	f := func(wantCode int, want string, args ...string) {
		t.Helper()
		code, _, errOut := sinkCmd(t, append([]string{"report", "--table", "db.t"}, args...)...)
		if code != wantCode || !strings.Contains(errOut, want) {
			t.Fatalf("report %v: exit %d, stderr %q; want %d with %q", args, code, errOut, wantCode, want)
		}
	}
	f(2, `--since "0" is ambiguous`, "--since", "0")
	f(2, "--split", "--since", "2h", "--split", "3h")
	f(2, "is outside the range", "--since", "2h", "--until", "1h", "--split", "30m")
}

func TestAdviseNamesTheBadFlag(t *testing.T) {
	f := func(want string, args ...string) {
		t.Helper()
		code, _, errOut := sinkCmd(t, append([]string{"advise", "--config", "x.yaml"}, args...)...)
		if code != 2 || strings.TrimSpace(errOut) != "sink advise: "+want {
			t.Fatalf("advise %v: exit %d, stderr %q; want 2 and %q", args, code, errOut, want)
		}
	}
	f("--window 10ms: must be at least 1s", "--window", "10ms")
	f("--inserts-per-minute 0: must be more than 0", "--inserts-per-minute", "0")
	f("--max-latency -1s: must not be negative", "--max-latency", "-1s")
	f("--sample 0: must be at least 1", "--sample", "0")
}

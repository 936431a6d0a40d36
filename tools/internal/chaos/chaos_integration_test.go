//go:build integration

package chaos

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// TestChaosShort runs the scenarios that leave the shared servers alone, at
// a small scale, against each server; `make chaos` runs the whole suite at
// full scale.
func TestChaosShort(t *testing.T) {
	brokers := testenv.Kafka(t)
	if testing.Short() {
		t.Skip("chaos: skipped with -short")
	}
	bin, root := buildSink(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		runShort(t, Env{Brokers: brokers, CHAddr: s.Addr, SinkBin: bin, RepoRoot: root, WorkDir: t.TempDir(), Log: testWriter{t}})
	})
}

// TestChaosExactlyOnceOn26 runs the short scenarios with delivery:
// exactly_once into a plain MergeTree table on 26.9 (18.16 has no
// deduplication tokens): after kill -9, a member added and one killed,
// TOO_MANY_PARTS and poison records, count() must equal the records
// produced with no (_topic, _partition, _offset) twice, without FINAL.
func TestChaosExactlyOnceOn26(t *testing.T) {
	brokers := testenv.Kafka(t)
	if testing.Short() {
		t.Skip("chaos: skipped with -short")
	}
	s := testenv.Server26(t)
	bin, root := buildSink(t)
	env := Env{Brokers: brokers, CHAddr: s.Addr, SinkBin: bin, RepoRoot: root, WorkDir: t.TempDir(), Log: testWriter{t},
		Delivery: "exactly_once"}
	runShort(t, env)
	if only := os.Getenv("CHAOS_ONLY"); only != "" && !strings.Contains(","+only+",", ",kill9-mid-insert,") {
		return
	}
	// Kills while INSERTs run: the replays must be dropped by ClickHouse.
	r := Run(context.Background(), env, KillMidInsert(Full))
	if !r.OK() {
		t.Errorf("kill9-mid-insert: %v", r.Problems)
	}
	replays := 0
	logs, _ := filepath.Glob(filepath.Join(env.WorkDir, "*kill9-mid-insert*.log"))
	for _, l := range logs {
		replays += countInFile(l, "pending batch replayed")
	}
	var b strings.Builder
	PrintTable(&b, []*Result{r})
	t.Logf("\n%s\npending batches replayed after the kills: %d", b.String(), replays)
	if !r.OK() {
		dumpLogs(t, env.WorkDir)
	}
}

// buildSink builds cmd/sink into a temporary directory and returns the
// binary and the repository root.
func buildSink(t *testing.T) (bin, root string) {
	bin = filepath.Join(t.TempDir(), "sink")
	root, _ = filepath.Abs("../../..")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sink")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sink: %v\n%s", err, out)
	}
	return bin, root
}

func runShort(t *testing.T, env Env) {
	var results []*Result
	for _, s := range ShortScenarios() {
		if only := os.Getenv("CHAOS_ONLY"); only != "" && !strings.Contains(","+only+",", ","+s.Name+",") {
			continue
		}
		r := Run(context.Background(), env, s)
		results = append(results, r)
		if !r.OK() {
			for _, p := range r.Problems {
				t.Errorf("%s: %s", s.Name, p)
			}
			dumpLogs(t, env.WorkDir)
		}
	}
	var b strings.Builder
	PrintTable(&b, results)
	t.Logf("\n%s", b.String())
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		t.Logf("--- %s (last lines)\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
}

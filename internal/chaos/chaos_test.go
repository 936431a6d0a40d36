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
	bin := filepath.Join(t.TempDir(), "sink")
	root, _ := filepath.Abs("../..")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sink")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sink: %v\n%s", err, out)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		runShort(t, Env{Brokers: brokers, CHAddr: s.Addr, SinkBin: bin, RepoRoot: root, WorkDir: t.TempDir(), Log: testWriter{t}})
	})
}

func runShort(t *testing.T, env Env) {
	var results []*Result
	for _, s := range ShortScenarios() {
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

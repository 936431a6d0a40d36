//go:build integration

package chaos

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestChaosCluster26ExactlyOnce runs on the 26.9 two-shard cluster with
// delivery: exactly_once, target: local and sharding_key: the sink killed
// with SIGKILL three times mid-load and restarted; count() must equal the
// records produced, with no (_topic, _partition, _offset) twice, overall
// and on each shard's plain MergeTree. It kills only its own sinks.
func TestChaosCluster26ExactlyOnce(t *testing.T) {
	brokers := testenv.Kafka(t)
	if testing.Short() {
		t.Skip("chaos: skipped with -short")
	}
	testenv.Cluster26(t)
	bin, root := buildSink(t)
	env := Env{Brokers: brokers, Cluster: LocalCluster26(), SinkBin: bin, RepoRoot: root, WorkDir: t.TempDir(), Log: testWriter{t},
		Delivery: "exactly_once"}
	var results []*Result
	for _, s := range Cluster26Scenarios(Short) {
		r := Run(context.Background(), env, s)
		results = append(results, r)
		for _, p := range r.Problems {
			t.Errorf("%s: %s", s.Name, p)
		}
		if !r.OK() {
			dumpLogs(t, env.WorkDir)
		}
	}
	replays := 0
	logs, _ := filepath.Glob(filepath.Join(env.WorkDir, "*.log"))
	for _, l := range logs {
		replays += countInFile(l, "pending batch replayed")
	}
	var b strings.Builder
	PrintTable(&b, results)
	t.Logf("\n%s\npending batches replayed after the kills: %d", b.String(), replays)
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

// TestChaosClusterDrills runs the short fault drills on the clusters: the
// busiest partitions' leader of the 3-broker Kafka killed (exactly-once into
// 26.9) and a ClickHouse replica killed mid-INSERT (at-least-once into the
// replicated cluster); make chaos-drills runs all of them. They kill servers
// other tests use, so they run only when SINK_CHAOS_DRILLS=1: scripts/test.sh
// runs them on their own after every other package's tests (about 2 minutes).
// The servers are restarted through the scripts/stack.sh of the checkout
// that started them (SINK_STACK_ROOT, default this one).
func TestChaosClusterDrills(t *testing.T) {
	if os.Getenv("SINK_CHAOS_DRILLS") != "1" {
		t.Skip("chaos drills: set SINK_CHAOS_DRILLS=1 (scripts/test.sh does, after the other tests)")
	}
	kafka := testenv.KafkaCluster(t)
	testenv.Cluster(t)
	s26 := testenv.Server26(t)
	bin, root := buildSink(t)
	stackRoot := root
	if v := os.Getenv("SINK_STACK_ROOT"); v != "" {
		stackRoot = v
	}
	base := Env{SinkBin: bin, RepoRoot: root, StackRoot: stackRoot, WorkDir: t.TempDir(), Log: testWriter{t}}
	var results []*Result
	runOne := func(env Env, s Spec) {
		if only := os.Getenv("CHAOS_ONLY"); only != "" && !strings.Contains(","+only+",", ","+s.Name+",") {
			return
		}
		r := Run(context.Background(), env, s)
		results = append(results, r)
		for _, p := range r.Problems {
			t.Errorf("%s: %s", s.Name, p)
		}
		if !r.OK() {
			dumpLogs(t, env.WorkDir)
		}
	}
	k := base
	k.Brokers, k.ReplicationFactor, k.CHAddr, k.Delivery = kafka, 3, s26.Addr, "exactly_once"
	for _, s := range KafkaClusterScenarios(Short) {
		if s.Name == "kafka-leader-kill9" {
			runOne(k, s)
		}
	}
	c := base
	c.Brokers, c.Cluster = testenv.Kafka(t), LocalCluster()
	for _, s := range ClusterScenarios(Short) {
		if s.Name == "ch-replica-kill9" {
			runOne(c, s)
		}
	}
	var b strings.Builder
	PrintTable(&b, results)
	t.Logf("\n%s", b.String())
}

// TestSoakShort is the 2-minute soak (make soak runs it for an hour): a paced
// stream with a burst and 2% bad records from the 3-broker Kafka into the
// ClickHouse cluster, one SIGTERM restart and one kill -9, sampled every 5 s.
// Like the drills it runs only with SINK_CHAOS_DRILLS=1.
func TestSoakShort(t *testing.T) {
	if os.Getenv("SINK_CHAOS_DRILLS") != "1" {
		t.Skip("soak: set SINK_CHAOS_DRILLS=1 (scripts/test.sh does, after the other tests)")
	}
	kafka := testenv.KafkaCluster(t)
	testenv.Cluster(t)
	bin, root := buildSink(t)
	env := Env{Brokers: kafka, ReplicationFactor: 3, Cluster: LocalCluster(), SinkBin: bin, RepoRoot: root,
		WorkDir: t.TempDir(), Log: testWriter{t}}
	dir := t.TempDir()
	r := Soak(context.Background(), env, SoakParams(2*time.Minute, 500, dir))
	for _, p := range r.Problems {
		t.Errorf("soak: %s", p)
	}
	if r.Restarts != 1 || r.Kills != 1 {
		t.Errorf("soak: %d restarts and %d kills, want 1 and 1", r.Restarts, r.Kills)
	}
	if !r.OK() {
		dumpLogs(t, env.WorkDir)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "soak.md"))
	t.Logf("\n%s", b)
}

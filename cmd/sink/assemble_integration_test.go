//go:build integration

package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/assemble"
	"sink/internal/metrics"
	"sink/internal/testenv"
)

// recordParts wraps openParts for the rest of the test: every Parts that
// run or check builds is kept, and summaries returns what each had built
// by then (its pipeline's tables included).
func recordParts(t *testing.T) (summaries func() []assemble.Summary) {
	t.Helper()
	var mu sync.Mutex
	var built []*assemble.Parts
	orig := openParts
	openParts = func(ctx context.Context, cfg *config.Config, m *metrics.Metrics, log zerolog.Logger) (*assemble.Parts, error) {
		p, err := orig(ctx, cfg, m, log)
		if err == nil {
			mu.Lock()
			built = append(built, p)
			mu.Unlock()
		}
		return p, err
	}
	t.Cleanup(func() { openParts = orig })
	return func() []assemble.Summary {
		mu.Lock()
		defer mu.Unlock()
		out := make([]assemble.Summary, len(built))
		for i, p := range built {
			out[i] = p.Summary()
		}
		built = nil
		return out
	}
}

// checkThenRun runs `sink check` and then `sink run` (until it has
// started) over the config at path and returns what each assembled.
func checkThenRun(t *testing.T, path string) (checked, ran assemble.Summary) {
	t.Helper()
	summaries := recordParts(t)
	code, out, errOut := sinkCmd(t, "check", "--config", path)
	if code != 0 {
		t.Fatalf("check: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	c := summaries()
	r := startSink(t, path)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(r.stderr.String(), `"message":"started"`) {
		if time.Now().After(deadline) {
			t.Fatalf("run did not start within 60s:\n%s", r.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, r.stderr.String())
	}
	g := summaries()
	if len(c) != 1 || len(g) != 1 {
		t.Fatalf("check assembled %d times, run %d times; want once each", len(c), len(g))
	}
	return c[0], g[0]
}

// TestRunAndCheckAssembleAlike: `sink check` and `sink run` over one
// config build the same parts (the kind of ClickHouse writer, the
// exactly-once I/O, the registry client, the shared budget, the sampler)
// with the same pipeline options, and their pipelines resolve the same
// tables. The config uses every optional part: exactly-once where the
// server has it (26.9), a schema registry, a shared INSERT budget.
func TestRunAndCheckAssembleAlike(t *testing.T) {
	brokers := testenv.Kafka(t)
	reg := testenv.Registry(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		db := s.NewDatabase(t)
		ddl := "(id UInt64, _topic String, _partition Int32, _offset Int64) ENGINE = MergeTree ORDER BY id"
		delivery := "at_least_once"
		if s.AtLeast(22, 2) {
			ddl += " SETTINGS non_replicated_deduplication_window = 1000"
			delivery = "exactly_once"
		}
		testenv.Exec(t, s.Conn(t), "CREATE TABLE "+db+".a "+ddl, "CREATE TABLE "+db+".b "+ddl)
		a, b := testenv.NewTopic(t, 2), testenv.NewTopic(t, 1)
		path := writeConfig(t, fmt.Sprintf(`
name: %s
delivery: %s
kafka: {brokers: [%q], topics: [%q, %q]}
clickhouse: {addrs: [%q], database: %s, max_inserts_per_minute: 60, share_budget: true}
schema_registry: {urls: [%q]}
routes: [{topic: %q, table: a}, {topic: %q, table: b}]
http: {listen: ""}
`, testenv.UniqueName(t, "assemble"), delivery, brokers[0], a, b, s.Addr, db, reg, a, b))

		checked, ran := checkThenRun(t, path)
		t.Logf("check assembled %+v", checked)
		if !reflect.DeepEqual(checked, ran) {
			t.Fatalf("check and run assembled differently:\ncheck %+v\nrun   %+v", checked, ran)
		}
		want := assemble.Summary{Sink: "writer", ExactlyOnce: delivery == "exactly_once", Registry: true, Sharer: true,
			Sampled: brokers[:1], Tables: []string{db + ".a", db + ".b"}}
		want.Options = 4 // metrics, allowance, sampler, registry
		if want.ExactlyOnce {
			want.Options++
		}
		if !reflect.DeepEqual(ran, want) {
			t.Fatalf("run assembled %+v; want %+v", ran, want)
		}
	})
}

// TestRunAndCheckAssembleAlikeOnACluster: with a target: local route, check
// and run both write through the cluster writer (with exactly-once, its
// table checks reading every shard, on the cluster without Keeper where
// the server has it).
func TestRunAndCheckAssembleAlikeOnACluster(t *testing.T) {
	brokers := testenv.Kafka(t)
	testenv.EachCluster(t, func(t *testing.T, c testenv.LocalCluster) {
		topic := testenv.NewTopic(t, 2)
		db := c.NewDatabase(t)
		c.ExecEachNode(t,
			fmt.Sprintf("CREATE TABLE %s.ev (id UInt64, _topic String, _partition Int32, _offset Int64) ENGINE = %s", db, c.Engine(db, "ev", "id")),
			fmt.Sprintf("CREATE TABLE %s.ev_all AS %s.ev ENGINE = Distributed(%s, %s, ev, cityHash64(id))", db, db, c.Name, db))
		delivery := "at_least_once"
		if !c.Keeper { // the 26.9 cluster: deduplication tokens, and windows on its MergeTree tables
			delivery = "exactly_once"
		}
		path := writeConfig(t, fmt.Sprintf(`
name: %s
delivery: %s
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s, cluster: %s}
routes: [{topic: %q, table: ev_all, format: json, target: local, sharding_key: id, sharding_hash: cityHash64}]
http: {listen: ""}
`, testenv.UniqueName(t, "assemblecl"), delivery, brokers[0], topic, c.Shards[0][0].Addr, db, c.Name, topic))

		checked, ran := checkThenRun(t, path)
		t.Logf("check assembled %+v", checked)
		if !reflect.DeepEqual(checked, ran) {
			t.Fatalf("check and run assembled differently:\ncheck %+v\nrun   %+v", checked, ran)
		}
		if ran.Sink != "cluster" || ran.ExactlyOnceOnCluster != (delivery == "exactly_once") || !reflect.DeepEqual(ran.Tables, []string{db + ".ev_all"}) {
			t.Fatalf("run assembled %+v; want the cluster writer (exactly-once on it: %v) and table %s.ev_all", ran, delivery == "exactly_once", db)
		}
	})
}

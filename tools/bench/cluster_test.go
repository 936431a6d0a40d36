package main

import (
	"strings"
	"testing"
)

// The cluster table's summary: medians and ranges over the successful runs
// only, inserts/min summed over the nodes, and a verdict against the aim
// from the medians.
func TestSummarizeClusterRuns(t *testing.T) {
	run := func(key string, round int, rps, idleUs, queryUs float64, insMin ...float64) ClusterRun {
		return ClusterRun{Key: key, Run: round, Status: "ok", RowsPerSec: rps, ServerToIdleUsPerRow: idleUs, QueryUsPerRow: queryUs, InsertsMinNode: insMin}
	}
	runs := []ClusterRun{
		run("cluster_local_key", 1, 300, 2, 0.5, 10, 0, 10, 0),
		run("cluster_distributed", 1, 100, 4, 1, 20, 0, 5, 5),
		run("cluster_local_key", 2, 200, 3, 0.6, 12, 0, 8, 0),
		run("cluster_distributed", 2, 120, 5, 1.2, 20, 0, 6, 4),
		{Key: "cluster_local_key", Run: 3, Status: "failed: x", RowsPerSec: 1e9},
		run("cluster_distributed", 3, 90, 5, 1.2, 20, 0, 6, 4),
		run("cluster_local_key", 4, 400, 1, 0.4, 14, 0, 12, 0),
		run("cluster_distributed", 4, 110, 4.5, 1.1, 20, 0, 7, 3),
		{Key: "cluster_local_random", Run: 4, Status: "failed: down"},
	}
	st := summarizeClusterRuns(runs)
	if len(st) != 3 {
		t.Fatalf("%d variants, want 3: %+v", len(st), st)
	}
	k := st[0]
	if k.Key != "cluster_local_key" || k.RunsN != 4 || k.OKN != 3 || k.Status != "ok" || st[2].OKN != 4 {
		t.Errorf("local key: %+v", k)
	}
	if k.RowsPerSec != (Spread{N: 3, Median: 300, Min: 200, Max: 400}) {
		t.Errorf("local key rows/s %+v", k.RowsPerSec)
	}
	if k.InsertsMin.Median != 20 || k.InsertsMinNode[0] != 12 || k.InsertsMinNode[2] != 10 {
		t.Errorf("local key inserts/min %+v per node %v", k.InsertsMin, k.InsertsMinNode)
	}
	if st[1].Key != "cluster_local_random" || st[1].OKN != 0 || st[1].Status != "failed: down" {
		t.Errorf("local random: %+v", st[1])
	}
	// Distributed median of 90, 100, 110, 120: 105; the rounds pair
	// 300/100, 200/120 and 400/110 (round 3's local run failed).
	v := clusterVerdicts(st, runs)
	if len(v) != 1 || !strings.HasPrefix(v[0], "cluster_local_key: 2.86×") || !strings.Contains(v[0], "slowest over fastest run 1.67×") ||
		!strings.Contains(v[0], "per round 3.00× [1.67×–3.64×] over 3 rounds") ||
		!strings.Contains(v[0], ": meets the aim") {
		t.Errorf("verdicts %q", v)
	}
	// Faster but not cheaper per row: the aim is not met.
	st[0].QueryUsPerRow.Median = 2
	if v := clusterVerdicts(st, runs); !strings.Contains(v[0], "does not meet") {
		t.Errorf("verdict with more CPU per row: %q", v)
	}
	if v := clusterVerdicts(st[:2], runs); len(v) != 1 || !strings.HasPrefix(v[0], "no successful target: distributed") {
		t.Errorf("verdicts without a distributed run: %q", v)
	}
}

// A cluster route's lines land under the route and clickhouse.cluster in
// its section, and the config validates as sink run will read it.
func TestSinkConfCluster(t *testing.T) {
	for _, v := range clusterVariants {
		sc := sinkConf{name: "x", group: "g", topic: "t", table: "ev_all", brokers: []string{"127.0.0.1:9092"},
			chAddrs: []string{"127.0.0.1:9201"}, database: clusterDB, cluster: "sink_cluster", route: v.route}
		cfg, err := sc.parse()
		if err != nil {
			t.Fatalf("%s: %v\n%s", v.key, err, sc.yaml())
		}
		r := cfg.Routes[0]
		if cfg.ClickHouse.Cluster != "sink_cluster" || r.Target == "" || (r.Target == "local") != (r.Sharding != "" || r.ShardingKey != "") {
			t.Errorf("%s: cluster %q target %q sharding %q key %q", v.key, cfg.ClickHouse.Cluster, r.Target, r.Sharding, r.ShardingKey)
		}
	}
}

// TestClusterDDLWithoutDistributedDDL: with --cluster-ddl "" (the 26.9
// cluster) the statements name no ON CLUSTER, and a reproduce line keeps
// the empty argument and the spaced one.
func TestClusterDDLWithoutDistributedDDL(t *testing.T) {
	if got := onCluster(clusterOptions{ddl: "sink_cluster_nodes"}); got != " ON CLUSTER sink_cluster_nodes" {
		t.Errorf("onCluster = %q", got)
	}
	if got := onCluster(clusterOptions{}); got != "" {
		t.Errorf("onCluster without --cluster-ddl = %q", got)
	}
	got := strings.Join(quoteArgs([]string{"--cluster-ddl", "", "--machine", "2-core VM", "--runs", "3"}), " ")
	if want := `--cluster-ddl "" --machine "2-core VM" --runs 3`; got != want {
		t.Errorf("quoteArgs: %s, want %s", got, want)
	}
}

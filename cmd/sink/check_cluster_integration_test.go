//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// TestCheckListsClusterReplicasAndRefusesDifferingColumns: on the local
// clusters (18.16 replicated, 26.9 without Keeper), `sink check` with a
// target local route lists every shard and replica it reached, the local
// table's engine on each and its deduplication window; after a column is
// added on one node only (a half-applied ALTER) it refuses the route,
// naming the replica and the column.
func TestCheckListsClusterReplicasAndRefusesDifferingColumns(t *testing.T) {
	brokers := testenv.Kafka(t)
	testenv.EachCluster(t, func(t *testing.T, c testenv.LocalCluster) {
		testCheckListsClusterReplicas(t, c, brokers)
	})
}

func testCheckListsClusterReplicas(t *testing.T, c testenv.LocalCluster, brokers []string) {
	topic := testenv.NewTopic(t, 1)
	db := c.NewDatabase(t)
	c.ExecEachNode(t,
		fmt.Sprintf("CREATE TABLE %s.ev (id UInt64, v String) ENGINE = %s", db, c.Engine(db, "ev", "id")),
		fmt.Sprintf("CREATE TABLE %s.ev_all AS %s.ev ENGINE = Distributed(%s, %s, ev, cityHash64(id))", db, db, c.Name, db))
	engine, dedup, replicas := "ReplicatedMergeTree", "replicated_deduplication_window = 100 (server default): a repeat of one of the last 100 INSERT blocks is dropped", "2,2"
	if !c.Keeper {
		engine = "MergeTree"
		dedup = fmt.Sprintf("non_replicated_deduplication_window = %d (table setting): a repeat of one of the last %d INSERT blocks is dropped", testenv.DedupWindow, testenv.DedupWindow)
		replicas = "1,1"
	}
	cfg := writeConfig(t, fmt.Sprintf(`
name: checkcluster
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s, cluster: %s}
routes: [{topic: %q, table: ev_all, format: json, target: local, sharding_key: id, sharding_hash: cityHash64}]
http: {listen: ""}
`, brokers[0], topic, c.Shards[0][0].Addr, db, c.Name, topic))

	code, out, errOut := sinkCmd(t, "check", "--config", cfg)
	if code != 0 {
		t.Fatalf("check: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	t.Logf("sink check:\n%s", out)
	want := []string{"cluster: " + c.Name + ": 2 shards (weights 1,1) × " + replicas + " replicas", "check: ok",
		"cluster: route table ev_all (target local): local table " + db + ".ev (" + engine + "): " + dedup}
	for _, n := range c.Nodes() {
		want = append(want,
			fmt.Sprintf("cluster: shard %d replica %d %s: reached (ClickHouse %s)", n.Shard, n.Replica, n.Addr, c.Version),
			fmt.Sprintf("cluster: route table ev_all (target local): shard %d replica %s: %s.ev %s, 2 columns", n.Shard, n.Addr, db, engine))
	}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("check output lacks the line %q", w)
		}
	}

	// A half-applied ALTER, as an interrupted ON CLUSTER leaves it: run on one
	// node without ON CLUSTER, it reaches that shard's replicas (through
	// ZooKeeper) and not the other shard.
	odd := c.Shards[1][len(c.Shards[1])-1]
	testenv.Exec(t, odd.Conn(t), "ALTER TABLE "+db+".ev ADD COLUMN extra UInt8")
	code, out, errOut = sinkCmd(t, "check", "--config", cfg)
	if code == 0 {
		t.Fatalf("check passed with a column on shard 2 only:\n%s", out)
	}
	for _, w := range []string{"the local table " + db + ".ev has other columns on some replicas", "shard 2 replica " + odd.Addr + " has extra UInt8", "ON CLUSTER"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("check's error lacks %q:\n%s", w, errOut)
		}
	}
}

//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"sink/internal/command/report"
	"sink/internal/testenv"
)

// TestReportClusterFlag: `sink report --cluster` discovers the nodes from the
// first address's system.clusters, reads each of them, and reports the
// inserts written into two nodes of different shards under their shards
// (on 18.16 the second replica of shard 1, on 26.9 shard 1's only node).
func TestReportClusterFlag(t *testing.T) {
	testenv.EachCluster(t, testReportClusterFlag)
}

func testReportClusterFlag(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.ev (id UInt64) ENGINE = %s", db, c.Engine(db, "ev", "id")))
	testenv.InsertSeq(t, c.Shards[0][len(c.Shards[0])-1].Conn(t), db, "ev", "id", 4)
	testenv.InsertSeq(t, c.Shards[1][0].Conn(t), db, "ev", "id", 6)

	var r report.Report
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		code, out, errOut := sinkCmd(t, "report", "--clickhouse", c.Shards[0][0].Addr, "--cluster", c.Name,
			"--table", db+".ev", "--since", "2m", "--format", "json")
		if code != 0 {
			t.Fatalf("report: exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if r.Total.Inserts >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if r.Cluster != c.Name || len(r.Shards) != 2 || r.Total.Inserts != 2 || r.Total.Rows != 10 {
		t.Fatalf("report: cluster %q, %d shards, %d inserts, %d rows; want %s, 2, 2, 10", r.Cluster, len(r.Shards), r.Total.Inserts, r.Total.Rows, c.Name)
	}
	for i, want := range []uint64{4, 6} {
		if s := r.Shards[i]; s.Total.Rows != want || len(s.Replicas) != len(c.Shards[i]) {
			t.Errorf("shard %d: %d rows over %d replicas, want %d over %d", s.Shard, s.Total.Rows, len(s.Replicas), want, len(c.Shards[i]))
		}
	}
}

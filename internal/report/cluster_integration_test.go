//go:build integration

package report_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"sink/internal/report"
	"sink/internal/testenv"
)

// TestQueryClusterSumsEveryNode writes known INSERTs into the local
// ReplicatedMergeTree tables of three of the cluster's four nodes (different
// blocks, so replication deduplicates none) and checks that the cluster report
// sums exactly those: in total, per shard and per replica, and equal to what
// each node's own query_log and part_log say when asked directly. The replicas
// that only fetched a part log no new part for it, so parts are counted once.
func TestQueryClusterSumsEveryNode(t *testing.T) {
	c := testenv.Cluster(t)
	db := c.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testenv.Exec(t, c.Conn(t), fmt.Sprintf("CREATE TABLE %s.events ON CLUSTER %s (id UInt64) "+
		"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/%s.events', '{replica}') ORDER BY id", db, c.Name, db))

	since := time.Now().Add(-time.Second)
	// rows inserted per node, one INSERT per entry; InsertSeq writes 0..n-1,
	// so every block of one shard has a different length and none is a
	// duplicate of another.
	plan := map[string][]int{
		c.Shards[0][0].Addr: {10, 20},
		c.Shards[0][1].Addr: {5},
		c.Shards[1][0].Addr: {7},
	}
	var nodes []report.Node
	for _, n := range c.Nodes() {
		conn := n.Conn(t)
		for _, rows := range plan[n.Addr] {
			testenv.InsertSeq(t, conn, db, "events", "id", rows)
		}
		nodes = append(nodes, report.Node{Shard: n.Shard, Replica: n.Replica, Addr: n.Addr, Conn: conn})
	}
	until := time.Now().Add(2 * time.Second)
	// A third replica of shard 2 that could not be opened: left out of the
	// sums, with a note, and listed as not read.
	down := report.Node{Shard: 2, Replica: 3, Addr: "127.0.0.1:1", Err: errors.New("connection refused")}
	nodes = append(nodes, down)

	o := report.Options{
		Target: report.Target{Database: db, Table: "events", DefaultDatabase: db},
		Since:  since, Until: until, Flush: true,
	}
	// 18.16 may log an INSERT a moment after answering it: ask again until
	// all four are there (a few seconds at most); the checks stay exact.
	var r report.Report
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var err error
		if r, err = report.QueryCluster(ctx, c.Name, nodes, o); err != nil {
			t.Fatal(err)
		}
		if (r.Total.Inserts >= 4 && r.Total.NewParts >= 4) || time.Now().After(deadline) {
			break
		}
	}

	if r.Cluster != c.Name || len(r.Shards) != 2 {
		t.Fatalf("cluster %q with %d shards, want %s with 2", r.Cluster, len(r.Shards), c.Name)
	}
	if got := [3]uint64{uint64(r.Total.Inserts), r.Total.Rows, uint64(r.Total.NewParts)}; got != [3]uint64{4, 42, 4} {
		t.Errorf("total inserts, rows, new parts = %v, want [4 42 4]", got)
	}
	wantShard := map[int][3]uint64{1: {3, 35, 3}, 2: {1, 7, 1}}
	for _, s := range r.Shards {
		got := [3]uint64{uint64(s.Total.Inserts), s.Total.Rows, uint64(s.Total.NewParts)}
		if got != wantShard[s.Shard] {
			t.Errorf("shard %d: inserts, rows, new parts = %v, want %v", s.Shard, got, wantShard[s.Shard])
		}
		wantReplicas := map[int]int{1: 2, 2: 3}[s.Shard]
		if len(s.Replicas) != wantReplicas {
			t.Errorf("shard %d: %d replicas, want %d", s.Shard, len(s.Replicas), wantReplicas)
		}
		for _, rt := range s.Replicas {
			if rt.Addr == down.Addr {
				if rt.Read || rt.Inserts != 0 {
					t.Errorf("the node that could not be opened: %+v, want not read", rt)
				}
				continue
			}
			var wantRows uint64
			for _, n := range plan[rt.Addr] {
				wantRows += uint64(n)
			}
			if !rt.Read || rt.Inserts != len(plan[rt.Addr]) || rt.Rows != wantRows || rt.NewParts != len(plan[rt.Addr]) {
				t.Errorf("shard %d replica %s: %+v, want %d inserts, %d rows, %d new parts", s.Shard, rt.Addr, rt,
					len(plan[rt.Addr]), wantRows, len(plan[rt.Addr]))
			}
			// The node's own logs, asked directly, agree.
			ins, rows, parts := ownLogs(ctx, t, c, rt.Addr, db, since, until)
			if ins != uint64(rt.Inserts) || rows != rt.Rows || parts != uint64(rt.NewParts) {
				t.Errorf("%s's own logs: %d inserts, %d rows, %d new parts; the report: %+v", rt.Addr, ins, rows, parts, rt)
			}
		}
	}
	var minuteSum, minuteRows uint64
	for _, m := range r.Minutes {
		minuteSum += uint64(m.Inserts)
		minuteRows += m.Rows
	}
	if minuteSum != 4 || minuteRows != 42 {
		t.Errorf("the minutes sum %d inserts, %d rows; want 4, 42", minuteSum, minuteRows)
	}
	noted := false
	for _, n := range r.Notes {
		noted = noted || strings.Contains(n, "shard 2 replica 3 (127.0.0.1:1) not read, its INSERTs and parts are missing from the sums: connection refused")
	}
	if !noted {
		t.Errorf("no note about the node not read: %q", r.Notes)
	}
	var text bytes.Buffer
	if err := r.Text(&text, time.UTC); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"on cluster " + c.Name + ": the sums of 4 of 5 nodes' logs, 2 shards", "127.0.0.1:1 not read", "per shard", c.Shards[0][0].Addr + " 2/30/2"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
}

// ownLogs asks one node's query_log and part_log directly for the INSERTs
// into db.events (as the sink's native INSERT statement starts) and the new
// parts of that table since since.
func ownLogs(ctx context.Context, t *testing.T, c testenv.LocalCluster, addr, db string, since, until time.Time) (inserts, rows, parts uint64) {
	t.Helper()
	var node testenv.ClusterNode
	for _, n := range c.Nodes() {
		if n.Addr == addr {
			node = n
		}
	}
	conn := node.Conn(t)
	q := "SELECT count(), sum(written_rows) FROM system.query_log WHERE event_time >= toDateTime(?) AND event_time < toDateTime(?) " +
		"AND toInt8(type) = 2 AND startsWith(query, ?)"
	if err := conn.QueryRow(ctx, q, since.Unix(), until.Unix()+1, "INSERT INTO `"+db+"`.`events`").Scan(&inserts, &rows); err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	q = "SELECT count() FROM system.part_log WHERE event_time >= toDateTime(?) AND event_time < toDateTime(?) " +
		"AND toInt8(event_type) = 1 AND database = ? AND table = 'events'"
	if err := conn.QueryRow(ctx, q, since.Unix(), until.Unix()+1, db).Scan(&parts); err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return inserts, rows, parts
}

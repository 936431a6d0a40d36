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

	"sink/internal/command/report"
	"sink/internal/testenv"
)

// TestQueryClusterSumsEveryNode writes known INSERTs into the local tables
// of the cluster's nodes (three of the four 18.16 nodes, ReplicatedMergeTree;
// both 26.9 nodes, MergeTree), different blocks, so deduplication drops none,
// and checks that the cluster report sums exactly those: in total, per shard
// and per replica, and equal to what each node's own query_log and part_log
// say when asked directly. The replicas that only fetched a part log no new
// part for it, so parts are counted once.
func TestQueryClusterSumsEveryNode(t *testing.T) {
	testenv.EachCluster(t, testQueryClusterSumsEveryNode)
}

func testQueryClusterSumsEveryNode(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.events (id UInt64) ENGINE = %s", db, c.Engine(db, "events", "id")))

	since := time.Now().Add(-time.Second)
	// rows inserted per node, one INSERT per entry; InsertSeq writes 0..n-1,
	// so every block of one shard has a different length and none is a
	// duplicate of another.
	plan := map[string][]int{
		c.Shards[0][0].Addr: {10, 20},
		c.Shards[1][0].Addr: {7},
	}
	if len(c.Shards[0]) > 1 {
		plan[c.Shards[0][1].Addr] = []int{5}
	}
	// What the report must sum: inserts, rows, new parts, per shard and in all.
	wantShard := map[int][3]uint64{}
	var wantTotal [3]uint64
	for _, n := range c.Nodes() {
		w := wantShard[n.Shard]
		for _, rows := range plan[n.Addr] {
			w[0]++
			w[1] += uint64(rows)
			w[2]++
			wantTotal[0]++
			wantTotal[1] += uint64(rows)
			wantTotal[2]++
		}
		wantShard[n.Shard] = w
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
	// One more replica of shard 2 that could not be opened: left out of the
	// sums, with a note, and listed as not read.
	down := report.Node{Shard: 2, Replica: len(c.Shards[1]) + 1, Addr: "127.0.0.1:1", Err: errors.New("connection refused")}
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
		if (uint64(r.Total.Inserts) >= wantTotal[0] && uint64(r.Total.NewParts) >= wantTotal[2]) || time.Now().After(deadline) {
			break
		}
	}

	if r.Cluster != c.Name || len(r.Shards) != 2 {
		t.Fatalf("cluster %q with %d shards, want %s with 2", r.Cluster, len(r.Shards), c.Name)
	}
	if got := [3]uint64{uint64(r.Total.Inserts), r.Total.Rows, uint64(r.Total.NewParts)}; got != wantTotal {
		t.Errorf("total inserts, rows, new parts = %v, want %v", got, wantTotal)
	}
	for _, s := range r.Shards {
		got := [3]uint64{uint64(s.Total.Inserts), s.Total.Rows, uint64(s.Total.NewParts)}
		if got != wantShard[s.Shard] {
			t.Errorf("shard %d: inserts, rows, new parts = %v, want %v", s.Shard, got, wantShard[s.Shard])
		}
		wantReplicas := len(c.Shards[s.Shard-1])
		if s.Shard == down.Shard {
			wantReplicas++
		}
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
	if minuteSum != wantTotal[0] || minuteRows != wantTotal[1] {
		t.Errorf("the minutes sum %d inserts, %d rows; want %d, %d", minuteSum, minuteRows, wantTotal[0], wantTotal[1])
	}
	noted := false
	for _, n := range r.Notes {
		noted = noted || strings.Contains(n, fmt.Sprintf("shard 2 replica %d (127.0.0.1:1) not read, its INSERTs and parts are missing from the sums: connection refused", down.Replica))
	}
	if !noted {
		t.Errorf("no note about the node not read: %q", r.Notes)
	}
	var text bytes.Buffer
	if err := r.Text(&text, time.UTC); err != nil {
		t.Fatal(err)
	}
	nodesRead := len(c.Nodes())
	for _, want := range []string{fmt.Sprintf("on cluster %s: the sums of %d of %d nodes' logs, 2 shards", c.Name, nodesRead, nodesRead+1), "127.0.0.1:1 not read", "per shard", c.Shards[0][0].Addr + " 2/30/2"} {
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

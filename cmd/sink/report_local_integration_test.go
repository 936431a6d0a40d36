//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sink/internal/command/report"
	"sink/internal/status"
	"sink/internal/testenv"
)

// TestReportLocalTargetByDistributedName runs the sink on the 18.16
// cluster with a route to a Distributed table and target: local (each
// batch split by key into one INSERT per shard's local table), then asks
// `sink report --config F --table` for the route's own table, the
// Distributed one. The INSERTs count although none went to that table:
// the report's total and its per-shard split equal what the nodes' query
// logs hold for INSERTs into either table (read over remote() from every
// node, and node by node for the shards), the HTML report says the same
// total, and the running sink's /status counted the same INSERTs per shard.
func TestReportLocalTargetByDistributedName(t *testing.T) {
	brokers := testenv.Kafka(t)
	c := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := c.NewDatabase(t)
	topic := testenv.NewTopic(t, 2)
	c.ExecEachNode(t,
		fmt.Sprintf("CREATE TABLE %s.ev (id UInt64, v String) ENGINE = %s", db, c.Engine(db, "ev", "id")),
		fmt.Sprintf("CREATE TABLE %s.ev_all AS %s.ev ENGINE = Distributed(%s, %s, ev, cityHash64(id))", db, db, c.Name, db))
	const n = 400
	produceSpread(t, topic, n, func(i int) string { return fmt.Sprintf(`{"id":%d,"v":"r%d"}`, i, i) })

	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s, cluster: %s}
batch: {max_rows: 60, max_wait: 500ms}
routes: [{topic: %q, table: ev_all, format: json, target: local, sharding_key: id, sharding_hash: cityHash64}]
http: {listen: %q}
`, testenv.UniqueName(t, "reportlocal"), brokers[0], topic, c.Shards[0][0].Addr, db, c.Name, topic, addr))
	since := time.Now().Add(-time.Second).Truncate(time.Second)
	r := startSink(t, cfg)
	waitRows(t, r, c.Conn(t), db+".ev_all", n)
	st := waitStatus(t, "http://"+addr, "every row counted", func(rep status.Report) bool {
		return len(rep.Tables) == 1 && rep.Tables[0].Rows15m == n
	})
	if code := r.stop(t); code != 0 {
		t.Fatalf("sink exited %d:\n%s", code, r.stderr.String())
	}

	// What the nodes logged: finished INSERTs into the local or the
	// Distributed table since the start, in total over remote() and per shard
	// node by node.
	var want [2]uint64 // inserts, rows
	wantShard := map[int][2]uint64{}
	dist := 0 // INSERTs into the Distributed table: none with target local
	logged := func() {
		c.ExecEachNode(t, "SYSTEM FLUSH LOGS")
		where := fmt.Sprintf("event_date >= yesterday() AND event_time >= toDateTime(%d) AND toInt8(type) = 2", since.Unix())
		local, all := "INSERT INTO `"+db+"`.`ev` ", "INSERT INTO `"+db+"`.`ev_all` "
		var d uint64
		q := fmt.Sprintf("SELECT count(), sum(written_rows), countIf(startsWith(query, '%s')) FROM remote('%s', system.query_log) WHERE %s AND (startsWith(query, '%s') OR startsWith(query, '%s'))",
			all, c.Remote(), where, local, all)
		if err := c.Conn(t).QueryRow(ctx, q).Scan(&want[0], &want[1], &d); err != nil {
			t.Fatal(err)
		}
		dist = int(d)
		clear(wantShard)
		for _, node := range c.Nodes() {
			var ins, rows uint64
			q := fmt.Sprintf("SELECT count(), sum(written_rows) FROM system.query_log WHERE %s AND (startsWith(query, '%s') OR startsWith(query, '%s'))", where, local, all)
			if err := node.Conn(t).QueryRow(ctx, q).Scan(&ins, &rows); err != nil {
				t.Fatal(err)
			}
			w := wantShard[node.Shard]
			wantShard[node.Shard] = [2]uint64{w[0] + ins, w[1] + rows}
		}
	}

	html := filepath.Join(t.TempDir(), "report.html")
	var rep report.Report
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Second) {
		logged()
		code, out, errOut := sinkCmd(t, "report", "--config", cfg, "--table", "ev_all", "--since", fmt.Sprint(since.Unix()),
			"--format", "json", "--html", html)
		if code != 0 {
			t.Fatalf("report: exit %d: %s", code, errOut)
		}
		rep = report.Report{}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if (uint64(rep.Total.Inserts) == want[0] && want[1] == n) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("query logs: %d INSERTs (%d into the Distributed table), %d rows; per shard %v", want[0], dist, want[1], wantShard)
	if want[1] != n || dist != 0 || len(wantShard) != 2 || wantShard[1][0] == 0 || wantShard[2][0] == 0 {
		t.Fatalf("the nodes' logs hold %d rows (%d INSERTs into the Distributed table), per shard %v: want %d rows, all into the local tables of both shards",
			want[1], dist, wantShard, n)
	}
	if rep.Table != db+".ev_all" || uint64(rep.Total.Inserts) != want[0] || rep.Total.Rows != want[1] {
		t.Errorf("report on %s: %d inserts, %d rows; the query logs: %d, %d", rep.Table, rep.Total.Inserts, rep.Total.Rows, want[0], want[1])
	}
	if len(rep.Shards) != 2 {
		t.Fatalf("report: %d shards, want 2", len(rep.Shards))
	}
	for _, s := range rep.Shards {
		if got := [2]uint64{uint64(s.Total.Inserts), s.Total.Rows}; got != wantShard[s.Shard] {
			t.Errorf("report, shard %d: inserts, rows = %v; the shard's query logs: %v", s.Shard, got, wantShard[s.Shard])
		}
	}
	if code, out, errOut := sinkCmd(t, "report", "--config", cfg, "--table", "ev_all", "--since", fmt.Sprint(since.Unix()), "--utc"); code != 0 ||
		!strings.Contains(out, fmt.Sprintf("is a Distributed table: INSERTs are those clients sent into it or into its local table %s.ev", db)) {
		t.Errorf("report (text): exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	} else {
		t.Logf("sink report:\n%s", out)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if line := fmt.Sprintf("total: %d inserts, %d rows", want[0], want[1]); !strings.Contains(string(page), line) {
		t.Errorf("the HTML report lacks %q", line)
	}

	// The status page counted the same INSERTs, per shard.
	tab := st.Tables[0]
	if tab.Table != db+".ev_all" || uint64(tab.Inserts15m) != want[0] || len(tab.Shards) != 2 {
		t.Errorf("/status: %s, %d inserts in %d shards; want %s.ev_all, %d in 2", tab.Table, tab.Inserts15m, len(tab.Shards), db, want[0])
	}
	for _, s := range tab.Shards {
		if got := [2]uint64{uint64(s.Inserts15m), uint64(s.Rows15m)}; got != wantShard[s.Shard] {
			t.Errorf("/status, shard %d: inserts, rows = %v; the shard's query logs: %v", s.Shard, got, wantShard[s.Shard])
		}
	}
}

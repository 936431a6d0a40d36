package main

// The cluster table: the same workload into the local cluster
// (scripts/stack.sh cluster up: 2 shards × 2 replicas of 18.16), written
// three ways by the sink: each shard's local table by key, each shard's
// local table a whole batch at a time (sharding: random), and the
// Distributed table with insert_distributed_sync=1. The runs are
// interleaved like the single-server variants; every run gets fresh
// ReplicatedMergeTree tables and a Distributed table over them. The 26.9
// cluster (cluster26 up: 2 shards × 1 replica, no Keeper) is measured with
// --cluster-ddl "": MergeTree tables created node by node.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// clusterDB is the database the cluster table owns on every node.
const clusterDB = "bench_cluster"

// clusterVariants are the cluster table's rows, in their order.
var clusterVariants = []struct{ key, name, route, sharding string }{
	{key: "cluster_local_key", name: "target: local, sharding_key: user_id (cityHash64)",
		route: "    target: local\n    sharding_key: user_id\n", sharding: "cityHash64(user_id)"},
	{key: "cluster_local_random", name: "target: local, sharding: random (whole batches)",
		route: "    target: local\n    sharding: random\n", sharding: "rand()"},
	{key: "cluster_distributed", name: "target: distributed (insert_distributed_sync=1)",
		route: "    target: distributed\n", sharding: "cityHash64(user_id)"},
}

type clusterOptions struct {
	mode     string   // auto (when the cluster answers), on, off
	only     bool     // the cluster table alone
	name     string   // the cluster of remote_servers
	ddl      string   // the cluster whose every node is a shard, for non-replicated DDL
	http     []string // every node's HTTP interface
	runs     int
	variants []string
}

// clusterNode is one server of the cluster: its place, its addresses, its
// process (for its CPU) and a control connection.
type clusterNode struct {
	Shard   int    `json:"shard"`
	Replica int    `json:"replica"`
	Native  string `json:"native"`
	HTTP    string `json:"http"`
	pid     int
	ch      *chHTTP
}

// ClusterResults is the cluster table.
type ClusterResults struct {
	Cluster  string         `json:"cluster"`
	Version  string         `json:"version,omitempty"`
	Engine   string         `json:"engine,omitempty"` // of the local tables
	Nodes    []clusterNode  `json:"nodes"`
	Error    string         `json:"error,omitempty"`
	Runs     []ClusterRun   `json:"runs"`
	Stats    []ClusterStats `json:"stats"`
	ZKPID    int            `json:"zookeeper_pid,omitempty"`
	Verdicts []string       `json:"verdicts,omitempty"`
}

// ClusterRun is one run of one cluster variant.
type ClusterRun struct {
	Key      string `json:"key"`
	Name     string `json:"name"`
	Run      int    `json:"run"`
	Status   string `json:"status"`
	Table    string `json:"table"` // the Distributed table; the local one is its name without _all
	Config   string `json:"config,omitempty"`
	Note     string `json:"note,omitempty"`
	Expected int64  `json:"expected_rows"`
	// Rows: per shard the most any replica holds, summed (replication
	// may trail the replica that took the INSERT by tens of ms).
	Rows       int64   `json:"rows"`
	RowsShard  []int64 `json:"rows_per_shard"`
	WallSec    float64 `json:"wall_sec"`
	RowsPerSec float64 `json:"rows_per_sec"`
	// Per node, in Nodes' order: INSERT queries it finished (into the
	// local or the Distributed table, sent by the sink or by a
	// Distributed table on another node) and per minute of WallSec.
	InsertsNode    []int64   `json:"inserts_per_node"`
	InsertsMinNode []float64 `json:"inserts_per_min_per_node"`
	PartsNode      []int64   `json:"new_parts_per_node"`
	ClientCPUSec   float64   `json:"client_cpu_sec"`
	ClientUsPerRow float64   `json:"client_cpu_us_per_row"`
	// The four nodes' CPU from /proc/PID/stat: until the rows landed,
	// and until the nodes were idle again (replication fetches, merges).
	ServerCPUSec         float64 `json:"server_cpu_sec"`
	ServerCPUToIdleSec   float64 `json:"server_cpu_to_idle_sec"`
	ServerUsPerRow       float64 `json:"server_cpu_us_per_row"`
	ServerToIdleUsPerRow float64 `json:"server_cpu_to_idle_us_per_row"`
	// The CPU inside the run's INSERT queries on every node (query_log
	// ProfileEvents UserTimeMicroseconds + SystemTimeMicroseconds):
	// nothing of other users of the shared cluster.
	QueryCPUSec   float64 `json:"insert_query_cpu_sec"`
	QueryUsPerRow float64 `json:"insert_query_cpu_us_per_row"`
	ZKCPUSec      float64 `json:"zookeeper_cpu_sec"`
	OtherCPUSec   float64 `json:"other_cpu_sec"` // busy CPU of everything else on the machine meanwhile
}

func (r ClusterRun) ok() bool { return r.Status == "ok" }

// ClusterStats is one cluster variant over its successful runs.
type ClusterStats struct {
	Key            string    `json:"key"`
	Name           string    `json:"name"`
	RunsN          int       `json:"runs"`
	OKN            int       `json:"ok"`
	Status         string    `json:"status"`
	RowsPerSec     Spread    `json:"rows_per_sec"`
	InsertsMin     Spread    `json:"inserts_per_min_all_nodes"`
	ClientUsPerRow Spread    `json:"client_cpu_us_per_row"`
	ServerUsPerRow Spread    `json:"server_cpu_us_per_row"`
	ServerIdleUs   Spread    `json:"server_cpu_to_idle_us_per_row"`
	QueryUsPerRow  Spread    `json:"insert_query_cpu_us_per_row"`
	InsertsMinNode []float64 `json:"inserts_per_min_per_node_median"`
}

func clusterVariantName(key string) string {
	for _, v := range clusterVariants {
		if v.key == key {
			return v.name
		}
	}
	return key
}

// openCluster reads the cluster's replicas from the first node's
// system.clusters and pairs each with its HTTP interface by process: the
// server listening on a native port is the one listening on one of the
// HTTP ports.
func openCluster(ctx context.Context, co clusterOptions) (*ClusterResults, error) {
	cr := &ClusterResults{Cluster: co.name, Engine: "ReplicatedMergeTree"}
	if co.ddl == "" {
		cr.Engine = "MergeTree"
	}
	if len(co.http) == 0 {
		return cr, errors.New("no --cluster-http addresses")
	}
	first := newCH(co.http[0])
	v, err := first.query(ctx, "SELECT version()")
	if err != nil {
		return cr, fmt.Errorf("cluster node %s is not reachable (scripts/stack.sh cluster up): %w", co.http[0], err)
	}
	cr.Version = v
	s, err := first.query(ctx, fmt.Sprintf("SELECT shard_num, replica_num, host_address, port FROM system.clusters WHERE cluster = '%s' ORDER BY shard_num, replica_num", co.name))
	if err != nil {
		return cr, err
	}
	httpByPID := map[int]string{}
	for _, h := range co.http {
		if pid, err := listenerPID(portOf(strings.TrimSuffix(h, "/"), 0)); err == nil {
			httpByPID[pid] = h
		}
	}
	for _, l := range strings.Split(s, "\n") {
		var n clusterNode
		var host string
		var port int
		if _, err := fmt.Sscanf(l, "%d\t%d\t%s\t%d", &n.Shard, &n.Replica, &host, &port); err != nil {
			continue
		}
		n.Native = fmt.Sprintf("%s:%d", host, port)
		if n.pid, err = listenerPID(port); err != nil {
			return cr, fmt.Errorf("cluster %s: the process of %s (for its CPU): %w", co.name, n.Native, err)
		}
		if n.HTTP = httpByPID[n.pid]; n.HTTP == "" {
			return cr, fmt.Errorf("cluster %s: %s has none of the HTTP addresses %s", co.name, n.Native, strings.Join(co.http, ", "))
		}
		n.ch = newCH(n.HTTP)
		cr.Nodes = append(cr.Nodes, n)
	}
	if len(cr.Nodes) == 0 {
		return cr, fmt.Errorf("system.clusters of %s has no cluster %q", co.http[0], co.name)
	}
	for _, n := range cr.Nodes {
		if _, err := n.ch.query(ctx, "SELECT 1"); err != nil {
			return cr, fmt.Errorf("cluster node %s: %w", n.Native, err)
		}
	}
	if pid, err := listenerPID(2181); err == nil && co.ddl != "" {
		cr.ZKPID = pid
	}
	return cr, nil
}

// onCluster is the ON CLUSTER clause of the bench's DDL: none without
// --cluster-ddl, where ddl runs each statement on every node instead.
func onCluster(co clusterOptions) string {
	if co.ddl == "" {
		return ""
	}
	return " ON CLUSTER " + co.ddl
}

// ddl runs a statement written with onCluster(co): once, ON CLUSTER
// co.ddl, or, for a cluster without distributed DDL (--cluster-ddl "",
// the 26.9 servers, which have no Keeper), on every node in turn.
func (cr *ClusterResults) ddl(ctx context.Context, co clusterOptions, q string) error {
	if co.ddl != "" {
		return cr.Nodes[0].ch.exec(ctx, q)
	}
	for _, n := range cr.Nodes {
		if err := n.ch.exec(ctx, q); err != nil {
			return fmt.Errorf("node %s: %w", n.Native, err)
		}
	}
	return nil
}

// clusterSnap is the CPU of the cluster's processes and of the machine.
type clusterSnap struct {
	at              time.Time
	nodes, zk       float64
	sysBusy, sysAll float64
}

func (cr *ClusterResults) snap() clusterSnap {
	s := clusterSnap{at: time.Now()}
	for _, n := range cr.Nodes {
		c, _ := procCPU(n.pid)
		s.nodes += c
	}
	if cr.ZKPID > 0 {
		s.zk, _ = procCPU(cr.ZKPID)
	}
	s.sysBusy, s.sysAll = systemCPU()
	return s
}

// runCluster measures the cluster variants, interleaved, into cr.
func (b *bench) runCluster(ctx context.Context, co clusterOptions) *ClusterResults {
	cr, err := openCluster(ctx, co)
	if err == nil {
		// A fresh database on every node (an interrupted run may have left
		// tables behind); its tables are created per run.
		err = cr.ddl(ctx, co, fmt.Sprintf("DROP DATABASE IF EXISTS %s%s", clusterDB, onCluster(co)))
		if err == nil {
			err = cr.ddl(ctx, co, fmt.Sprintf("CREATE DATABASE %s%s", clusterDB, onCluster(co)))
		}
	}
	if err != nil {
		cr.Error = oneLine(err.Error())
		logf("cluster %s: %s", co.name, cr.Error)
		return cr
	}
	logf("=== cluster %s: %d nodes (ClickHouse %s)", co.name, len(cr.Nodes), cr.Version)
	for run := 1; run <= co.runs; run++ {
		for _, key := range co.variants {
			if ctx.Err() != nil {
				break
			}
			b.progress.next(fmt.Sprintf("cluster %s: %s run %d of %d", co.name, key, run, co.runs))
			r := b.runClusterVariant(ctx, cr, co, key, run)
			cr.Runs = append(cr.Runs, r)
			if !b.opt.keep {
				b.dropClusterTables(cr, co, r.Table)
			}
		}
	}
	cr.Stats = summarizeClusterRuns(cr.Runs)
	cr.Verdicts = clusterVerdicts(cr.Stats, cr.Runs)
	if !b.opt.keep {
		if err := cr.ddl(context.Background(), co, fmt.Sprintf("DROP DATABASE IF EXISTS %s%s", clusterDB, onCluster(co))); err != nil {
			logf("cluster cleanup: %v", err)
		}
	}
	return cr
}

// dropClusterTables drops one run's tables on every node, so the
// replicated tables' ZooKeeper nodes and the disk are freed as it goes.
func (b *bench) dropClusterTables(cr *ClusterResults, co clusterOptions, dist string) {
	local := strings.TrimSuffix(dist, "_all")
	for _, t := range []string{dist, local} {
		if err := cr.ddl(context.Background(), co, fmt.Sprintf("DROP TABLE IF EXISTS %s%s", t, onCluster(co))); err != nil {
			logf("cluster cleanup of %s: %v", t, err)
		}
	}
}

func (b *bench) runClusterVariant(ctx context.Context, cr *ClusterResults, co clusterOptions, key string, run int) ClusterRun {
	local := fmt.Sprintf("%s_%d", key, run)
	r := ClusterRun{Key: key, Name: clusterVariantName(key), Run: run, Status: "ok", Expected: int64(b.opt.count),
		Table: clusterDB + "." + local + "_all"}
	i := slices.IndexFunc(clusterVariants, func(v struct{ key, name, route, sharding string }) bool { return v.key == key })
	if i < 0 {
		return clusterFailed(r, fmt.Errorf("unknown cluster variant %q", key))
	}
	v := clusterVariants[i]
	// The replicated tables' ZooKeeper path carries this benchmark's id,
	// so a run interrupted earlier leaves nothing this one collides with.
	engine := fmt.Sprintf("ReplicatedMergeTree('/clickhouse/tables/{shard}/%s_%s/%s', '{replica}')", clusterDB, b.id, local)
	if co.ddl == "" {
		engine = "MergeTree" // no Keeper: one replica per shard
	}
	ddl := []string{
		fmt.Sprintf("CREATE TABLE %s.%s%s (%s) ENGINE = %s PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)",
			clusterDB, local, onCluster(co), eventColumns, engine),
		fmt.Sprintf("CREATE TABLE %s.%s_all%s AS %s.%s ENGINE = Distributed(%s, %s, %s, %s)",
			clusterDB, local, onCluster(co), clusterDB, local, co.name, clusterDB, local, v.sharding),
	}
	for _, q := range ddl {
		if err := cr.ddl(ctx, co, q); err != nil {
			return clusterFailed(r, err)
		}
	}
	b.clusterQuiesce(cr)
	logf("%s run %d: into %s", key, run, r.Table)
	sc := sinkConf{
		name: "bench-" + key, group: fmt.Sprintf("bench-%s-%s-%d", b.id, key, run), topic: b.topic, table: local + "_all",
		brokers: b.opt.brokers, chAddrs: []string{cr.Nodes[0].Native}, database: clusterDB, cluster: co.name, route: v.route,
	}
	if _, err := sc.parse(); err != nil {
		return clusterFailed(r, err)
	}
	r.Config = strings.TrimSpace(sc.yaml())
	path := filepath.Join(b.opt.work, fmt.Sprintf("%s_%d.yaml", key, run))
	if err := os.WriteFile(path, []byte(sc.yaml()), 0o644); err != nil {
		return clusterFailed(r, err)
	}
	before := cr.snap()
	c, err := start(b.opt.sinkBin, []string{"run", "--config", path}, strings.TrimSuffix(path, ".yaml")+".log", nil)
	if err != nil {
		return clusterFailed(r, err)
	}
	defer b.deleteGroups(context.Background(), []string{sc.group})
	rows, perShard, reached, werr := b.waitClusterRows(ctx, cr, local, r.Expected, c.exited)
	after := cr.snap()
	serr := c.stop(60 * time.Second)
	r.Rows, r.RowsShard = rows, perShard
	if werr != nil {
		return clusterFailed(r, fmt.Errorf("%w; sink log: %s", werr, c.tail(3)))
	}
	if serr != nil {
		r.Note = "sink did not exit cleanly: " + oneLine(serr.Error())
	}
	idle := b.clusterSettle(cr)
	r.WallSec = reached.Sub(before.at).Seconds()
	rowsF := float64(r.Expected)
	r.RowsPerSec = rowsF / r.WallSec
	r.ClientCPUSec = c.usage().CPU
	r.ClientUsPerRow = r.ClientCPUSec / rowsF * 1e6
	r.ServerCPUSec = after.nodes - before.nodes
	r.ServerCPUToIdleSec = idle.nodes - before.nodes
	r.ServerUsPerRow = r.ServerCPUSec / rowsF * 1e6
	r.ServerToIdleUsPerRow = r.ServerCPUToIdleSec / rowsF * 1e6
	r.ZKCPUSec = after.zk - before.zk
	r.OtherCPUSec = max(0, (after.sysBusy-before.sysBusy)-r.ServerCPUSec-r.ZKCPUSec-r.ClientCPUSec)
	for _, n := range cr.Nodes {
		var st insertStats
		var qcpu float64
		for _, t := range []string{local, local + "_all"} {
			s, err := n.ch.insertStats(ctx, clusterDB, t, before.at)
			if err != nil {
				return clusterFailed(r, fmt.Errorf("node %s: %w", n.Native, err))
			}
			st.inserts += s.inserts
			st.parts += s.parts
			qcpu += s.queryCPU
		}
		r.InsertsNode = append(r.InsertsNode, st.inserts)
		r.InsertsMinNode = append(r.InsertsMinNode, float64(st.inserts)/(r.WallSec/60))
		r.PartsNode = append(r.PartsNode, st.parts)
		r.QueryCPUSec += qcpu
	}
	r.QueryUsPerRow = r.QueryCPUSec / rowsF * 1e6
	logf("%s run %d: %d rows in %.2fs (%.0f rows/s), inserts per node %v, client CPU %.2fs, nodes' CPU %.2fs (%.2fs to idle), in INSERT queries %.2fs",
		key, run, r.Expected, r.WallSec, r.RowsPerSec, r.InsertsNode, r.ClientCPUSec, r.ServerCPUSec, r.ServerCPUToIdleSec, r.QueryCPUSec)
	return r
}

func clusterFailed(r ClusterRun, err error) ClusterRun {
	r.Status = "failed: " + oneLine(err.Error())
	logf("%s run %d: %s", r.Key, r.Run, r.Status)
	return r
}

// clusterRows is, per shard, the most rows any of its replicas holds in
// the local table, and their sum.
func clusterRows(ctx context.Context, cr *ClusterResults, local string) (int64, []int64, error) {
	var per []int64
	var sum int64
	for _, n := range cr.Nodes {
		c, err := n.ch.int64(ctx, "SELECT count() FROM "+clusterDB+"."+local)
		if err != nil {
			return sum, per, fmt.Errorf("node %s: %w", n.Native, err)
		}
		for len(per) < n.Shard {
			per = append(per, 0)
		}
		per[n.Shard-1] = max(per[n.Shard-1], c)
	}
	for _, c := range per {
		sum += c
	}
	return sum, per, nil
}

// waitClusterRows polls until the shards hold want rows, the sink exited
// short of them, or the timeout passed.
func (b *bench) waitClusterRows(ctx context.Context, cr *ClusterResults, local string, want int64, exited <-chan struct{}) (int64, []int64, time.Time, error) {
	deadline := time.Now().Add(b.opt.timeout)
	for {
		n, per, err := clusterRows(ctx, cr, local)
		if err != nil {
			return n, per, time.Now(), err
		}
		if n >= want {
			return n, per, time.Now(), nil
		}
		select {
		case <-exited:
			if n, per, err = clusterRows(ctx, cr, local); err == nil && n >= want {
				return n, per, time.Now(), nil
			}
			return n, per, time.Now(), fmt.Errorf("the sink exited with %d of %d rows on the shards", n, want)
		case <-ctx.Done():
			return n, per, time.Now(), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return n, per, time.Now(), fmt.Errorf("%d of %d rows on the shards after %s", n, want, b.opt.timeout)
		}
	}
}

// clusterQuiesce waits, up to opt.quiet, until the nodes are nearly idle,
// so a run is not charged for the previous one's merges and replication.
// Other users of the shared cluster may keep it from ever being idle.
func (b *bench) clusterQuiesce(cr *ClusterResults) {
	deadline := time.Now().Add(b.opt.quiet)
	for {
		s0 := cr.snap()
		time.Sleep(time.Second)
		s1 := cr.snap()
		if s1.nodes-s0.nodes < 0.1 || time.Now().After(deadline) {
			return
		}
	}
}

// clusterSettle waits, up to opt.quiet, until the nodes are idle again
// after a run and returns the snapshot of when they were.
func (b *bench) clusterSettle(cr *ClusterResults) clusterSnap {
	deadline := time.Now().Add(b.opt.quiet)
	prev := cr.snap()
	for {
		time.Sleep(500 * time.Millisecond)
		s := cr.snap()
		if s.nodes-prev.nodes < 0.05 || time.Now().After(deadline) {
			return prev
		}
		prev = s
	}
}

func summarizeClusterRuns(runs []ClusterRun) []ClusterStats {
	var out []ClusterStats
	for _, v := range clusterVariants {
		st := ClusterStats{Key: v.key, Name: v.name}
		var rps, ins, cl, sv, idle, q []float64
		var perNode [][]float64
		for _, r := range runs {
			if r.Key != v.key {
				continue
			}
			st.RunsN++
			if st.Status == "" || st.Status != "ok" && r.ok() {
				st.Status = r.Status
			}
			if !r.ok() {
				continue
			}
			st.OKN++
			rps = append(rps, r.RowsPerSec)
			var all float64
			for j, m := range r.InsertsMinNode {
				all += m
				for len(perNode) <= j {
					perNode = append(perNode, nil)
				}
				perNode[j] = append(perNode[j], m)
			}
			ins = append(ins, all)
			cl = append(cl, r.ClientUsPerRow)
			sv = append(sv, r.ServerUsPerRow)
			idle = append(idle, r.ServerToIdleUsPerRow)
			q = append(q, r.QueryUsPerRow)
		}
		if st.RunsN == 0 {
			continue
		}
		st.RowsPerSec, st.InsertsMin, st.ClientUsPerRow = spreadOf(rps), spreadOf(ins), spreadOf(cl)
		st.ServerUsPerRow, st.ServerIdleUs, st.QueryUsPerRow = spreadOf(sv), spreadOf(idle), spreadOf(q)
		for _, xs := range perNode {
			st.InsertsMinNode = append(st.InsertsMinNode, spreadOf(xs).Median)
		}
		out = append(out, st)
	}
	return out
}

// clusterVerdicts compares each local variant with the Distributed path
// against the aim: at least 1.5× its rows/s with less server CPU per row.
// The ratios are of medians, and of each round's pair of runs (the two ran
// minutes apart at most, so a busy spell of the shared machine weighs on
// both): the median and range of those paired ratios.
func clusterVerdicts(stats []ClusterStats, runs []ClusterRun) []string {
	var dist *ClusterStats
	for i := range stats {
		if stats[i].Key == "cluster_distributed" && stats[i].OKN > 0 {
			dist = &stats[i]
		}
	}
	if dist == nil {
		return []string{"no successful target: distributed run: no ratio"}
	}
	var out []string
	for _, s := range stats {
		if s.Key == dist.Key || s.OKN == 0 {
			continue
		}
		ratio := s.RowsPerSec.Median / dist.RowsPerSec.Median
		// The slowest local run against the fastest Distributed one: the
		// ratio the spread still guarantees.
		worst := s.RowsPerSec.Min / dist.RowsPerSec.Max
		cpu := func(a, b Spread) string {
			if b.Median == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f×", a.Median/b.Median)
		}
		var paired []float64
		for _, a := range runs {
			if a.Key != s.Key || !a.ok() {
				continue
			}
			for _, d := range runs {
				if d.Key == dist.Key && d.Run == a.Run && d.ok() && d.RowsPerSec > 0 {
					paired = append(paired, a.RowsPerSec/d.RowsPerSec)
				}
			}
		}
		pairs := "no round with both runs ok"
		if len(paired) > 0 {
			pairs = fmt.Sprintf("per round %s over %d rounds", spreadText(spreadOf(paired), func(v float64) string { return fmt.Sprintf("%.2f×", v) }), len(paired))
		}
		met := "meets"
		if ratio < 1.5 || s.ServerIdleUs.Median >= dist.ServerIdleUs.Median || s.QueryUsPerRow.Median >= dist.QueryUsPerRow.Median {
			met = "does not meet"
		}
		out = append(out, fmt.Sprintf("%s: %.2f× the Distributed path's rows/s (median over median; %s; slowest over fastest run %.2f×), server CPU per row %s to idle and %s in the INSERT queries: %s the aim (≥ 1.5× rows/s with less server CPU per row)",
			s.Key, ratio, pairs, worst, cpu(s.ServerIdleUs, dist.ServerIdleUs), cpu(s.QueryUsPerRow, dist.QueryUsPerRow), met))
	}
	return out
}

// clusterMarkdown renders the cluster table.
func (cr *ClusterResults) markdown(w func(string, ...any), records int) {
	w("## Cluster %s (ClickHouse %s, %d nodes)\n\n", cr.Cluster, cr.Version, len(cr.Nodes))
	if cr.Error != "" {
		w("Not measured: %s\n\n", mdEscape(cr.Error))
		return
	}
	var nodes []string
	for _, n := range cr.Nodes {
		nodes = append(nodes, fmt.Sprintf("shard %d replica %d %s", n.Shard, n.Replica, n.Native))
	}
	w("The workload (%d records) by the sink's default config into fresh %s tables on every node and a Distributed table over them, per run; nodes: %s. ", records, cr.Engine, strings.Join(nodes, ", "))
	w("Runs interleaved (every variant's run 1, then run 2, …); median, range in brackets. ")
	w("rows/s: from the sink's start until every shard (the replica holding the most) has all rows. ")
	w("Server CPU: the %d nodes' processes (/proc/PID/stat), until the rows landed and until the nodes were idle again (replication fetches and merges included; other engineers' tests on the same shared cluster are counted too); ", len(cr.Nodes))
	w("in INSERTs: query_log ProfileEvents UserTimeMicroseconds+SystemTimeMicroseconds of this run's INSERT queries on every node, nothing else.\n\n")
	w("| variant | runs ok | rows/s | inserts/min (all nodes) | inserts/min per node | client CPU µs/row | server CPU µs/row (to rows landed) | server CPU µs/row (to idle) | server CPU µs/row in INSERTs |\n")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range cr.Stats {
		if s.OKN == 0 {
			w("| %s | 0/%d | %s | | | | | | |\n", mdEscape(s.Name), s.RunsN, mdEscape(s.Status))
			continue
		}
		var per []string
		for j, m := range s.InsertsMinNode {
			if j < len(cr.Nodes) {
				per = append(per, fmt.Sprintf("%d.%d: %.0f", cr.Nodes[j].Shard, cr.Nodes[j].Replica, m))
			}
		}
		w("| %s | %d/%d | %s | %s | %s | %s | %s | %s | %s |\n", mdEscape(s.Name), s.OKN, s.RunsN,
			spreadText(s.RowsPerSec, num), spreadText(s.InsertsMin, f1), strings.Join(per, ", "),
			spreadText(s.ClientUsPerRow, f2), spreadText(s.ServerUsPerRow, f2), spreadText(s.ServerIdleUs, f2), spreadText(s.QueryUsPerRow, f2))
	}
	w("\n")
	for _, v := range cr.Verdicts {
		w("- %s\n", mdEscape(v))
	}
	w("\nEvery run:\n\n| variant | run | status | wall s | rows/s | rows per shard | inserts per node | new parts per node | client CPU s | nodes' CPU s (landed / idle) | in INSERTs s | ZooKeeper CPU s | other CPU s |\n")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range cr.Runs {
		w("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s |\n", r.Key, r.Run, mdEscape(r.Status),
			f2(r.WallSec), num(r.RowsPerSec), joinInts(r.RowsShard), joinInts(r.InsertsNode), joinInts(r.PartsNode),
			f2(r.ClientCPUSec), f2(r.ServerCPUSec), f2(r.ServerCPUToIdleSec), f2(r.QueryCPUSec), f2(r.ZKCPUSec), f2(r.OtherCPUSec))
	}
	w("\n")
}

package check

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/assemble"
	"sink/internal/cluster"
	"sink/internal/writer"
)

// replicaTable is what one replica has of a route's local table.
type replicaTable struct {
	shard   int
	addr    string
	engine  string   // "" when the table does not exist there
	columns []string // "name type", in the table's order
}

// clusterCheck takes the cluster writer run writes through (or, when no
// route has a target, opens one as run would: the topology, each route's
// target and sharding checked against its Distributed table), then
// reaches every replica of every shard and, for each route with a target,
// reads its local table there (the table behind a Distributed one): the
// engine and the columns per replica. It refuses a shard with no replica
// reached, a replica without the local table, and local tables whose columns
// differ across replicas (a half-applied ALTER: an INSERT would fail on some
// shards or replicas and not on others).
func clusterCheck(ctx context.Context, cfg *config.Config, parts *assemble.Parts, stdout io.Writer) error {
	cw := parts.Cluster
	if cw == nil {
		var err error
		if cw, err = writer.OpenCluster(ctx, cfg.Name, cfg.ClickHouse, cfg.Routes); err != nil {
			return err
		}
		defer cw.Close()
	}
	cc := &clusterChecker{cfg: cfg, out: stdout, topo: cw.Topology(), conns: map[string]*writer.Writer{}}
	cc.name = cc.topo.Name
	if cc.name == "" {
		cc.name = "clickhouse.shards"
	}
	fmt.Fprintf(stdout, "cluster: %s: %s\n", cc.name, cc.topo)
	defer cc.close()
	if err := cc.reach(ctx); err != nil {
		return err
	}
	for _, route := range cfg.Routes {
		if route.Target == "" || strings.Contains(route.Table, "${") {
			continue
		}
		if err := cc.route(ctx, parts.Sink.Conn(), route); err != nil {
			return err
		}
	}
	return nil
}

// clusterChecker is one cluster check: the topology and a connection to
// each replica reached.
type clusterChecker struct {
	cfg   *config.Config
	out   io.Writer
	topo  *cluster.Topology
	name  string
	conns map[string]*writer.Writer // by replica address
}

func (cc *clusterChecker) close() {
	for _, w := range cc.conns {
		w.Close()
	}
}

// reach connects to every replica of every shard and prints which answer;
// a shard with none is an error.
func (cc *clusterChecker) reach(ctx context.Context) error {
	for _, s := range cc.topo.Shards {
		reached := 0
		for _, r := range s.Replicas {
			v, err := cc.connect(ctx, r.Addr)
			if err != nil {
				fmt.Fprintf(cc.out, "cluster: shard %d replica %d %s: not reached: %v\n", s.Num, r.Num, r.Addr, err)
				continue
			}
			reached++
			fmt.Fprintf(cc.out, "cluster: shard %d replica %d %s: reached (ClickHouse %s)\n", s.Num, r.Num, r.Addr, v)
		}
		if reached == 0 {
			return fmt.Errorf("cluster %s: no replica of shard %d answers; its rows could not be written", cc.name, s.Num)
		}
	}
	return nil
}

// connect opens a writer to the replica at addr, with the connector's
// ClickHouse settings, and returns the server's version.
func (cc *clusterChecker) connect(ctx context.Context, addr string) (string, error) {
	rc := cc.cfg.ClickHouse
	rc.Addrs = []string{addr}
	w, err := writer.Open(ctx, cc.cfg.Name, rc)
	if err != nil {
		return "", err
	}
	var v string
	if err := w.Conn().QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		w.Close()
		return "", err
	}
	cc.conns[addr] = w
	return v, nil
}

// route reads route's local table on every replica reached (seed finds
// which table that is), refuses replicas that differ, and prints the
// local table's deduplication window.
func (cc *clusterChecker) route(ctx context.Context, seed driver.Conn, route config.Route) error {
	db, table := cc.cfg.ClickHouse.Database, route.Table
	if d, t, ok := strings.Cut(route.Table, "."); ok {
		db, table = d, t
	}
	localDB, localName, err := writer.LocalTable(ctx, seed, db, table)
	if err != nil {
		return err
	}
	tables, err := cc.replicaTables(ctx, route, localDB, localName)
	if err != nil {
		return err
	}
	if err := sameColumns(route, localDB+"."+localName, tables); err != nil {
		return err
	}
	if len(tables) == 0 {
		return nil
	}
	// Deduplication of a retried part is the local table's: on
	// ReplicatedMergeTree, replicated_deduplication_window in ZooKeeper.
	ds, err := writer.DedupWindows(ctx, cc.conns[tables[0].addr].Conn(), []*writer.Table{{Database: localDB, Name: localName}})
	if err != nil {
		return err
	}
	for _, d := range ds {
		fmt.Fprintf(cc.out, "cluster: route table %s (target %s): local %s\n", route.Table, route.Target, d)
	}
	return nil
}

// replicaTables reads the local table db.table on every replica reached
// and prints what each has.
func (cc *clusterChecker) replicaTables(ctx context.Context, route config.Route, db, table string) ([]replicaTable, error) {
	var tables []replicaTable
	for _, s := range cc.topo.Shards {
		for _, r := range s.Replicas {
			w := cc.conns[r.Addr]
			if w == nil {
				continue
			}
			rt, err := readReplicaTable(ctx, w, db, table)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: shard %d replica %s: %w", cc.name, s.Num, r.Addr, err)
			}
			rt.shard, rt.addr = s.Num, r.Addr
			tables = append(tables, rt)
			fmt.Fprintf(cc.out, "cluster: route table %s (target %s): shard %d replica %s: %s.%s %s, %d columns\n",
				route.Table, route.Target, s.Num, r.Addr, db, table, orMissing(rt.engine), len(rt.columns))
		}
	}
	return tables, nil
}

func orMissing(engine string) string {
	if engine == "" {
		return "missing"
	}
	return engine
}

func readReplicaTable(ctx context.Context, w *writer.Writer, db, table string) (replicaTable, error) {
	var rt replicaTable
	rows, err := w.Conn().Query(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", db, table)
	if err != nil {
		return rt, fmt.Errorf("reading the engine of %s.%s: %w", db, table, err)
	}
	for rows.Next() {
		if err := rows.Scan(&rt.engine); err != nil {
			rows.Close()
			return rt, err
		}
	}
	rows.Close()
	if rt.engine == "" {
		return rt, nil
	}
	rc, err := writer.ReadReplicaColumns(ctx, w, db, table)
	rt.columns = rc.Columns
	return rt, err
}

// sameColumns refuses a route whose local table is missing on a replica or
// has other columns there than on the first replica.
func sameColumns(route config.Route, local string, tables []replicaTable) error {
	if len(tables) == 0 {
		return nil
	}
	for _, t := range tables {
		if t.engine == "" {
			return fmt.Errorf("cluster: route table %s (target %s): the local table %s does not exist on shard %d replica %s; create it there (CREATE TABLE … ON CLUSTER) before running",
				route.Table, route.Target, local, t.shard, t.addr)
		}
	}
	rcs := make([]writer.ReplicaColumns, len(tables))
	for i, t := range tables {
		rcs[i] = writer.ReplicaColumns{Shard: t.shard, Addr: t.addr, Exists: true, Columns: t.columns}
	}
	ref := tables[0]
	diffs := writer.ColumnDiffs(rcs)
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("cluster: route table %s (target %s): the local table %s has other columns on some replicas than on shard %d replica %s: %s; ALTER it ON CLUSTER (docs/cluster.md#a-half-applied-alter-is-waited-for)",
		route.Table, route.Target, local, ref.shard, ref.addr, strings.Join(diffs, "; "))
}

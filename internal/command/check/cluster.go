package check

import (
	"context"
	"fmt"
	"io"
	"strings"

	"sink/config"
	"sink/internal/writer"
)

// replicaTable is what one replica has of a route's local table.
type replicaTable struct {
	shard   int
	addr    string
	engine  string   // "" when the table does not exist there
	columns []string // "name type", in the table's order
}

// clusterCheck opens the cluster writer as run does (the topology, each
// route's target and sharding checked against its Distributed table), then
// reaches every replica of every shard and, for each route with a target,
// reads its local table there (the table behind a Distributed one): the
// engine and the columns per replica. It refuses a shard with no replica
// reached, a replica without the local table, and local tables whose columns
// differ across replicas (a half-applied ALTER: an INSERT would fail on some
// shards or replicas and not on others).
func clusterCheck(ctx context.Context, cfg *config.Config, seed *writer.Writer, stdout io.Writer) error {
	cw, err := writer.OpenCluster(ctx, cfg.Name, cfg.ClickHouse, cfg.Routes)
	if err != nil {
		return err
	}
	defer cw.Close()
	topo := cw.Topology()
	name := topo.Name
	if name == "" {
		name = "clickhouse.shards"
	}
	fmt.Fprintf(stdout, "cluster: %s: %s\n", name, topo)

	conns := map[string]*writer.Writer{}
	for _, s := range topo.Shards {
		reached := 0
		for _, r := range s.Replicas {
			rc := cfg.ClickHouse
			rc.Addrs = []string{r.Addr}
			w, err := writer.Open(ctx, cfg.Name, rc)
			if err != nil {
				fmt.Fprintf(stdout, "cluster: shard %d replica %d %s: not reached: %v\n", s.Num, r.Num, r.Addr, err)
				continue
			}
			defer w.Close()
			var v string
			if err := w.Conn().QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
				fmt.Fprintf(stdout, "cluster: shard %d replica %d %s: not reached: %v\n", s.Num, r.Num, r.Addr, err)
				continue
			}
			reached++
			conns[r.Addr] = w
			fmt.Fprintf(stdout, "cluster: shard %d replica %d %s: reached (ClickHouse %s)\n", s.Num, r.Num, r.Addr, v)
		}
		if reached == 0 {
			return fmt.Errorf("cluster %s: no replica of shard %d answers; its rows could not be written", name, s.Num)
		}
	}

	for _, route := range cfg.Routes {
		if route.Target == "" || strings.Contains(route.Table, "${") {
			continue
		}
		db, table := cfg.ClickHouse.Database, route.Table
		if d, t, ok := strings.Cut(route.Table, "."); ok {
			db, table = d, t
		}
		localDB, localName, err := writer.LocalTable(ctx, seed.Conn(), db, table)
		if err != nil {
			return err
		}
		var tables []replicaTable
		for _, s := range topo.Shards {
			for _, r := range s.Replicas {
				w := conns[r.Addr]
				if w == nil {
					continue
				}
				rt, err := readReplicaTable(ctx, w, localDB, localName)
				if err != nil {
					return fmt.Errorf("cluster %s: shard %d replica %s: %w", name, s.Num, r.Addr, err)
				}
				rt.shard, rt.addr = s.Num, r.Addr
				tables = append(tables, rt)
				fmt.Fprintf(stdout, "cluster: route table %s (target %s): shard %d replica %s: %s.%s %s, %d columns\n",
					route.Table, route.Target, s.Num, r.Addr, localDB, localName, orMissing(rt.engine), len(rt.columns))
			}
		}
		if err := sameColumns(route, localDB+"."+localName, tables); err != nil {
			return err
		}
		// Deduplication of a retried part is the local table's: on
		// ReplicatedMergeTree, replicated_deduplication_window in ZooKeeper.
		if len(tables) > 0 {
			ds, err := writer.DedupWindows(ctx, conns[tables[0].addr].Conn(), []*writer.Table{{Database: localDB, Name: localName}})
			if err != nil {
				return err
			}
			for _, d := range ds {
				fmt.Fprintf(stdout, "cluster: route table %s (target %s): local %s\n", route.Table, route.Target, d)
			}
		}
	}
	return nil
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

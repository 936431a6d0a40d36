package writer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/adapt"
	"sink/internal/cluster"
)

// Parts is PartsOf for one table.
func (c *Cluster) Parts(ctx context.Context, db, table string) (adapt.Parts, error) {
	key := TableName{Database: db, Name: table}
	m, err := c.PartsOf(ctx, []TableName{key})
	if err != nil {
		return adapt.Parts{}, err
	}
	return m[key], nil
}

// PartsOf is Writer.PartsOf over the cluster, for batch.mode adaptive: a
// table written with a target is as pressed as its most pressed server, so
// it reads the parts of the table that holds them (the local table behind
// a Distributed one) on every replica of every shard, all such tables of
// a replica in one PartsOf, and gives each table the observation that asks
// for the most pressure (adapt.MostPressed). A replica that cannot be read
// is passed over; a table gets an error only when none could be. Tables
// without a target are read as Writer.PartsOf reads them.
func (c *Cluster) PartsOf(ctx context.Context, tables []TableName) (map[TableName]adapt.Parts, error) {
	plain, local, err := c.partsTables(ctx, tables)
	if err != nil {
		return nil, err
	}
	out, err := c.Writer.PartsOf(ctx, plain)
	if err != nil {
		return nil, err
	}
	if len(local) == 0 {
		return out, nil
	}
	var locals []TableName
	for _, l := range local {
		if !slices.Contains(locals, l) {
			locals = append(locals, l)
		}
	}
	obs, errs := c.partsOnReplicas(ctx, locals)
	for t, l := range local {
		if len(obs[l]) == 0 {
			return nil, errors.Join(errs...)
		}
		out[t] = adapt.MostPressed(obs[l])
	}
	return out, nil
}

// partsTables sorts tables into those without a target (plain) and those
// with one, each mapped to the table that holds its rows on the shards.
func (c *Cluster) partsTables(ctx context.Context, tables []TableName) (plain []TableName, local map[TableName]TableName, err error) {
	local = map[TableName]TableName{}
	for _, t := range tables {
		tt, err := c.target(ctx, t.Database, t.Name)
		if err != nil {
			return nil, nil, err
		}
		if tt == nil {
			plain = append(plain, t)
			continue
		}
		l := TableName{Database: tt.localDB, Name: tt.localName}
		if tt.target == config.TargetDistributed {
			if l.Database, l.Name, err = LocalTable(ctx, c.conn, t.Database, t.Name); err != nil {
				return nil, nil, err
			}
		}
		local[t] = l
	}
	return plain, local, nil
}

// partsOnReplicas reads the parts of locals on every replica of every
// shard: each table's observations, and an error for each replica that
// could not be read.
func (c *Cluster) partsOnReplicas(ctx context.Context, locals []TableName) (map[TableName][]adapt.Parts, []error) {
	var (
		obs  = map[TableName][]adapt.Parts{}
		errs []error
	)
	lay := c.lay.Load()
	for si, reps := range lay.shards {
		for ri, w := range reps {
			m, err := w.PartsOf(ctx, locals)
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d replica %s: %w", lay.topo.Shards[si].Num, lay.topo.Shards[si].Replicas[ri].Addr, err))
				continue
			}
			for l, p := range m {
				obs[l] = append(obs[l], p)
			}
		}
	}
	return obs, errs
}

// Servers names the servers a batch of db.table is inserted into, each
// with its own budget of INSERTs per minute: for a table with a target,
// every shard ("shard N"), since a batch may be split over all of them
// and each shard receives its part as an INSERT of its own (a Distributed
// table's INSERT reaches every shard the same way); nil for any other
// table, which the pipeline counts against clickhouse.addrs. A table whose
// target cannot be read now is counted as one without.
func (c *Cluster) Servers(db, table string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.QueryTimeout)
	defer cancel()
	tt, err := c.target(ctx, db, table)
	if err != nil || tt == nil {
		return nil
	}
	lay := c.lay.Load()
	out := make([]string, len(lay.topo.Shards))
	for i, s := range lay.topo.Shards {
		out[i] = fmt.Sprintf("shard %d", s.Num)
	}
	return out
}

// LocalTable is the table that holds db.table's rows on each shard: the
// local table a Distributed table spreads its rows over (in db when the
// engine names no database or an expression), else db.table itself.
func LocalTable(ctx context.Context, conn driver.Conn, db, table string) (string, string, error) {
	var engine, engineFull string
	err := conn.QueryRow(ctx, "SELECT engine, engine_full FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&engine, &engineFull)
	if err != nil {
		return "", "", fmt.Errorf("clickhouse: table %s.%s: reading its engine: %w", db, table, err)
	}
	dist, err := ParseDistributed(engine, engineFull)
	if err != nil {
		return "", "", fmt.Errorf("clickhouse: table %s.%s: %w", db, table, err)
	}
	if dist == nil {
		return db, table, nil
	}
	if dist.Database != "" && !strings.ContainsAny(dist.Database, "()") {
		db = dist.Database
	}
	return db, dist.Table, nil
}

// Placement fingerprints how Insert splits db.table's batches across the
// shards now: for a target local route with a sharding_key, a hash of the
// key, its hash function and the shards' numbers and weights in order
// (what decides which shard a row goes to); "" for a table that is not
// split by key (no target, the Distributed table, sharding: random).
// Exactly-once delivery records it with each batch, since a batch rebuilt
// after a crash splits the same way only under the same placement.
func (c *Cluster) Placement(ctx context.Context, db, table string) (string, error) {
	tt, err := c.target(ctx, db, table)
	if err != nil || tt == nil || tt.target != config.TargetLocal || tt.random {
		return "", err
	}
	return placementOf(tt.key, tt.hash, c.lay.Load().topo), nil
}

// placementOf is Placement's fingerprint: 16 hex digits.
func placementOf(key, hash string, topo *cluster.Topology) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\n", key, hash)
	for _, s := range topo.Shards {
		fmt.Fprintf(h, "%d:%d\n", s.Num, s.Weight)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ShardReplica is one replica of one shard, with the sink's connection to it
// (a pool that dials on first use).
type ShardReplica struct {
	Shard int    // the shard's number, from 1
	Addr  string // host:port
	Conn  driver.Conn
}

// LocalSet is where a table written with target: local keeps its rows: the
// local table (Database.Name) on every replica of every shard, shard by
// shard in the cluster's order.
type LocalSet struct {
	Database, Name string
	Shards         [][]ShardReplica
}

// Local returns where db.table's rows are kept when its route has target:
// local (the route's table itself, or the local table behind it when it is
// a Distributed table over the cluster with the route's sharding
// expression, as Insert resolved it); ok is false for a table written
// another way (no target, target distributed). Exactly-once delivery reads
// every shard's local table through it: the deduplication windows that
// drop a replay, and the offsets already held after a rewind.
func (c *Cluster) Local(ctx context.Context, db, table string) (LocalSet, bool, error) {
	tt, err := c.target(ctx, db, table)
	if err != nil || tt == nil || tt.target != config.TargetLocal {
		return LocalSet{}, false, err
	}
	lay := c.lay.Load()
	set := LocalSet{Database: tt.localDB, Name: tt.localName, Shards: make([][]ShardReplica, len(lay.shards))}
	for si, reps := range lay.shards {
		for ri, w := range reps {
			set.Shards[si] = append(set.Shards[si], ShardReplica{Shard: lay.topo.Shards[si].Num,
				Addr: lay.topo.Shards[si].Replicas[ri].Addr, Conn: w.conn})
		}
	}
	return set, true, nil
}

package writer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/adapt"
	"sink/internal/cluster"
)

// Parts is Writer.Parts over the cluster, for batch.mode adaptive: a table
// written with a target is as pressed as its most pressed server, so it reads
// the parts of the table that holds them (the local table behind a
// Distributed one) on every replica of every shard and returns the
// observation that asks for the most pressure (adapt.MostPressed). A replica
// that cannot be read is passed over; an error only when none could be. A
// table without a target is read as Writer.Parts reads it.
func (c *Cluster) Parts(ctx context.Context, db, table string) (adapt.Parts, error) {
	tt, err := c.target(ctx, db, table)
	if err != nil {
		return adapt.Parts{}, err
	}
	if tt == nil {
		return c.Writer.Parts(ctx, db, table)
	}
	localDB, localName := tt.localDB, tt.localName
	if tt.target == config.TargetDistributed {
		if localDB, localName, err = LocalTable(ctx, c.conn, db, table); err != nil {
			return adapt.Parts{}, err
		}
	}
	var (
		obs  []adapt.Parts
		errs []error
	)
	lay := c.lay.Load()
	for si, reps := range lay.shards {
		for ri, w := range reps {
			p, err := w.Parts(ctx, localDB, localName)
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d replica %s: %w", lay.topo.Shards[si].Num, lay.topo.Shards[si].Replicas[ri].Addr, err))
				continue
			}
			obs = append(obs, p)
		}
	}
	if len(obs) == 0 {
		return adapt.Parts{}, errors.Join(errs...)
	}
	return adapt.MostPressed(obs), nil
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

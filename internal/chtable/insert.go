package chtable

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"sink/internal/chschema"
)

// Attempt describes a failed attempt, for logs and metrics.
type Attempt struct {
	N     int
	Err   error
	Class Class
	Code  int32
	Wait  time.Duration
	// On a cluster: the replica that failed, and the one the next attempt
	// goes to when that is another (a failover); "" on a single server.
	Replica, Next string
}

// Refresh is called by a sink's Insert after a schema error
// (RefreshSchema: a column or the table is unknown to the server). It
// re-reads the table and returns the target and block to retry with (see
// Project), or an error (with ErrNoTable when the table is gone).
type Refresh func(ctx context.Context, t *Table, block chschema.Block) (*Table, chschema.Block, error)

type insertSettingsKey struct{}

// WithInsertSettings returns ctx carrying settings for the INSERTs made with
// it, on top of clickhouse.settings (they win on a clash): the
// deduplication token of one batch, for instance.
func WithInsertSettings(ctx context.Context, s clickhouse.Settings) context.Context {
	return context.WithValue(ctx, insertSettingsKey{}, s)
}

// InsertSettings are the settings ctx carries (WithInsertSettings); nil
// when none.
func InsertSettings(ctx context.Context) clickhouse.Settings {
	s, _ := ctx.Value(insertSettingsKey{}).(clickhouse.Settings)
	return s
}

// WithDedupToken returns ctx carrying the settings of an INSERT whose
// block ClickHouse deduplicates by token (exactly-once delivery): the
// token, the same deduplication in the materialized views the table feeds,
// and no async insert (which would give the token to a buffer, not to this
// block). A clustered target sends each shard's part with them.
func WithDedupToken(ctx context.Context, token string) context.Context {
	return WithInsertSettings(ctx, clickhouse.Settings{
		"insert_deduplication_token":                         token,
		"deduplicate_blocks_in_dependent_materialized_views": 1,
		"async_insert": 0,
	})
}

// WithDistributedSync returns ctx carrying the setting that makes an
// INSERT into a Distributed table synchronous: it returns only once every
// shard has its rows (insert_distributed_sync, the older name of
// distributed_foreground_insert, which newer servers keep).
func WithDistributedSync(ctx context.Context) context.Context {
	return WithInsertSettings(ctx, clickhouse.Settings{"insert_distributed_sync": 1})
}

// DedupToken is the token ctx carries (WithDedupToken); "" when none.
func DedupToken(ctx context.Context) string {
	tok, _ := InsertSettings(ctx)["insert_deduplication_token"].(string)
	return tok
}

type shardInsertedKey struct{}

// WithShardInserted returns ctx with f, which a sink that splits batches
// across a cluster's shards calls once for every shard part of a target
// local batch that is in, with the shard's number (from 1) and the part's
// rows: one call per INSERT into a shard's local table. f is called from
// the parts' goroutines, concurrently, and must be safe for that; a table
// without target, or with target distributed (one INSERT into the
// Distributed table), never calls it.
func WithShardInserted(ctx context.Context, f func(shard, rows int)) context.Context {
	return context.WithValue(ctx, shardInsertedKey{}, f)
}

// ShardInserted is the function ctx carries (WithShardInserted); nil when
// none.
func ShardInserted(ctx context.Context) func(shard, rows int) {
	f, _ := ctx.Value(shardInsertedKey{}).(func(int, int))
	return f
}

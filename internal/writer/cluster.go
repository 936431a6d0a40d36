package writer

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/cluster"
)

// Cluster is the Sink of a configuration with clickhouse.cluster or
// clickhouse.shards. It is a Writer on clickhouse.addrs (schemas, DDL,
// reads, and the tables of routes without a target) that inserts the
// batches of the routes with a target itself:
//
//   - target distributed: the batch is one INSERT into the Distributed
//     table, synchronous (insert_distributed_sync=1, or
//     distributed_foreground_insert=1 where the server has that name), so
//     it returns only once every shard has its rows; it goes first to the
//     node clickhouse.replica_order picks among all of them, and a
//     retriable failure moves the identical block to the next node.
//   - target local: the batch is one part per shard (all of it to one
//     shard, by weight, with sharding: random; by the sharding key's hash
//     otherwise, as the Distributed engine places rows: the parts of a
//     block placed as it was decoded, see Placer, else the batch split
//     here), each part one INSERT
//     into that shard's local table, sent first to the replica
//     clickhouse.replica_order picks (round_robin: the shard's replicas in
//     turn, part after part), retried as the identical block on the
//     shard's next replicas until it succeeds. Insert returns only when
//     every part is in, so the batch's offsets are committed only then; a
//     part that succeeded is never sent again while another shard's part
//     is retried.
//
// Concurrency: safe for concurrent use, like Writer. The layout (topology
// and replica pools) is replaced whole, atomically, when a schema re-read
// finds system.clusters changed; the per-table targets are resolved once
// under mu.
type Cluster struct {
	*Writer
	cfg    config.ClickHouse
	name   string
	routes []config.Route
	lay    atomic.Pointer[layout]
	// syncSetting is the server's name for a synchronous Distributed INSERT.
	syncSetting string
	obs         ClusterObserver

	mu         sync.Mutex
	targets    map[string]*tableTarget // by db.table of the route's table
	discovered time.Time               // when system.clusters was last read
}

// layout is the cluster as last read: its topology and, per shard, a
// Writer per replica (pools that dial on first use).
type layout struct {
	topo   *cluster.Topology
	shards [][]*Writer
	nodes  []*Writer // every replica, for target distributed
	// next counts, per shard, the parts sent, for replica_order
	// round_robin (the last entry counts the Distributed INSERTs sent to
	// nodes).
	next   []atomic.Uint64
	byAddr map[string]*Writer
}

// tableTarget is how one table's batches are written.
type tableTarget struct {
	target string // config.TargetDistributed or config.TargetLocal
	random bool
	key    string // the sharding key column
	hash   string // its sharding_hash
	// local is the table written on each shard (target local).
	localDB, localName string
	mu                 sync.Mutex
	hashes             map[string]*cluster.KeyHash // by key column type
	// placed is the placement of the key's hash on topo, the topology
	// it was made for (Placer), so that the blocks placed by it share it.
	placed *cluster.Placement
	topo   *cluster.Topology
	// schemaDiffs are how the local tables differed across replicas when
	// last read (ColumnDiffs): nil when they agree.
	schemaDiffs []string
}

// ClusterObserver receives the per-shard, per-replica outcomes (metrics).
// shard is the shard's number (from 1); replica its address.
type ClusterObserver interface {
	ShardInserted(shard int, replica string, rows int)
	ShardFailed(shard int, replica string, code int32, failover bool)
}

// OpenCluster opens the writer on clickhouse.addrs, reads the topology
// (system.clusters for clickhouse.cluster, or clickhouse.shards) and
// resolves every route's target that names its table literally. routes are
// the configuration's routes.
func OpenCluster(ctx context.Context, name string, cfg config.ClickHouse, routes []config.Route) (*Cluster, error) {
	w, err := Open(ctx, name, cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Writer: w, cfg: cfg, name: name, routes: routes, targets: map[string]*tableTarget{}}
	if err := c.discover(ctx); err != nil {
		w.Close()
		return nil, err
	}
	c.syncSetting = "insert_distributed_sync"
	var n uint64
	if err := w.conn.QueryRow(ctx, "SELECT count() FROM system.settings WHERE name = 'distributed_foreground_insert'").Scan(&n); err != nil {
		w.Close()
		return nil, fmt.Errorf("clickhouse: reading system.settings: %w", err)
	}
	if n > 0 {
		c.syncSetting = "distributed_foreground_insert"
	}
	for _, r := range routes {
		if r.Target == "" || strings.Contains(r.Table, "${") {
			continue
		}
		db, table := tableOf(cfg.Database, r.Table)
		if _, err := c.target(ctx, db, table); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Observe sends the per-shard outcomes to o from now on; call it before
// the first Insert.
func (c *Cluster) Observe(o ClusterObserver) { c.obs = o }

// Topology is the cluster as last read.
func (c *Cluster) Topology() *cluster.Topology { return c.lay.Load().topo }

// SyncSetting is the setting that makes a Distributed INSERT synchronous
// on this server.
func (c *Cluster) SyncSetting() string { return c.syncSetting }

func tableOf(defaultDB, table string) (string, string) {
	if db, t, ok := strings.Cut(table, "."); ok {
		return db, t
	}
	return defaultDB, table
}

// discover reads the topology and builds a new layout, reusing the pools of
// replicas it already had.
func (c *Cluster) discover(ctx context.Context) error {
	var (
		topo *cluster.Topology
		err  error
	)
	if len(c.cfg.Shards) > 0 {
		topo, err = cluster.FromShards(c.cfg.Shards)
		if err == nil {
			topo.Name = c.cfg.Cluster
		}
	} else {
		topo, err = cluster.Discover(ctx, c.conn, c.cfg.Cluster)
	}
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	if topo.TotalWeight() == 0 {
		return fmt.Errorf("clickhouse: cluster %s: every shard has weight 0", topo.Name)
	}
	old := c.lay.Load()
	lay := &layout{topo: topo, byAddr: map[string]*Writer{}, next: make([]atomic.Uint64, len(topo.Shards)+1)}
	for _, s := range topo.Shards {
		var reps []*Writer
		for _, r := range s.Replicas {
			w := lay.byAddr[r.Addr]
			if w == nil && old != nil {
				w = old.byAddr[r.Addr]
			}
			if w == nil {
				rc := c.cfg
				rc.Addrs = []string{r.Addr}
				if w, _, _, err = openPool(c.name, rc); err != nil {
					return err
				}
			}
			lay.byAddr[r.Addr] = w
			reps = append(reps, w)
			lay.nodes = append(lay.nodes, w)
		}
		lay.shards = append(lay.shards, reps)
	}
	c.lay.Store(lay)
	c.discovered = time.Now()
	return nil
}

// Describe reads a table's columns; on a cluster named by
// clickhouse.cluster it also reads system.clusters again when
// clickhouse.schema_refresh has passed since the last read, so that
// shards and replicas added to remote_servers are written without a
// restart.
func (c *Cluster) Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error) {
	cols, err := c.Writer.Describe(ctx, db, table)
	if err != nil {
		return cols, err
	}
	// The local tables on every replica too: Insert holds the table's
	// parts while they differ. And the sharding key's hash is checked
	// against the server now, so that Placer has it for the first batch.
	if tt, terr := c.target(ctx, db, table); terr == nil && tt != nil {
		_, _ = c.schemaDiffs(ctx, tt, db, table)
		if typ, ok := keyType(tt, cols); ok {
			_, _ = c.keyHash(ctx, tt, typ)
		}
	}
	if len(c.cfg.Shards) > 0 || c.cfg.SchemaRefresh <= 0 {
		return cols, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.discovered) >= c.cfg.SchemaRefresh {
		if derr := c.discover(ctx); derr != nil {
			// The layout read before stays; the next re-read tries again.
			c.discovered = time.Now()
		}
	}
	return cols, nil
}

// Close closes every pool.
func (c *Cluster) Close() error {
	err := c.Writer.Close()
	if lay := c.lay.Load(); lay != nil {
		for _, w := range lay.byAddr {
			if w != c.Writer {
				_ = w.Close()
			}
		}
	}
	return err
}

// routeFor finds the route that writes db.table: the one naming it, else
// the routes with a target whose table comes from the topic, when they
// all place rows the same way.
func (c *Cluster) routeFor(db, table string) (config.Route, bool) {
	var tmpl []config.Route
	for _, r := range c.routes {
		if strings.Contains(r.Table, "${") {
			tmpl = append(tmpl, r)
			continue
		}
		if rdb, rt := tableOf(c.cfg.Database, r.Table); rdb == db && rt == table {
			return r, true
		}
	}
	for _, r := range tmpl {
		if r.Target != tmpl[0].Target || r.Sharding != tmpl[0].Sharding || r.ShardingKey != tmpl[0].ShardingKey || r.Hash() != tmpl[0].Hash() {
			return config.Route{}, false
		}
	}
	if len(tmpl) == 0 {
		return config.Route{}, false
	}
	return tmpl[0], true
}

// target resolves how db.table is written: nil for a route without target.
func (c *Cluster) target(ctx context.Context, db, table string) (*tableTarget, error) {
	full := db + "." + table
	c.mu.Lock()
	defer c.mu.Unlock()
	if tt, ok := c.targets[full]; ok {
		return tt, nil
	}
	r, ok := c.routeFor(db, table)
	if !ok {
		return nil, fmt.Errorf("clickhouse: no single route target for table %s (its routes place rows differently)", full)
	}
	if r.Target == "" {
		c.targets[full] = nil
		return nil, nil
	}
	tt := &tableTarget{target: r.Target, random: r.Sharding == config.ShardingRandom, key: r.ShardingKey, hash: r.Hash(),
		localDB: db, localName: table, hashes: map[string]*cluster.KeyHash{}}
	var engine, engineFull string
	err := c.conn.QueryRow(ctx, "SELECT engine, engine_full FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&engine, &engineFull)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: table %s: reading its engine: %w", full, err)
	}
	dist, err := ParseDistributed(engine, engineFull)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: table %s: %w", full, err)
	}
	if err := c.placeOn(full, engine, tt, dist); err != nil {
		return nil, err
	}
	if err := checkShardingKey(full, tt, dist); err != nil {
		return nil, err
	}
	c.targets[full] = tt
	return tt, nil
}

// placeOn checks the route's target against the table's engine (dist is
// nil for a table that is not Distributed) and, for target: local on a
// Distributed table, points tt at the local table it distributes over.
func (c *Cluster) placeOn(full, engine string, tt *tableTarget, dist *Distributed) error {
	if dist == nil {
		if tt.target == config.TargetDistributed {
			return fmt.Errorf("clickhouse: table %s is %s, not a Distributed table; a target: distributed route inserts into a Distributed table (or use target: local)", full, engine)
		}
		return nil
	}
	if c.cfg.Cluster != "" && dist.Cluster != c.cfg.Cluster {
		return fmt.Errorf("clickhouse: table %s is Distributed over cluster %s, not clickhouse.cluster %s", full, dist.Cluster, c.cfg.Cluster)
	}
	if tt.target == config.TargetLocal {
		tt.localName = dist.Table
		if dist.Database != "" && !strings.ContainsAny(dist.Database, "()") { // not currentDatabase()
			tt.localDB = dist.Database
		}
	}
	return nil
}

// checkShardingKey refuses a target: local route whose sharding key is not
// the Distributed table's own (a Distributed table that shards by rand()
// or by nothing reads rows wherever they are).
func checkShardingKey(full string, tt *tableTarget, dist *Distributed) error {
	if tt.target != config.TargetLocal || tt.random || dist == nil || dist.ShardingKey == "" || strings.EqualFold(normExpr(dist.ShardingKey), "rand()") {
		return nil
	}
	want := tt.hash + "(" + tt.key + ")"
	if tt.hash == cluster.HashIdentity {
		want = tt.key
	}
	if normExpr(dist.ShardingKey) != normExpr(want) {
		return fmt.Errorf("clickhouse: table %s shards by %s, the route by %s: rows the sink places would not be where the Distributed table looks for them; make them equal", full, dist.ShardingKey, want)
	}
	return nil
}

// normExpr drops spaces and backticks, for comparing sharding expressions.
func normExpr(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '`' || r == '"' {
			return -1
		}
		return r
	}, s)
}

// Distributed is what a Distributed table's engine names.
type Distributed struct {
	Cluster, Database, Table string
	ShardingKey              string // "" when it has none
}

// ParseDistributed reads engine_full of a Distributed table
// ("Distributed('c', 'db', 'local', cityHash64(id))"); nil for other engines.
func ParseDistributed(engine, engineFull string) (*Distributed, error) {
	if engine != "Distributed" {
		return nil, nil
	}
	args, ok := engineArgs(engineFull)
	if !ok || len(args) < 3 {
		return nil, fmt.Errorf("cannot read the Distributed engine's arguments from %q", engineFull)
	}
	d := &Distributed{Cluster: unquoteArg(args[0]), Database: unquoteArg(args[1]), Table: unquoteArg(args[2])}
	if len(args) > 3 {
		d.ShardingKey = args[3]
	}
	return d, nil
}

// engineArgs splits the arguments of the first parenthesis of engineFull at
// its top-level commas, each trimmed; ok is false when the parenthesis is
// missing or not closed. Quoted text and nested calls stay whole.
func engineArgs(engineFull string) (args []string, ok bool) {
	open := strings.IndexByte(engineFull, '(')
	if open < 0 {
		return nil, false
	}
	depth, quote := 0, byte(0)
	start := open + 1
	for i := open; i < len(engineFull); i++ {
		ch := engineFull[i]
		switch {
		case quote != 0:
			if ch == '\\' {
				i++
			} else if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"' || ch == '`':
			quote = ch
		case ch == '(':
			depth++
		case ch == ')':
			if depth--; depth == 0 {
				return append(args, strings.TrimSpace(engineFull[start:i])), true
			}
		case ch == ',' && depth == 1:
			args = append(args, strings.TrimSpace(engineFull[start:i]))
			start = i + 1
		}
	}
	return nil, false
}

// unquoteArg strips the quotes of a quoted engine argument ('db', `db`,
// "db") and undoes its escaped single quotes; other text is returned as is.
func unquoteArg(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '`' || s[0] == '"') && s[len(s)-1] == s[0] {
		return strings.ReplaceAll(s[1:len(s)-1], `\'`, `'`)
	}
	return s
}

// keyHash is the route's hash for a key column of type typ, checked once
// against the server's own function (so a server without it, like 18.16
// without xxHash64, refuses the route in one line).
func (c *Cluster) keyHash(ctx context.Context, tt *tableTarget, typ string) (*cluster.KeyHash, error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if h, ok := tt.hashes[typ]; ok {
		return h, nil
	}
	h, err := cluster.NewKeyHash(tt.hash, typ)
	if err != nil {
		return nil, fmt.Errorf("sharding_key %s: %w", tt.key, err)
	}
	if err := cluster.CheckHash(ctx, c.conn, h, typ); err != nil {
		return nil, fmt.Errorf("sharding_key %s: %w", tt.key, err)
	}
	tt.hashes[typ] = h
	return h, nil
}

// keyType is the type of tt's sharding key among cols; ok is false for a
// target that places no row by a key, or when cols lack it.
func keyType(tt *tableTarget, cols []chschema.ColumnSchema) (string, bool) {
	if tt.target != config.TargetLocal || tt.random {
		return "", false
	}
	for _, col := range cols {
		if col.Name == tt.key {
			return col.Type, true
		}
	}
	return "", false
}

// Placer is how the rows of db.table are placed on the shards as they
// are decoded (decode.Plan.NewShardedBlock): the sharding key's column
// and the placement, the same one for every block while the topology
// stays, so that Insert sends each shard's part as it is. cols are the
// columns the blocks have. It is nil for a table not written to local
// tables by a key, and until the key's hash has been checked against the
// server (Describe checks it; a batch decoded before is split at Insert,
// as is a block placed by a placement the topology has changed since).
// It does no I/O and never waits: while a table read or the hash check
// holds the locks it needs, it answers nil (the caller's next block asks
// again).
func (c *Cluster) Placer(db, table string, cols []chschema.ColumnSchema) (key string, p chschema.Placer) {
	if !c.mu.TryLock() {
		return "", nil
	}
	tt := c.targets[db+"."+table]
	c.mu.Unlock()
	if tt == nil {
		return "", nil
	}
	typ, ok := keyType(tt, cols)
	if !ok {
		return "", nil
	}
	topo := c.lay.Load().topo
	if !tt.mu.TryLock() {
		return "", nil
	}
	defer tt.mu.Unlock()
	h := tt.hashes[typ]
	if h == nil {
		return "", nil
	}
	if tt.placed == nil || tt.topo != topo || tt.placed.Hash() != h {
		pl, err := cluster.NewPlacement(topo, h)
		if err != nil {
			return "", nil
		}
		tt.placed, tt.topo = pl, topo
	}
	return tt.key, tt.placed
}

// Insert writes block into t: through Writer.Insert for a table without
// target, else as described on Cluster.
func (c *Cluster) Insert(ctx context.Context, t *Table, block chschema.Block, batchID uint64,
	onRetry func(Attempt), refresh Refresh) error {
	tt, err := c.target(ctx, t.Database, t.Name)
	if err != nil {
		return err
	}
	if tt == nil {
		return c.Writer.Insert(ctx, t, block, batchID, onRetry, refresh)
	}
	if err := c.awaitSchema(ctx, tt, t); err != nil {
		return err
	}
	lay := c.lay.Load()
	if tt.target == config.TargetDistributed {
		ctx = withSetting(ctx, c.syncSetting, 1)
		first := c.firstReplica(lay, len(lay.shards), len(lay.nodes))
		_, err := insertOn(ctx, lay.nodes, first, t, block, batchID, onRetry, refresh)
		return err
	}
	parts, err := c.split(ctx, lay, tt, t, block)
	if err != nil {
		return fmt.Errorf("insert into %s (%d rows): %w", t.FullName(), block.Rows(), err)
	}
	local := t.Renamed(tt.localDB, tt.localName)
	return c.insertParts(ctx, lay, parts, local, batchID, onRetry, localRefresh(t, tt, refresh))
}

// localRefresh is refresh for the local tables of tt: it re-reads the
// route's table t and projects the block onto it; the part is then sent to
// the local table with those columns. Nil without refresh.
func localRefresh(t *Table, tt *tableTarget, refresh Refresh) Refresh {
	if refresh == nil {
		return nil
	}
	return func(ctx context.Context, _ *Table, b chschema.Block) (*Table, chschema.Block, error) {
		nt, nb, err := refresh(ctx, t, b)
		if err != nil {
			return nil, nil, err
		}
		return nt.Renamed(tt.localDB, tt.localName), nb, nil
	}
}

// insertParts writes each shard's part of a batch (nil: the shard has no
// rows) into the local table, the shards at the same time, and returns
// when every part is in or has failed. A part that fails for good stops
// the others' retries: the batch cannot be acknowledged any more, and the
// connector stops on it.
func (c *Cluster) insertParts(ctx context.Context, lay *layout, parts []chschema.Block, local *Table, batchID uint64,
	onRetry func(Attempt), refresh Refresh) error {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for si, part := range parts {
		if part == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[si] = c.insertShard(pctx, lay, si, local, part, batchID, onRetry, refresh); errs[si] != nil && pctx.Err() == nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var failed []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// insertShard writes one shard's part, failing over between its replicas.
func (c *Cluster) insertShard(ctx context.Context, lay *layout, si int, t *Table, part chschema.Block, batchID uint64,
	onRetry func(Attempt), refresh Refresh) error {
	shard := lay.topo.Shards[si]
	reps := lay.shards[si]
	first := c.firstReplica(lay, si, len(reps))
	obs := c.obs
	retry := func(at Attempt) {
		if obs != nil {
			addr := at.Replica
			if addr == "" {
				addr = reps[0].cfg.Addrs[0]
			}
			obs.ShardFailed(shard.Num, addr, at.Code, at.Next != "" && at.Next != addr)
		}
		if onRetry != nil {
			onRetry(at)
		}
	}
	r, err := insertOn(ctx, reps, first, t, part, batchID, retry, refresh)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("shard %d: %w", shard.Num, err)
	}
	if obs != nil {
		obs.ShardInserted(shard.Num, reps[r].cfg.Addrs[0], part.Rows())
	}
	if f := chtable.ShardInserted(ctx); f != nil {
		f(shard.Num, part.Rows())
	}
	return nil
}

// firstReplica is the replica (index into the n replicas of shard si, or
// of every node for si == len(shards)) that the next part is sent to first,
// by clickhouse.replica_order: in turn, replica 1, or any.
func (c *Cluster) firstReplica(lay *layout, si, n int) int {
	if n <= 1 {
		return 0
	}
	switch c.cfg.ReplicaOrder {
	case config.ReplicaInOrder:
		return 0
	case config.ReplicaRandom:
		return rand.IntN(n)
	}
	return int((lay.next[si].Add(1) - 1) % uint64(n))
}

// split cuts block into one part per shard (nil for a shard with no rows).
func (c *Cluster) split(ctx context.Context, lay *layout, tt *tableTarget, t *Table, block chschema.Block) ([]chschema.Block, error) {
	parts := make([]chschema.Block, len(lay.topo.Shards))
	if tt.random {
		parts[lay.topo.RandomShard()] = block
		return parts, nil
	}
	cols := block.Columns()
	k := -1
	for i, col := range cols {
		if col.Name == tt.key {
			k = i
			break
		}
	}
	if k < 0 {
		return nil, fmt.Errorf("sharding_key %s is not among the columns the route fills, so no row could be placed by it", tt.key)
	}
	h, err := c.keyHash(ctx, tt, cols[k].Type)
	if err != nil {
		return nil, err
	}
	p, err := cluster.NewPlacement(lay.topo, h)
	if err != nil {
		return nil, err
	}
	if sb, ok := block.(chschema.ShardedBlock); ok {
		// Placed as it was decoded: its parts are the shards' parts, as
		// long as the placement is the one the topology gives now.
		if sp, by := sb.ShardParts(); len(sp) == len(parts) {
			if bp, ok := by.(*cluster.Placement); ok && bp.Same(p) {
				return sp, nil
			}
		}
	}
	shardOf, err := p.Shards(block.ColumnData(k))
	if err != nil {
		return nil, err
	}
	return splitByShard(block, shardOf, parts)
}

// splitByShard fills parts[s] with the rows of block that shardOf (one
// shard index per row) places on shard s: nil when it has none, block
// itself when it has all of them, otherwise a gathered part.
//
// Each column is taken from the block once for all shards: a decode.Block
// builds ColumnData anew on every call (Decimal and DateTime64 values,
// Nullable pointers), which costs as much as the copy. A String column the
// block hands over natively (nativeBlock) is not copied at all: each part
// gets the rows' bounds into the block's own buffer (see gatherNative), so
// the parts of a batch add no string memory beyond the batch that
// batch.buffer_memory counts, and the driver encodes them without a copy
// of its own (fill installs them).
func splitByShard(block chschema.Block, shardOf []int, parts []chschema.Block) ([]chschema.Block, error) {
	var src *splitSource
	for s, rs := range shardRows(shardOf, len(parts)) {
		switch {
		case len(rs) == 0:
		case len(rs) == block.Rows():
			parts[s] = block // one shard has it all: no copy
		default:
			if src == nil {
				src = newSplitSource(block)
			}
			sub, err := subBlock(block.Columns(), src, rs)
			if err != nil {
				return nil, err
			}
			parts[s] = sub
		}
	}
	return parts, nil
}

// splitSource is every column of a block being split, taken once: the
// native form where gatherNative cuts it, ColumnData otherwise.
type splitSource struct {
	nat  []proto.ColInput
	data []any
}

func newSplitSource(block chschema.Block) *splitSource {
	n := len(block.Columns())
	src := &splitSource{nat: make([]proto.ColInput, n), data: make([]any, n)}
	nb, _ := block.(nativeBlock)
	for i := range n {
		if nb != nil {
			if c := nb.Native(i); c != nil && gatherNative(c, nil) != nil {
				src.nat[i] = c
				continue
			}
		}
		src.data[i] = block.ColumnData(i)
	}
	return src
}

// shardRows lists, per shard, the indices (ascending) of the rows shardOf
// places there. It counts first so that every list is allocated once, all
// of them in one backing array.
func shardRows(shardOf []int, shards int) [][]int {
	counts := make([]int, shards)
	for _, s := range shardOf {
		counts[s]++
	}
	all := make([]int, len(shardOf))
	rows := make([][]int, shards)
	off := 0
	for s, n := range counts {
		rows[s] = all[off : off : off+n]
		off += n
	}
	for i, s := range shardOf {
		rows[s] = append(rows[s], i)
	}
	return rows
}

// rowsBlock is some rows of a block, its columns gathered once, so every
// retry sends the identical part. A column is either native (nat[i], which
// fill installs into the driver's column) or Go values (data[i]).
type rowsBlock struct {
	cols []chschema.ColumnSchema
	nat  []proto.ColInput
	data []any
	rows int
}

func (b *rowsBlock) Rows() int                        { return b.rows }
func (b *rowsBlock) Columns() []chschema.ColumnSchema { return b.cols }

// ColumnData is the column's Go values; a native column's are built from
// it (only a driver column that does not take the native form asks).
func (b *rowsBlock) ColumnData(i int) any {
	if b.nat != nil && b.nat[i] != nil {
		return nativeData(b.nat[i])
	}
	return b.data[i]
}

// Native is the column's native form, nil when it has none.
func (b *rowsBlock) Native(i int) proto.ColInput {
	if b.nat == nil {
		return nil
	}
	return b.nat[i]
}

// subBlock gathers rows (indices, ascending) of every column of a block
// with columns cols, taken from it as src.
func subBlock(cols []chschema.ColumnSchema, src *splitSource, rows []int) (*rowsBlock, error) {
	out := &rowsBlock{cols: cols, data: make([]any, len(cols)), rows: len(rows)}
	for i := range cols {
		if c := src.nat[i]; c != nil {
			if out.nat == nil {
				out.nat = make([]proto.ColInput, len(cols))
			}
			out.nat[i] = gatherNative(c, rows)
			continue
		}
		g, err := gatherColumn(src.data[i], rows)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", cols[i].Name, err)
		}
		out.data[i] = g
	}
	return out, nil
}

// gatherNative is rows of a column's native form: for a String column
// (or Nullable(String)) a part that keeps the whole column's buffer and
// gathers only the rows' bounds (16 bytes a row), since the Native format
// is written from the bounds, the part encodes exactly its rows. The part
// aliases the block's buffer and is valid as long as the block is (a
// batch is not reset before its INSERT is done). Any other column: nil.
func gatherNative(c proto.ColInput, rows []int) proto.ColInput {
	switch c := c.(type) {
	case proto.ColStr:
		return proto.ColStr{Buf: c.Buf, Pos: gather(c.Pos, rows)}
	case chschema.NullableNative:
		if v, ok := c.Values.(proto.ColStr); ok {
			return chschema.NullableNative{Nulls: gather(c.Nulls, rows), Values: gatherNative(v, rows)}
		}
	}
	return nil
}

// nativeData is the Go values of a column gatherNative made, as decode's
// ColumnData gives them: []string, or []*string (nil for NULL).
func nativeData(c proto.ColInput) any {
	switch c := c.(type) {
	case proto.ColStr:
		out := make([]string, len(c.Pos))
		for j, p := range c.Pos {
			out[j] = string(c.Buf[p.Start:p.End])
		}
		return out
	case chschema.NullableNative:
		vals, _ := nativeData(c.Values).([]string)
		out := make([]*string, len(vals))
		for j := range vals {
			if c.Nulls[j] == 0 {
				out[j] = &vals[j]
			}
		}
		return out
	}
	return nil
}

// gatherColumn copies rows of one column's data. The slice types the
// decoder's ColumnData returns are copied by a typed loop (see
// TestColumnDataTypes in internal/decode for the list); any other slice
// goes through reflectGather, which is slower (one reflect call per cell)
// but gives the same result.
func gatherColumn(data any, rows []int) (any, error) {
	if g, ok := typedGathers[reflect.TypeOf(data)]; ok {
		return g(data, rows), nil
	}
	return reflectGather(data, rows)
}

// gatherFunc copies rows of a column's data of one slice type.
type gatherFunc func(data any, rows []int) any

// typedGathers is gather for each slice type ColumnData returns, by the
// slice's type.
var typedGathers = gathers(
	gatherOf[int8], gatherOf[int16], gatherOf[int32], gatherOf[int64],
	gatherOf[uint8], gatherOf[uint16], gatherOf[uint32], gatherOf[uint64],
	gatherOf[float32], gatherOf[float64], gatherOf[bool], gatherOf[string],
	gatherOf[time.Time], gatherOf[decimal.Decimal], gatherOf[uuid.UUID], gatherOf[[16]uint8], gatherOf[big.Int],
	gatherOf[*int8], gatherOf[*int16], gatherOf[*int32], gatherOf[*int64],
	gatherOf[*uint8], gatherOf[*uint16], gatherOf[*uint32], gatherOf[*uint64],
	gatherOf[*float32], gatherOf[*float64], gatherOf[*bool], gatherOf[*string],
	gatherOf[*time.Time], gatherOf[*decimal.Decimal], gatherOf[*uuid.UUID], gatherOf[*[16]uint8], gatherOf[*big.Int],
	gatherOf[*chschema.MapRow],
	gatherOf[[]string], gatherOf[[]int64], gatherOf[[]uint64], gatherOf[[]float64],
)

// gatherOf is the type []E and gather for it.
func gatherOf[E any]() (reflect.Type, gatherFunc) {
	return reflect.TypeFor[[]E](), func(data any, rows []int) any { return gather(data.([]E), rows) }
}

// gathers maps each type of of to its gather.
func gathers(of ...func() (reflect.Type, gatherFunc)) map[reflect.Type]gatherFunc {
	m := make(map[reflect.Type]gatherFunc, len(of))
	for _, f := range of {
		t, g := f()
		m[t] = g
	}
	return m
}

// gather returns s[rows[0]], s[rows[1]], ... as a new slice.
func gather[E any](s []E, rows []int) []E {
	out := make([]E, len(rows))
	for j, r := range rows {
		out[j] = s[r]
	}
	return out
}

// reflectGather is gather for a slice of any type, by reflection.
func reflectGather(data any, rows []int) (any, error) {
	v := reflect.ValueOf(data)
	if v.Kind() != reflect.Slice {
		return nil, fmt.Errorf("cannot split %T by shard", data)
	}
	g := reflect.MakeSlice(v.Type(), len(rows), len(rows))
	for j, r := range rows {
		g.Index(j).Set(v.Index(r))
	}
	return g.Interface(), nil
}

// withSetting adds one setting to the INSERT settings ctx carries.
func withSetting(ctx context.Context, name string, v any) context.Context {
	prev := chtable.InsertSettings(ctx)
	s := make(clickhouse.Settings, len(prev)+1)
	for k, pv := range prev {
		s[k] = pv
	}
	s[name] = v
	return chtable.WithInsertSettings(ctx, s)
}

// onLocal runs a statement (run) on a route's local table: ON CLUSTER
// cluster on the writer's node, or, without a cluster name, on every node
// one by one (a replicated statement then reaches the other replica
// itself, and the other replica's own run finds it done). A server that
// runs no ON CLUSTER DDL at all (no Keeper: clickhouse-local, chdb;
// NoDistributedDDL) gets it node by node too, noted on the refused
// statement in ddls ("done" says what was done on every node instead).
func (c *Cluster) onLocal(lay *layout, localDB, localName, cluster, done string, run func(w *Writer, db, table, cluster string) error, ddls *[]string) error {
	onCluster := cluster != ""
	if onCluster {
		err := run(c.Writer, localDB, localName, cluster)
		if err != nil && NoDistributedDDL(err) {
			// Nothing ran: the statement goes node by node.
			if len(*ddls) > 0 {
				(*ddls)[len(*ddls)-1] += fmt.Sprintf(" (refused, Code %d: no distributed DDL on this server; %s on every node instead)", chtable.Code(err), done)
			}
			onCluster = false
		} else if err != nil {
			return err
		}
	}
	if !onCluster {
		for _, w := range lay.nodes {
			if err := run(w, localDB, localName, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// Truncate empties a route's table for a TRUNCATE event. For a table
// without a target it is Writer.Truncate (ON CLUSTER cluster when set). For
// a route with a target the rows are in the shards' local tables: each is
// truncated (onLocal: ON CLUSTER, or node by node); a Distributed table
// holds no rows of its own.
func (c *Cluster) Truncate(ctx context.Context, db, table, cluster string) (string, error) {
	tt, err := c.target(ctx, db, table)
	if err != nil {
		return "", err
	}
	if tt == nil {
		return c.Writer.Truncate(ctx, db, table, cluster)
	}
	localDB, localName := tt.localDB, tt.localName
	if tt.target == config.TargetDistributed {
		if localDB, localName, err = LocalTable(ctx, c.conn, db, table); err != nil {
			return "", err
		}
	}
	var ddls []string
	run := func(w *Writer, db, table, cluster string) error {
		ddl, err := w.Truncate(ctx, db, table, cluster)
		ddls = append(ddls, ddl+" -- on "+w.cfg.Addrs[0])
		return err
	}
	err = c.onLocal(c.lay.Load(), localDB, localName, cluster, "truncated", run, &ddls)
	return strings.Join(ddls, "; "), err
}

// AddColumn adds a column for schema evolution. For a table without a
// target it is Writer.AddColumn. For a route's table on the cluster the
// column goes first where the rows are, then where they are read: the
// local table (ON CLUSTER clickhouse.cluster, or on every node when the
// shards are listed: a replicated ALTER then reaches the other replica
// itself, and the other replica's own ALTER finds the column there), then
// the Distributed table on every node, one by one: ON CLUSTER of a
// Distributed table over a replicated cluster fails (Code 371, the cluster
// says its shards are replicated, the table is not). A server that runs no
// ON CLUSTER DDL at all (no Keeper: clickhouse-local, chdb; NoDistributedDDL)
// gets the local table's column node by node too.
func (c *Cluster) AddColumn(ctx context.Context, info chschema.ServerInfo, db, table, cluster, name, typ string) (string, bool, error) {
	tt, err := c.target(ctx, db, table)
	if err != nil {
		return "", false, err
	}
	if tt == nil {
		return c.Writer.AddColumn(ctx, info, db, table, cluster, name, typ)
	}
	localDB, localName := tt.localDB, tt.localName
	if tt.target == config.TargetDistributed {
		if localDB, localName, err = LocalTable(ctx, c.conn, db, table); err != nil {
			return "", false, err
		}
	}
	lay := c.lay.Load()
	var ddls []string
	added := false
	run := func(w *Writer, db, table, cluster string) error {
		ddl, ok, err := w.AddColumn(ctx, info, db, table, cluster, name, typ)
		if ddl != "" {
			ddls = append(ddls, ddl+" -- on "+w.cfg.Addrs[0])
		}
		added = added || ok
		return err
	}
	distributed := localDB != db || localName != table
	if err := c.onLocal(lay, localDB, localName, cluster, "added", run, &ddls); err != nil {
		return strings.Join(ddls, "; "), added, err
	}
	if distributed {
		for _, w := range lay.nodes {
			if err := run(w, db, table, ""); err != nil {
				return strings.Join(ddls, "; "), added, err
			}
		}
	}
	return strings.Join(ddls, "; "), added, nil
}

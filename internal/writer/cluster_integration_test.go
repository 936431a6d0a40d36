//go:build integration

package writer_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// clusterConfig is a validated configuration with clickhouse section ch
// (YAML flow mapping without braces) and one route into table.
func clusterConfig(t *testing.T, ch, route string) *config.Config {
	t.Helper()
	yaml := fmt.Sprintf("name: w\nkafka: {topics: [t]}\nroutes: [{topic: t, %s}]\nclickhouse: {dial_timeout: 2s, query_timeout: 10s, retry_initial: 50ms, retry_max: 500ms, %s}\n", route, ch)
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// count is SELECT count() of db.table on conn, after the replica has
// fetched every part its shard has (SYSTEM SYNC REPLICA) when sync is set
// (on a cluster with Keeper: callers pass c.Keeper).
func count(t *testing.T, conn driver.Conn, table string, sync bool) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if sync {
		if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+table); err != nil {
			t.Fatalf("SYSTEM SYNC REPLICA %s: %v", table, err)
		}
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// openCluster opens the cluster writer of cfg (closed when the test ends)
// with an observer, and describes db.table.
func openCluster(t *testing.T, cfg *config.Config, db, table string) (*writer.Cluster, *observer, []chschema.ColumnSchema) {
	t.Helper()
	cw, err := writer.OpenCluster(context.Background(), "w", cfg.ClickHouse, cfg.Routes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cw.Close() })
	obs := newObserver()
	cw.Observe(obs)
	cols, err := cw.Describe(context.Background(), db, table)
	if err != nil {
		t.Fatal(err)
	}
	return cw, obs, cols
}

// observer records the cluster writer's per-shard outcomes.
type observer struct {
	mu        sync.Mutex
	inserted  map[int]int // shard → parts acknowledged
	rows      map[int]int
	byReplica map[string]int // replica → parts acknowledged
	failed    map[string]int // replica → failed attempts
	failovers map[int]int
}

func newObserver() *observer {
	return &observer{inserted: map[int]int{}, rows: map[int]int{}, byReplica: map[string]int{}, failed: map[string]int{}, failovers: map[int]int{}}
}

func (o *observer) ShardInserted(shard int, replica string, rows int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inserted[shard]++
	o.rows[shard] += rows
	o.byReplica[replica]++
}

func (o *observer) ShardFailed(shard int, replica string, code int32, failover bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed[replica]++
	if failover {
		o.failovers[shard]++
	}
}

// seqBlock is rows i = from … from+n-1 with keys k (of type typ) and a
// padding string p.
func seqBlock(typ string, from, n int, keys any) chschema.Block {
	ids := make([]uint32, n)
	pad := make([]string, n)
	for j := range n {
		ids[j] = uint32(from + j)
		pad[j] = strings.Repeat("x", 50) + fmt.Sprint(from+j)
	}
	return &colBlock{
		cols: []chschema.ColumnSchema{{Name: "i", Type: "UInt32"}, {Name: "k", Type: typ}, {Name: "p", Type: "String"}},
		data: []any{ids, keys, pad},
	}
}

type colBlock struct {
	cols []chschema.ColumnSchema
	data []any
}

func (b *colBlock) Rows() int {
	switch v := b.data[0].(type) {
	case []uint32:
		return len(v)
	}
	return 0
}
func (b *colBlock) Columns() []chschema.ColumnSchema { return b.cols }
func (b *colBlock) ColumnData(i int) any             { return b.data[i] }

func u64Keys(from, n int) any {
	k := make([]uint64, n)
	for j := range k {
		k[j] = uint64(from+j) * 7919
	}
	return k
}

// TestClusterKeyPlacementEqualsDistributed writes rows with target: local by
// key into each shard's local table, the same rows through a Distributed
// table (the engine places them) into a second local table, and compares,
// shard by shard, which rows each holds; then every key is read back through
// a Distributed table over the sink's tables with
// optimize_skip_unused_shards=1, which reads only the shard the engine
// computes for the key.
func TestClusterKeyPlacementEqualsDistributed(t *testing.T) {
	testenv.EachCluster(t, testClusterKeyPlacementEqualsDistributed)
}

func testClusterKeyPlacementEqualsDistributed(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	const n = 600
	type placementCase struct {
		typ, hash string
		keys      any
		lit       func(i int) string
		cluster   string // "" for c.Name
	}
	cases := []placementCase{
		{"UInt64", "cityHash64", u64Keys(0, n), func(i int) string { return fmt.Sprint(uint64(i) * 7919) }, ""},
		{"String", "murmurHash3_64", func() any {
			s := make([]string, n)
			for i := range s {
				s[i] = fmt.Sprintf("user-%d-%s", i, strings.Repeat("k", i%40))
			}
			return s
		}(), func(i int) string { return fmt.Sprintf("'user-%d-%s'", i, strings.Repeat("k", i%40)) }, ""},
		{"Int32", "intHash64", func() any {
			s := make([]int32, n)
			for i := range s {
				s[i] = int32(i*104729) - 30_000_000
			}
			return s
		}(), func(i int) string { return fmt.Sprint(int32(i*104729) - 30_000_000) }, ""},
		{"Int16", "identity", func() any {
			s := make([]int16, n)
			for i := range s {
				s[i] = int16(i - n/2)
			}
			return s
		}(), func(i int) string { return fmt.Sprint(int16(i - n/2)) }, ""},
	}
	if c.WeightedName != "" {
		// Unequal weights (1, 3): slots 0 of 4 to shard 1, 1–3 to shard 2.
		cases = append(cases,
			placementCase{"UInt64", "cityHash64", u64Keys(0, n), func(i int) string { return fmt.Sprint(uint64(i) * 7919) }, c.WeightedName},
			placementCase{"String", "xxHash64", cases[1].keys, cases[1].lit, c.WeightedName})
	}
	for ci, tc := range cases {
		name := tc.typ + "_" + tc.hash
		if tc.cluster == "" {
			tc.cluster = c.Name
		} else {
			name += "_" + tc.cluster
		}
		t.Run(name, func(t *testing.T) {
			expr := tc.hash + "(k)"
			if tc.hash == "identity" {
				expr = "k"
			}
			local, ref := fmt.Sprintf("l%d", ci), fmt.Sprintf("r%d", ci)
			var stmts []string
			for _, tbl := range []string{local, ref} {
				stmts = append(stmts,
					fmt.Sprintf("CREATE TABLE %s.%s (i UInt32, k %s, p String) ENGINE = %s", db, tbl, tc.typ, c.Engine(db, tbl, "i")),
					fmt.Sprintf("CREATE TABLE %s.d_%s AS %s.%s ENGINE = Distributed(%s, %s, %s, %s)", db, tbl, db, tbl, tc.cluster, db, tbl, expr))
			}
			c.ExecEachNode(t, stmts...)
			cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], cluster: %s", c.Shards[0][0].Addr, tc.cluster),
				fmt.Sprintf("table: %s.d_%s, target: local, sharding_key: k, sharding_hash: %s", db, local, tc.hash))
			cw, err := writer.OpenCluster(context.Background(), "w", cfg.ClickHouse, cfg.Routes)
			if err != nil {
				t.Fatal(err)
			}
			defer cw.Close()
			blk := seqBlock(tc.typ, 0, n, tc.keys)
			cols, _ := cw.Describe(context.Background(), db, "d_"+local)
			tab := chtable.NewTable(db, "d_"+local, cols, blk.Columns())
			if err := cw.Insert(context.Background(), tab, blk, 1, nil, nil); err != nil {
				t.Fatal(err)
			}
			// The reference: the same rows through the Distributed engine.
			conn := c.Conn(t)
			ctx := clickhouseSync(context.Background())
			b, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.d_%s (i, k, p)", db, ref))
			if err != nil {
				t.Fatal(err)
			}
			for j := range n {
				if err := b.Append(blk.ColumnData(0).([]uint32)[j], keyAt(tc.keys, j), blk.ColumnData(2).([]string)[j]); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
			total := 0
			var perShard []uint64
			for si, shard := range c.Shards {
				sc := shard[0].Conn(t)
				got := ids(t, c, sc, db+"."+local)
				want := ids(t, c, sc, db+"."+ref)
				if got != want {
					t.Errorf("shard %d: the sink placed rows %.200s…, the Distributed engine %.200s…", si+1, got, want)
				}
				k := count(t, sc, db+"."+local, false)
				if k == 0 || k == n {
					t.Errorf("shard %d holds %d of %d rows: the key did not spread", si+1, k, n)
				}
				total += int(k)
				perShard = append(perShard, k)
			}
			if tc.cluster == c.WeightedName && perShard[1] < 2*perShard[0] {
				// Weights 1 and 3: about 150 and 450 of 600 rows.
				t.Errorf("weights 1, 3: the shards hold %v rows, want shard 2 about three times shard 1", perShard)
			}
			if total != n {
				t.Errorf("%d rows over the shards, want %d", total, n)
			}
			// Point reads that touch only the key's shard find each key,
			// where the server can skip shards (18.16 has no
			// optimize_skip_unused_shards: there the shard-by-shard
			// comparison with the engine's own placement above is the proof).
			var skip uint64
			if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.settings WHERE name = 'optimize_skip_unused_shards'").Scan(&skip); err != nil {
				t.Fatal(err)
			}
			if skip == 0 {
				t.Logf("%s: no optimize_skip_unused_shards on %s; placement compared shard by shard only", tc.typ, c.Version)
				return
			}
			for j := 0; j < n; j += 7 {
				var got uint64
				q := fmt.Sprintf("SELECT count() FROM %s.d_%s WHERE k = %s SETTINGS optimize_skip_unused_shards = 1", db, local, tc.lit(j))
				if err := conn.QueryRow(context.Background(), q).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != 1 {
					t.Fatalf("%s: %d rows, want 1", q, got)
				}
			}
		})
	}
}

func clickhouseSync(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_distributed_sync": 1}))
}

// ids lists the i of every row of table on conn (after SYNC REPLICA).
func ids(t *testing.T, c testenv.LocalCluster, conn driver.Conn, table string) string {
	t.Helper()
	c.SyncReplica(t, conn, table)
	var s string
	if err := conn.QueryRow(context.Background(), "SELECT toString(groupArray(i)) FROM (SELECT i FROM "+table+" ORDER BY i)").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func keyAt(keys any, j int) any {
	switch k := keys.(type) {
	case []uint64:
		return k[j]
	case []string:
		return k[j]
	case []int32:
		return k[j]
	case []int16:
		return k[j]
	}
	panic(fmt.Sprintf("keyAt %T", keys))
}

// localTable creates db.name on every node: replicated within each shard
// where the cluster has Keeper, MergeTree with a deduplication window
// otherwise (testenv.LocalCluster.Engine).
func localTable(t *testing.T, c testenv.LocalCluster, db, name string) {
	c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.%s (i UInt32, k UInt64, p String) ENGINE = %s", db, name, c.Engine(db, name, "i")))
}

// TestClusterReplicaFailoverUnderLoad inserts 40 batches, four at a time, by
// key over both shards through proxies, cutting one replica of shard 1 and
// then one of shard 2 while they run: every batch succeeds on the other
// replica and each shard ends with exactly its rows on both replicas.
func TestClusterReplicaFailoverUnderLoad(t *testing.T) {
	c := testenv.Cluster(t)
	db := c.NewDatabase(t)
	localTable(t, c, db, "ev")
	proxies := make([][]*testenv.Proxy, len(c.Shards))
	var shards []string
	for i, s := range c.Shards {
		var addrs []string
		for _, n := range s {
			p := testenv.NewProxy(t, n.Addr)
			proxies[i] = append(proxies[i], p)
			addrs = append(addrs, fmt.Sprintf("%q", p.Addr))
		}
		shards = append(shards, "["+strings.Join(addrs, ", ")+"]")
	}
	cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], shards: [%s]", c.Shards[0][0].Addr, strings.Join(shards, ", ")),
		fmt.Sprintf("table: %s.ev, target: local, sharding_key: k", db))
	cw, obs, cols := openCluster(t, cfg, db, "ev")
	const batches, rows = 40, 1000
	var done atomic.Int64
	errs := make(chan error, batches)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for b := range batches {
		switch b {
		case 10:
			proxies[0][0].Cut()
		case 25:
			proxies[0][0].Restore()
			proxies[1][0].Cut()
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			blk := seqBlock("UInt64", b*rows, rows, u64Keys(b*rows, rows))
			errs <- cw.Insert(context.Background(), chtable.NewTable(db, "ev", cols, blk.Columns()), blk, uint64(b), nil, nil)
			done.Add(1)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	total := uint64(0)
	for si, s := range c.Shards {
		var per []uint64
		for _, n := range s {
			per = append(per, count(t, n.Conn(t), db+".ev", true))
		}
		if per[0] != per[1] {
			t.Errorf("shard %d: replicas hold %v rows", si+1, per)
		}
		if int(per[0]) != obs.rows[si+1] {
			t.Errorf("shard %d holds %d rows, the writer acknowledged %d", si+1, per[0], obs.rows[si+1])
		}
		total += per[0]
	}
	if total != batches*rows {
		t.Errorf("%d rows in the cluster, want exactly %d", total, batches*rows)
	}
	if obs.failovers[1] == 0 || obs.failovers[2] == 0 {
		t.Errorf("failovers per shard %v: each cut replica should have moved parts to the other", obs.failovers)
	}
	t.Logf("%d rows, exactly; failovers per shard %v; failed attempts per replica %v", total, obs.failovers, obs.failed)
}

// TestClusterPartsSpreadOverReplicas: with replica_order round_robin (the
// default) 20 batches by key put 10 parts on each replica of each shard, as
// the observer (the metrics' source) and every node's own query_log count
// them; in_order puts every part on replica 1; random puts parts on both
// replicas of each shard (20 draws of 2: all on one replica has odds
// 2^-19). Every replica ends with all its shard's rows.
func TestClusterPartsSpreadOverReplicas(t *testing.T) {
	c := testenv.Cluster(t)
	db := c.NewDatabase(t)
	const batches, rows = 20, 500
	for oi, order := range []string{"round_robin", "in_order", "random"} {
		t.Run(order, func(t *testing.T) {
			table := fmt.Sprintf("ev%d", oi)
			localTable(t, c, db, table)
			cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], cluster: %s, replica_order: %s", c.Shards[0][0].Addr, c.Name, order),
				fmt.Sprintf("table: %s.%s, target: local, sharding_key: k", db, table))
			cw, obs, cols := openCluster(t, cfg, db, table)
			for b := range batches {
				blk := seqBlock("UInt64", b*rows, rows, u64Keys(b*rows, rows))
				if err := cw.Insert(context.Background(), chtable.NewTable(db, table, cols, blk.Columns()), blk, uint64(b), nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			var total uint64
			for si, s := range c.Shards {
				var shardRows uint64
				for ri, n := range s {
					conn := n.Conn(t)
					got := obs.byReplica[n.Addr]
					// The server logs a finished query on its own time, which
					// can be after the client has its answer: the count is
					// read again, flushed, until it matches or 10 s passed.
					var logged uint64
					for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
						testenv.Exec(t, conn, "SYSTEM FLUSH LOGS")
						if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.query_log WHERE toInt8(type) = 2 AND startsWith(query, ?) AND event_time > now() - 300",
							fmt.Sprintf("INSERT INTO `%s`.`%s`", db, table)).Scan(&logged); err != nil {
							t.Fatal(err)
						}
						if int(logged) == got || time.Now().After(deadline) {
							break
						}
					}
					if int(logged) != got {
						t.Errorf("shard %d replica %s: the writer counted %d parts, its query_log %d INSERTs", si+1, n.Name, got, logged)
					}
					switch want := batches / 2; {
					case order == "round_robin" && got != want:
						t.Errorf("round_robin: shard %d replica %s took %d of %d parts, want %d", si+1, n.Name, got, batches, want)
					case order == "in_order" && ri == 0 && got != batches, order == "in_order" && ri > 0 && got != 0:
						t.Errorf("in_order: shard %d replica %s took %d of %d parts", si+1, n.Name, got, batches)
					case order == "random" && (got == 0 || got == batches):
						t.Errorf("random: shard %d replica %s took %d of %d parts, want some and not all", si+1, n.Name, got, batches)
					}
					r := count(t, conn, db+"."+table, true)
					if ri == 0 {
						shardRows = r
					} else if r != shardRows {
						t.Errorf("shard %d: replicas hold %d and %d rows", si+1, shardRows, r)
					}
				}
				total += shardRows
			}
			if total != batches*rows {
				t.Errorf("%d rows in the cluster, want %d", total, batches*rows)
			}
			t.Logf("%s: parts per replica %v", order, obs.byReplica)
		})
	}
}

// answerDropper relays connections to a server and, once a client has sent
// more than threshold bytes on a connection (an INSERT's data), stops
// passing the server's answers back; when committed reports true it
// closes the connection. The INSERT is then in the table but the client
// never hears so: a lost answer.
type answerDropper struct {
	Addr      string
	ln        net.Listener
	upstream  string
	threshold int64
	armed     atomic.Bool
	dropped   atomic.Int64
	committed func() bool
}

func newAnswerDropper(t *testing.T, upstream string, threshold int64, committed func() bool) *answerDropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &answerDropper{Addr: ln.Addr().String(), ln: ln, upstream: upstream, threshold: threshold, committed: committed}
	d.armed.Store(true)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			cl, err := ln.Accept()
			if err != nil {
				return
			}
			go d.relay(cl)
		}
	}()
	return d
}

func (d *answerDropper) relay(cl net.Conn) {
	up, err := net.Dial("tcp", d.upstream)
	if err != nil {
		cl.Close()
		return
	}
	var sent atomic.Int64
	var dropping atomic.Bool
	go func() { // client → server
		buf := make([]byte, 32<<10)
		for {
			n, err := cl.Read(buf)
			if n > 0 {
				if sent.Add(int64(n)) > d.threshold && d.armed.Load() {
					dropping.Store(true)
				}
				if _, werr := up.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		up.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 && dropping.Load() {
			// Swallow the answer; close once the rows are in.
			if d.armed.CompareAndSwap(true, false) {
				d.dropped.Add(1)
				deadline := time.Now().Add(20 * time.Second)
				for !d.committed() && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
			}
			break
		}
		if n > 0 {
			if _, werr := cl.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			if err != io.EOF {
				break
			}
			break
		}
	}
	cl.Close()
	up.Close()
}

// TestClusterLostAnswerRetryDeduplicated: shard 1's first replica commits
// the part but its answer is lost (the proxy swallows it and closes the
// connection once the rows are in); the writer sends the identical part to
// the second replica, where ReplicatedMergeTree drops it as a repeat of the
// block the first one committed: the rows are in exactly once. On the 26.9
// cluster (one replica per shard, no Keeper) the retry goes to the same
// server, whose MergeTree drops it by non_replicated_deduplication_window.
func TestClusterLostAnswerRetryDeduplicated(t *testing.T) {
	testenv.EachCluster(t, testClusterLostAnswerRetryDeduplicated)
}

func testClusterLostAnswerRetryDeduplicated(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	localTable(t, c, db, "ev")
	first := c.Shards[0][0]
	direct := first.Conn(t)
	const rows = 5000
	drop := newAnswerDropper(t, first.Addr, 64<<10, func() bool { return count(t, direct, db+".ev", false) >= rows })
	replicas := []string{drop.Addr}
	nodes := []testenv.ClusterNode{first}
	if len(c.Shards[0]) > 1 {
		replicas = append(replicas, c.Shards[0][1].Addr)
		nodes = append(nodes, c.Shards[0][1])
	}
	second := replicas[len(replicas)-1] // where the retry goes
	quoted := make([]string, len(replicas))
	for i, r := range replicas {
		quoted[i] = fmt.Sprintf("%q", r)
	}
	cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], shards: [[%s]]", first.Addr, strings.Join(quoted, ", ")),
		fmt.Sprintf("table: %s.ev, target: local, sharding: random", db))
	cw, _, cols := openCluster(t, cfg, db, "ev")
	blk := seqBlock("UInt64", 0, rows, u64Keys(0, rows))
	var attempts []writer.Attempt
	if err := cw.Insert(context.Background(), chtable.NewTable(db, "ev", cols, blk.Columns()), blk, 1,
		func(a writer.Attempt) { attempts = append(attempts, a) }, nil); err != nil {
		t.Fatal(err)
	}
	wantReplica, wantNext := drop.Addr, second
	if len(replicas) == 1 {
		wantReplica, wantNext = "", "" // one replica: the retry waits and goes to it again
	}
	if drop.dropped.Load() != 1 || len(attempts) == 0 || attempts[0].Replica != wantReplica || attempts[0].Next != wantNext {
		t.Fatalf("the answer was dropped %d times; attempts %+v: want the first replica's answer lost and the retry on %s", drop.dropped.Load(), attempts, second)
	}
	for _, n := range nodes {
		if got := count(t, n.Conn(t), db+".ev", c.Keeper); got != rows {
			t.Errorf("replica %s holds %d rows, want exactly %d (the retry deduplicated)", n.Name, got, rows)
		}
	}
	t.Logf("first attempt: %v; retried on %s; %d rows on each replica", attempts[0].Err, second, rows)
}

// TestClusterShardDownHoldsItsPart: with shard 2 unreachable, a batch's
// shard 1 part is inserted once and the batch is not acknowledged; once
// shard 2 is back its part goes in, and shard 1's is not sent again (plain
// MergeTree tables, which would keep a second copy).
func TestClusterShardDownHoldsItsPart(t *testing.T) {
	testenv.EachCluster(t, testClusterShardDownHoldsItsPart)
}

func testClusterShardDownHoldsItsPart(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.ev (i UInt32, k UInt64, p String) ENGINE = MergeTree ORDER BY i", db))
	one, two := c.Shards[0][0], c.Shards[1][0]
	p1, p2 := testenv.NewProxy(t, one.Addr), testenv.NewProxy(t, two.Addr)
	cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], shards: [[%q], [%q]]", one.Addr, p1.Addr, p2.Addr),
		fmt.Sprintf("table: %s.ev, target: local, sharding_key: k", db))
	cw, obs, cols := openCluster(t, cfg, db, "ev")
	p2.Cut()
	const rows = 2000
	blk := seqBlock("UInt64", 0, rows, u64Keys(0, rows))
	res := make(chan error, 1)
	go func() {
		res <- cw.Insert(context.Background(), chtable.NewTable(db, "ev", cols, blk.Columns()), blk, 1, nil, nil)
	}()
	c1 := one.Conn(t)
	deadline := time.Now().Add(20 * time.Second)
	for count(t, c1, db+".ev", false) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // several retries of shard 2's part
	select {
	case err := <-res:
		t.Fatalf("the batch returned (%v) while shard 2 was down", err)
	default:
	}
	n1 := count(t, c1, db+".ev", false)
	if n1 == 0 || n1 == rows {
		t.Fatalf("shard 1 has %d rows of %d while shard 2 is down", n1, rows)
	}
	p2.Restore()
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the batch did not complete after shard 2 came back")
	}
	n2 := count(t, two.Conn(t), db+".ev", false)
	if got := count(t, c1, db+".ev", false); got != n1 || n1+n2 != rows {
		t.Errorf("shard 1 %d rows (had %d while shard 2 was down), shard 2 %d: want %d in all, each once", got, n1, n2, rows)
	}
	if obs.inserted[1] != 1 || obs.inserted[2] != 1 {
		t.Errorf("parts acknowledged per shard %v, want one each", obs.inserted)
	}
	t.Logf("shard 1: %d rows inserted once; shard 2: %d rows after %d failed attempts", n1, n2, obs.failed[p2.Addr])
}

// TestClusterDistributedSyncAndQuorum: target distributed inserts through
// the Distributed table synchronously (the rows are on a replica of each
// shard when Insert returns; insert_distributed_sync on 18.16,
// distributed_foreground_insert on 26.9), and, where tables replicate,
// insert_quorum: 2 on target local returns only once both replicas of each
// shard have the part.
func TestClusterDistributedSyncAndQuorum(t *testing.T) {
	testenv.EachCluster(t, testClusterDistributedSyncAndQuorum)
}

func testClusterDistributedSyncAndQuorum(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	localTable(t, c, db, "ev")
	c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.d_ev AS %s.ev ENGINE = Distributed(%s, %s, ev, cityHash64(k))", db, db, c.Name, db))
	const rows = 3000
	maxOnShards := func() uint64 {
		var sum uint64
		for _, s := range c.Shards {
			var most uint64
			for _, n := range s {
				most = max(most, count(t, n.Conn(t), db+".ev", false))
			}
			sum += most
		}
		return sum
	}
	t.Run("distributed", func(t *testing.T) {
		cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], cluster: %s", c.Shards[0][0].Addr, c.Name),
			fmt.Sprintf("table: %s.d_ev, target: distributed", db))
		cw, err := writer.OpenCluster(context.Background(), "w", cfg.ClickHouse, cfg.Routes)
		if err != nil {
			t.Fatal(err)
		}
		defer cw.Close()
		want := "insert_distributed_sync"
		if !c.Keeper {
			want = "distributed_foreground_insert"
		}
		if cw.SyncSetting() != want {
			t.Errorf("sync setting %q on %s, want %s", cw.SyncSetting(), c.Version, want)
		}
		cols, err := cw.Describe(context.Background(), db, "d_ev")
		if err != nil {
			t.Fatal(err)
		}
		blk := seqBlock("UInt64", 0, rows, u64Keys(0, rows))
		if err := cw.Insert(context.Background(), chtable.NewTable(db, "d_ev", cols, blk.Columns()), blk, 1, nil, nil); err != nil {
			t.Fatal(err)
		}
		if got := maxOnShards(); got != rows {
			t.Fatalf("right after the INSERT returned the shards hold %d rows, want %d (a synchronous Distributed insert)", got, rows)
		}
	})
	t.Run("quorum", func(t *testing.T) {
		if !c.Keeper {
			t.Skipf("insert_quorum needs replicated tables; %s has no Keeper", c.Name)
		}
		localTable(t, c, db, "q")
		c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.d_q AS %s.q ENGINE = Distributed(%s, %s, q, cityHash64(k))", db, db, c.Name, db))
		cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], cluster: %s, settings: {insert_quorum: 2, insert_quorum_timeout: 20000}", c.Shards[0][0].Addr, c.Name),
			fmt.Sprintf("table: %s.d_q, target: local, sharding_key: k", db))
		cw, _, cols := openCluster(t, cfg, db, "d_q")
		blk := seqBlock("UInt64", 0, rows, u64Keys(0, rows))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := cw.Insert(ctx, chtable.NewTable(db, "d_q", cols, blk.Columns()), blk, 1, func(a writer.Attempt) { t.Logf("attempt %d: %v", a.N, a.Err) }, nil); err != nil {
			t.Fatal(err)
		}
		// No SYNC REPLICA: the quorum made both replicas have it already.
		total := uint64(0)
		for si, s := range c.Shards {
			a, b := count(t, s[0].Conn(t), db+".q", false), count(t, s[1].Conn(t), db+".q", false)
			if a != b {
				t.Errorf("shard %d: replicas hold %d and %d rows right after a quorum-2 INSERT", si+1, a, b)
			}
			total += a
		}
		if total != rows {
			t.Errorf("%d rows, want %d", total, rows)
		}
	})
}

// TestClusterChecksumDedupNeedsTheSameOrder measures what 18.16's block
// checksum deduplication (its only one: no insert_deduplication_token)
// catches across the two replicas of a shard: the identical block, yes; the
// same rows in another order, only when the table's sort key orders them
// back into the same part (a unique key), not when rows tie on it. A batch
// rebuilt after a crash holds the same records but not necessarily in the
// same order (partitions are fetched again in their own interleaving), so
// delivery: exactly_once is refused on this server rather than trusted to
// the checksum.
func TestClusterChecksumDedupNeedsTheSameOrder(t *testing.T) {
	c := testenv.Cluster(t)
	db := c.NewDatabase(t)
	const rows = 1000
	first, second := c.Shards[0][0].Conn(t), c.Shards[0][1].Conn(t)
	insert := func(conn driver.Conn, table string, order []int) {
		t.Helper()
		b, err := conn.PrepareBatch(context.Background(), "INSERT INTO "+db+"."+table+" (i, k, p)")
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range order {
			// k ties: ten rows per value.
			if err := b.Append(uint32(i), uint64(i/10), fmt.Sprint("row-", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	fwd, rev := make([]int, rows), make([]int, rows)
	for i := range rows {
		fwd[i], rev[i] = i, rows-1-i
	}
	results := map[string]uint64{}
	for ci, tc := range []struct {
		name, orderBy string
		again         []int
		want          uint64
	}{
		{"identical block, unique sort key", "i", fwd, rows},
		{"identical block, sort key with ties", "k", fwd, rows},
		{"rows reversed, unique sort key", "i", rev, rows},
		{"rows reversed, sort key with ties", "k", rev, 2 * rows},
	} {
		table := fmt.Sprintf("t%d", ci)
		c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.%s (i UInt32, k UInt64, p String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/%s/%s', '{replica}') ORDER BY %s",
			db, table, db, table, tc.orderBy))
		insert(first, table, fwd)
		insert(second, table, tc.again)
		got := count(t, first, db+"."+table, true)
		results[tc.name] = got
		if got != tc.want {
			t.Errorf("%s: %d rows after inserting %d twice, measured before as %d", tc.name, got, rows, tc.want)
		}
	}
	t.Logf("rows after the same %d rows went to replica 1 and again to replica 2: %v", rows, results)
}

// TestClusterAddColumnOnCluster: schema evolution on a cluster adds the
// column to the replicated local table ON CLUSTER and to the Distributed
// table on every node, for clickhouse.cluster and for a listed shards
// topology; rows inserted with the new column afterwards keep its values
// (read back through the Distributed table), the rows before read NULL. On
// the 26.9 cluster, which refuses ON CLUSTER (no Keeper), the local table's
// column is added node by node and the DDL says so.
func TestClusterAddColumnOnCluster(t *testing.T) {
	testenv.EachCluster(t, testClusterAddColumnOnCluster)
}

func testClusterAddColumnOnCluster(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	var shards []string
	for _, s := range c.Shards {
		var addrs []string
		for _, n := range s {
			addrs = append(addrs, fmt.Sprintf("%q", n.Addr))
		}
		shards = append(shards, "["+strings.Join(addrs, ", ")+"]")
	}
	for ci, topo := range []string{"cluster: " + c.Name, "shards: [" + strings.Join(shards, ", ") + "]"} {
		local := fmt.Sprintf("ev%d", ci)
		localTable(t, c, db, local)
		c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.d_%s AS %s.%s ENGINE = Distributed(%s, %s, %s, cityHash64(k))", db, local, db, local, c.Name, db, local))
		cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], %s", c.Shards[0][0].Addr, topo),
			fmt.Sprintf("table: %s.d_%s, target: local, sharding_key: k", db, local))
		cw, _, cols := openCluster(t, cfg, db, "d_"+local)
		ctx := context.Background()
		blk := seqBlock("UInt64", 0, 500, u64Keys(0, 500))
		if err := cw.Insert(ctx, chtable.NewTable(db, "d_"+local, cols, blk.Columns()), blk, 1, nil, nil); err != nil {
			t.Fatal(err)
		}
		info, err := cw.Features(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ddl, added, err := cw.AddColumn(ctx, info, db, "d_"+local, cfg.ClickHouse.Cluster, "extra", "Nullable(String)")
		if err != nil || !added {
			t.Fatalf("%s: added %v, %v (%s)", topo, added, err, ddl)
		}
		t.Logf("%s: %s", topo, ddl)
		if refused := strings.Contains(ddl, "refused, Code 392"); refused != (!c.Keeper && ci == 0) {
			t.Errorf("%s: DDL %q: want the ON CLUSTER refusal noted exactly when the cluster has no Keeper and is named", topo, ddl)
		}
		for _, n := range c.Nodes() {
			for _, tbl := range []string{local, "d_" + local} {
				var has uint64
				if err := n.Conn(t).QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = 'extra'", db, tbl).Scan(&has); err != nil {
					t.Fatal(err)
				}
				if has != 1 {
					t.Errorf("%s: %s has no column extra on %s", topo, tbl, n.Name)
				}
			}
		}
		// A second call finds the column and changes nothing.
		if _, again, err := cw.AddColumn(ctx, info, db, "d_"+local, cfg.ClickHouse.Cluster, "extra", "Nullable(String)"); err != nil || again {
			t.Errorf("%s: adding it again: added %v, %v", topo, again, err)
		}
		cols, err = cw.Describe(ctx, db, "d_"+local)
		if err != nil {
			t.Fatal(err)
		}
		extra := make([]*string, 500)
		for i := range extra {
			v := fmt.Sprint("e-", 500+i)
			extra[i] = &v
		}
		blk2 := seqBlock("UInt64", 500, 500, u64Keys(500, 500)).(*colBlock)
		blk2.cols = append(blk2.cols, chschema.ColumnSchema{Name: "extra", Type: "Nullable(String)"})
		blk2.data = append(blk2.data, extra)
		if err := cw.Insert(ctx, chtable.NewTable(db, "d_"+local, cols, blk2.Columns()), blk2, 2, nil, nil); err != nil {
			t.Fatal(err)
		}
		conn := c.Conn(t)
		// The Distributed table reads any one replica of a shard: every
		// replica has fetched both blocks' parts before the count.
		for _, n := range c.Nodes() {
			c.SyncReplica(t, n.Conn(t), db+"."+local)
		}
		var total, withExtra, right uint64
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(), countIf(extra IS NOT NULL), countIf(extra = concat('e-', toString(i))) FROM %s.d_%s", db, local)).Scan(&total, &withExtra, &right); err != nil {
			t.Fatal(err)
		}
		if total != 1000 || withExtra != 500 || right != 500 {
			t.Errorf("%s: %d rows, %d with extra, %d with the value they were sent with; want 1000, 500, 500", topo, total, withExtra, right)
		}
	}
}

// TestClusterPermanentPartStopsTheBatch: a shard part that fails for good
// (shard 1's table takes no UInt64 key) ends the batch with that error at
// once, although shard 2 is unreachable and its part would be retried
// forever.
func TestClusterPermanentPartStopsTheBatch(t *testing.T) {
	testenv.EachCluster(t, testClusterPermanentPartStopsTheBatch)
}

func testClusterPermanentPartStopsTheBatch(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	one, two := c.Shards[0][0], c.Shards[1][0]
	testenv.Exec(t, one.Conn(t), fmt.Sprintf("CREATE TABLE %s.ev (i UInt32, k Array(UInt8), p String) ENGINE = MergeTree ORDER BY i", db))
	testenv.Exec(t, two.Conn(t), fmt.Sprintf("CREATE TABLE %s.ev (i UInt32, k UInt64, p String) ENGINE = MergeTree ORDER BY i", db))
	p2 := testenv.NewProxy(t, two.Addr)
	cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], shards: [[%q], [%q]]", two.Addr, one.Addr, p2.Addr),
		fmt.Sprintf("table: %s.ev, target: local, sharding_key: k", db))
	cw, _, cols := openCluster(t, cfg, db, "ev")
	p2.Cut()
	blk := seqBlock("UInt64", 0, 200, u64Keys(0, 200))
	start := time.Now()
	err := cw.Insert(context.Background(), chtable.NewTable(db, "ev", cols, blk.Columns()), blk, 1, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "shard 1:") || strings.Contains(err.Error(), "shard 2:") {
		t.Fatalf("Insert: %v; want shard 1's permanent error alone", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the batch failed after %s, waiting for the unreachable shard", took)
	}
	t.Logf("%v", err)
}

// schemaObserver is an observer that also records the schema holds.
type schemaObserver struct {
	*observer
	held, agreed, gaveUp atomic.Int32
	lastDiffs            atomic.Value
}

func (o *schemaObserver) SchemaHeld(table, diffs string) {
	o.held.Add(1)
	o.lastDiffs.Store(diffs)
}

func (o *schemaObserver) SchemaReleased(table string, waited time.Duration, agreed bool) {
	if agreed {
		o.agreed.Add(1)
	} else {
		o.gaveUp.Add(1)
	}
}

// TestClusterHoldsPartsWhileReplicasDiffer: a column added on one node only
// (a half-applied ALTER; on 18.16 it reaches that shard's other replica
// through ZooKeeper, not the other shard) is seen when the schema is read
// again, and the next batch is held, nothing of it inserted on any shard,
// until the other shard gets the column too; then it goes in whole. With
// the column on one node again and a short schema_agreement_timeout, the
// batch fails after it, naming the difference, with nothing inserted.
func TestClusterHoldsPartsWhileReplicasDiffer(t *testing.T) {
	testenv.EachCluster(t, testClusterHoldsPartsWhileReplicasDiffer)
}

func testClusterHoldsPartsWhileReplicasDiffer(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	localTable(t, c, db, "ev")
	c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.ev_all AS %s.ev ENGINE = Distributed(%s, %s, ev, cityHash64(k))", db, db, c.Name, db))
	odd := c.Shards[1][len(c.Shards[1])-1] // the node altered alone
	// Parts go to the replicas in turn: each shard is counted on a
	// replica that has fetched its shard's parts.
	total := func() uint64 {
		var n uint64
		for _, s := range c.Shards {
			n += count(t, s[0].Conn(t), db+".ev", c.Keeper)
		}
		return n
	}
	open := func(timeout string) (*writer.Cluster, *schemaObserver, []chschema.ColumnSchema) {
		cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], cluster: %s, schema_agreement_timeout: %s", c.Shards[0][0].Addr, c.Name, timeout),
			fmt.Sprintf("table: %s.ev_all, target: local, sharding_key: k", db))
		cw, err := writer.OpenCluster(context.Background(), "w", cfg.ClickHouse, cfg.Routes)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cw.Close() })
		obs := &schemaObserver{observer: newObserver()}
		cw.Observe(obs)
		cols, err := cw.Describe(context.Background(), db, "ev_all")
		if err != nil {
			t.Fatal(err)
		}
		return cw, obs, cols
	}
	cw, obs, cols := open("60s")
	blk := seqBlock("UInt64", 0, 1000, u64Keys(0, 1000))
	tab := chtable.NewTable(db, "ev_all", cols, blk.Columns())
	if err := cw.Insert(context.Background(), tab, blk, 1, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := total(); n != 1000 || obs.held.Load() != 0 {
		t.Fatalf("before the ALTER: %d rows, %d holds; want 1000, 0", n, obs.held.Load())
	}

	testenv.Exec(t, odd.Conn(t), "ALTER TABLE "+db+".ev ADD COLUMN extra Nullable(String)")
	if _, err := cw.Describe(context.Background(), db, "ev_all"); err != nil { // the schema re-read
		t.Fatal(err)
	}
	blk2 := seqBlock("UInt64", 1000, 1000, u64Keys(1000, 1000))
	res := make(chan error, 1)
	start := time.Now()
	go func() { res <- cw.Insert(context.Background(), tab, blk2, 2, nil, nil) }()
	time.Sleep(2 * time.Second)
	select {
	case err := <-res:
		t.Fatalf("the batch returned (%v) while shard 2 had a column shard 1 lacks", err)
	default:
	}
	if n := total(); n != 1000 {
		t.Fatalf("%d rows while the batch was held, want the 1000 from before: a part went in around the difference", n)
	}
	diffs, _ := obs.lastDiffs.Load().(string)
	if obs.held.Load() != 1 || !strings.Contains(diffs, "extra Nullable(String)") {
		t.Fatalf("holds %d, differences %q: want one hold naming the column", obs.held.Load(), diffs)
	}
	// The rest of the ALTER: shard 1 (on 18.16 one replica, which
	// replicates it to the other).
	testenv.Exec(t, c.Shards[0][0].Conn(t), "ALTER TABLE "+db+".ev ADD COLUMN extra Nullable(String)")
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the batch was still held 30 s after every shard had the column")
	}
	waited := time.Since(start)
	if n := total(); n != 2000 || obs.agreed.Load() != 1 {
		t.Errorf("after the ALTER reached every shard: %d rows, %d releases; want 2000, 1", n, obs.agreed.Load())
	}
	t.Logf("held %s: %s", waited.Round(100*time.Millisecond), diffs)

	// Half-applied again, and it stays so: the batch fails after the bound.
	testenv.Exec(t, odd.Conn(t), "ALTER TABLE "+db+".ev ADD COLUMN extra2 UInt8")
	cw2, obs2, cols2 := open("2s")
	blk3 := seqBlock("UInt64", 2000, 500, u64Keys(2000, 500))
	start = time.Now()
	err := cw2.Insert(context.Background(), chtable.NewTable(db, "ev_all", cols2, blk3.Columns()), blk3, 3, nil, nil)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "half-applied ALTER") || !strings.Contains(err.Error(), "extra2 UInt8") {
		t.Fatalf("Insert after the bound: %v; want the difference named", err)
	}
	if took < 2*time.Second || took > 10*time.Second || obs2.gaveUp.Load() != 1 {
		t.Errorf("failed after %s with %d give-ups; want about the 2 s bound, 1", took, obs2.gaveUp.Load())
	}
	if n := total(); n != 2000 {
		t.Errorf("%d rows after the failed batch, want 2000", n)
	}
	t.Logf("%v", err)
}

//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"sink/config"

	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestClusterPipelineFailover runs the whole sink from Kafka into a 2×2
// cluster with target: local by key, through proxies in front of every
// replica, and cuts one replica of each shard in turn: shard 1's first
// replica from the start until half the rows are in (so shard 1's parts
// sent to it must fail over, however fast the batches go), then shard 2's
// first: every row arrives exactly once (counted on both replicas of each
// shard and by distinct id), and the group has committed the topic's end.
func TestClusterPipelineFailover(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := testenv.Kafka(t)
	db, shards, proxies := clusterTables(t, c)
	topic := testenv.NewTopic(t, 6)
	const n = 60000
	produceEvents(t, topic, n)
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms, fetch_min_bytes: 64KiB, fetch_max_bytes: 256KiB, max_partition_fetch_bytes: 64KiB}
clickhouse: {addrs: [%q], database: %s, cluster: %s, shards: [%s], retry_initial: 50ms, retry_max: 500ms, query_timeout: 10s, dial_timeout: 2s}
batch: {max_rows: 3000, max_wait: 1s}
routes: [{topic: %q, table: ev, target: local, sharding_key: user_id}]
http: {listen: ""}
`, testenv.UniqueName(t, "cl"), brokers[0], topic, c.Shards[0][0].Addr, db, c.Name, shards, topic))

	ctx := context.Background()
	cw := openCluster(t, cfg)
	var obs failovers
	cw.Observe(&obs)
	seed := c.Conn(t)
	proxies[0][0].Cut()
	cut := 1
	st := runSinkWhile(t, cfg, cw, zerolog.ErrorLevel, 3*time.Minute, func() (bool, string) {
		var got uint64
		if err := seed.QueryRow(ctx, "SELECT count() FROM "+db+".ev").Scan(&got); err != nil {
			t.Fatal(err)
		}
		switch {
		case cut == 1 && got > n/2:
			proxies[0][0].Restore()
			proxies[1][0].Cut()
			cut++
		}
		return got >= n && cut == 2, fmt.Sprintf("%d of %d rows (cuts done: %d)", got, n, cut)
	})
	exactlyOnShards(t, c, db, n)
	assertCommittedAtEnd(t, cfg.Kafka.Group, topic)
	if obs.shard[1].Load() == 0 {
		t.Errorf("no failover on shard 1: its first replica was cut from the start until half the rows were in")
	}
	t.Logf("%d rows exactly once across 2 shards × 2 replicas with one replica of each shard cut in turn; %d batches; failovers: shard 1 %d, shard 2 %d",
		n, st.Inserts, obs.shard[1].Load(), obs.shard[2].Load())
}

// TestClusterByKeyPartsHoldMaxRows: with target: local by key, max_rows
// bounds each shard's INSERT, not the batch: a batch is sealed when its
// largest shard's part holds max_rows, so the shards get INSERTs as large
// as a whole batch's (half the INSERTs of parts of max_rows/2), none
// larger, and every row arrives exactly once.
func TestClusterByKeyPartsHoldMaxRows(t *testing.T) {
	c := testenv.Cluster(t)
	db, shards, _ := clusterTables(t, c)
	topic := testenv.NewTopic(t, 1)
	const n, maxRows = 12000, 2000
	produceEvents(t, topic, n)
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s, cluster: %s, shards: [%s]}
batch: {max_rows: %d, max_wait: 2s}
routes: [{topic: %q, table: ev, target: local, sharding_key: user_id}]
http: {listen: ""}
`, testenv.UniqueName(t, "parts"), testenv.Kafka(t)[0], topic, c.Shards[0][0].Addr, db, c.Name, shards, maxRows, topic))
	cw := openCluster(t, cfg)
	var ins shardInserts
	cw.Observe(&ins)
	seed := c.Conn(t)
	runSinkWhile(t, cfg, cw, zerolog.ErrorLevel, 3*time.Minute, func() (bool, string) {
		got := countRows(t, seed, db+".ev")
		return got >= n, fmt.Sprintf("%d of %d rows", got, n)
	})
	exactlyOnShards(t, c, db, n)
	rows := ins.list()
	full, most := 0, 0
	for _, r := range rows {
		most = max(most, r)
		if r == maxRows {
			full++
		}
	}
	// 12,000 rows split about evenly: three batches whose larger part
	// reaches 2,000 and the rest, so 6 to 8 INSERTs in all (parts of
	// 1,000 were 12).
	if most > maxRows || full < 3 || len(rows) > 8 {
		t.Fatalf("rows per shard INSERT %v: want none over %d, at least 3 of exactly %d, at most 8 INSERTs", rows, maxRows, maxRows)
	}
	t.Logf("rows per shard INSERT: %v", rows)
}

// shardInserts lists the rows of every shard INSERT the cluster writer
// made.
type shardInserts struct {
	mu   sync.Mutex
	rows []int
}

func (s *shardInserts) ShardInserted(_ int, _ string, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, rows)
}
func (s *shardInserts) ShardFailed(int, string, int32, bool) {}
func (s *shardInserts) list() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.rows...)
}

// failovers counts the cluster writer's failovers per shard (1, 2).
type failovers struct{ shard [3]atomic.Int64 }

func (f *failovers) ShardInserted(int, string, int) {}
func (f *failovers) ShardFailed(shard int, _ string, _ int32, failover bool) {
	if failover && shard < len(f.shard) {
		f.shard[shard].Add(1)
	}
}

// clusterTables creates db.ev_local (replicated in each shard) and db.ev
// (Distributed by cityHash64(user_id)) on every node, and a proxy in front
// of every replica; shards is the clickhouse.shards list of the proxies.
func clusterTables(t *testing.T, c testenv.LocalCluster) (db, shards string, proxies [][]*testenv.Proxy) {
	t.Helper()
	db = c.NewDatabase(t)
	for _, n := range c.Nodes() {
		testenv.Exec(t, n.Conn(t),
			fmt.Sprintf(`CREATE TABLE %s.ev_local (id UInt64, user_id UInt32, ts DateTime, event_type String, cost Decimal(18, 4), payload String)
			ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/%s/ev_local', '{replica}') ORDER BY id`, db, db),
			fmt.Sprintf("CREATE TABLE %s.ev AS %s.ev_local ENGINE = Distributed(%s, %s, ev_local, cityHash64(user_id))", db, db, c.Name, db))
	}
	var list []string
	for _, s := range c.Shards {
		var addrs []string
		var ps []*testenv.Proxy
		for _, n := range s {
			p := testenv.NewProxy(t, n.Addr)
			ps = append(ps, p)
			addrs = append(addrs, fmt.Sprintf("%q", p.Addr))
		}
		proxies = append(proxies, ps)
		list = append(list, "["+strings.Join(addrs, ", ")+"]")
	}
	return db, strings.Join(list, ", "), proxies
}

// TestClusterShardOutagePausesFetching: with both replicas of shard 2 cut,
// batches whose shard 2 part cannot go in stay in flight, so the buffer
// fills and fetching pauses (sink_fetch_paused 1) instead of reading on:
// a second later neither the records consumed nor the rows have grown (the decoding
// step that crossed buffer_memory is the overshoot, as on a single
// server); once shard 2 is back every record is in exactly once.
func TestClusterShardOutagePausesFetching(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := testenv.Kafka(t)
	db, shards, proxies := clusterTables(t, c)
	for _, p := range proxies[1] {
		p.Cut()
	}
	topic := testenv.NewTopic(t, 3)
	const n = 40000
	produceEvents(t, topic, n)
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms, fetch_min_bytes: 16KiB, fetch_max_bytes: 128KiB, max_partition_fetch_bytes: 64KiB}
clickhouse: {addrs: [%q], database: %s, cluster: %s, shards: [%s], retry_initial: 50ms, retry_max: 300ms, query_timeout: 10s, dial_timeout: 1s, max_in_flight: 2}
batch: {max_rows: 2000, max_bytes: 256KiB, buffer_memory: 1MiB, max_wait: 500ms}
routes: [{topic: %q, table: ev, target: local, sharding_key: user_id}]
http: {listen: ""}
`, testenv.UniqueName(t, "out"), brokers[0], topic, c.Shards[0][0].Addr, db, c.Name, shards, topic))
	ctx := context.Background()
	cw := openCluster(t, cfg)
	m := metrics.New(cfg.Kafka.Group)
	seed := c.Conn(t)
	count := func() uint64 {
		var got uint64
		if err := seed.QueryRow(ctx, "SELECT count() FROM "+db+".ev").Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	var pausedAt, bufferAt float64
	restored := false
	runSinkWhile(t, cfg, cw, zerolog.ErrorLevel, 3*time.Minute, func() (bool, string) {
		if !restored {
			if gauge(t, m, metrics.FetchPaused) == 1 {
				pausedAt, bufferAt = float64(count()), gauge(t, m, metrics.BufferBytes)
				consumed := counterSum(t, m, metrics.RecordsConsumed)
				time.Sleep(time.Second) // a second later: still paused, nothing more read or inserted
				if gauge(t, m, metrics.FetchPaused) != 1 {
					return false, "fetching resumed while shard 2 was down"
				}
				// Fetching is what pauses: shard 1's parts already in flight
				// may still land in that second, but nothing more is read and
				// no row appears that was not read.
				if later, rows := counterSum(t, m, metrics.RecordsConsumed), float64(count()); later != consumed || rows > consumed || consumed >= n {
					t.Errorf("while paused the records consumed went from %.0f to %.0f (of %d), the visible rows from %.0f to %.0f", consumed, later, n, pausedAt, rows)
				}
				for _, p := range proxies[1] {
					p.Restore()
				}
				restored = true
			}
			return false, "waiting for fetching to pause while shard 2 is down"
		}
		got := count()
		return got >= n, fmt.Sprintf("%d of %d rows after shard 2 came back", got, n)
	}, pipeline.WithMetrics(m))
	exactlyOnShards(t, c, db, n)
	if bufferAt < float64(cfg.Batch.BufferMemory) {
		t.Errorf("paused with %.0f bytes buffered, below buffer_memory %d", bufferAt, int64(cfg.Batch.BufferMemory))
	}
	assertCommittedAtEnd(t, cfg.Kafka.Group, topic)
	t.Logf("paused with %.0f rows visible (shard 1's parts) and %.0f bytes buffered (budget %d); then all %d exactly once", pausedAt, bufferAt, int64(cfg.Batch.BufferMemory), n)
}

// exactlyOnShards checks, once every replica has fetched its shard's parts,
// that both replicas of each shard hold the same rows and that the shards
// hold n rows with n distinct ids.
func exactlyOnShards(t *testing.T, c testenv.LocalCluster, db string, n uint64) {
	t.Helper()
	ctx := context.Background()
	var sum uint64
	for si, s := range c.Shards {
		var per []uint64
		for _, node := range s {
			conn := node.Conn(t)
			testenv.Exec(t, conn, "SYSTEM SYNC REPLICA "+db+".ev_local")
			var k uint64
			if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".ev_local").Scan(&k); err != nil {
				t.Fatal(err)
			}
			per = append(per, k)
		}
		if per[0] != per[1] || per[0] == 0 {
			t.Errorf("shard %d: replicas hold %v rows", si+1, per)
		}
		sum += per[0]
	}
	var distinct uint64
	if err := c.Conn(t).QueryRow(ctx, "SELECT uniqExact(id) FROM "+db+".ev").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if sum != n || distinct != n {
		t.Fatalf("%d rows over the shards, %d distinct ids; want exactly %d", sum, distinct, n)
	}
}

// counterSum is the sum of counter name over its labels.
func counterSum(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, x := range f.GetMetric() {
				sum += x.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestClusterExactlyOnceOn26Cluster runs exactly-once delivery with
// target: local by key into the two-shard 26.9 cluster (weights 1 and 3),
// the route naming the local table (the Distributed one is
// TestClusterExactlyOnceDistributedAndShardWindowOn26Cluster's):
// every row lands once on the shard the Distributed engine expects it on,
// the group commits the topic's end, and the cluster writer gives the
// table a placement fingerprint (which every intent records).
func TestClusterExactlyOnceOn26Cluster(t *testing.T) {
	c := testenv.Cluster26(t)
	brokers := testenv.Kafka(t)
	db := c.NewDatabase(t)
	for _, n := range c.Nodes() {
		testenv.Exec(t, n.Conn(t),
			fmt.Sprintf(`CREATE TABLE %s.ev_local (id UInt64, user_id UInt32, ts DateTime, event_type String, cost Decimal(18, 4), payload String,
				_topic LowCardinality(String), _partition Int32, _offset Int64) ENGINE = %s`, db, c.Engine(db, "ev_local", "id")),
			fmt.Sprintf("CREATE TABLE %s.ev AS %s.ev_local ENGINE = Distributed(%s, %s, ev_local, cityHash64(user_id))", db, db, c.WeightedName, db))
	}
	topic := testenv.NewTopic(t, 3)
	const n = 20000
	produceEvents(t, topic, n)
	cfg := newConfig(t, fmt.Sprintf(`
name: %s
delivery: exactly_once
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s, cluster: %s, retry_initial: 50ms, retry_max: 500ms}
batch: {max_rows: 2000, max_wait: 500ms}
routes: [{topic: %q, table: ev_local, target: local, sharding_key: user_id}]
http: {listen: ""}
`, testenv.UniqueName(t, "eocl"), brokers[0], topic, c.Shards[0][0].Addr, db, c.WeightedName, topic))
	ctx := context.Background()
	cw := openCluster(t, cfg)
	place, err := cw.Placement(ctx, db, "ev_local")
	if err != nil || place == "" {
		t.Fatalf("placement %q, %v; want a fingerprint for a table split by key", place, err)
	}
	seed := c.Conn(t)
	runSinkWhile(t, cfg, cw, zerolog.ErrorLevel, 3*time.Minute, func() (bool, string) {
		var got uint64
		if err := seed.QueryRow(ctx, "SELECT count() FROM "+db+".ev").Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got >= n, fmt.Sprintf("%d of %d rows", got, n)
	})
	var sum uint64
	for si, s := range c.Shards {
		var k, misplaced uint64
		conn := s[0].Conn(t)
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".ev_local").Scan(&k); err != nil {
			t.Fatal(err)
		}
		// Weights 1 and 3: shard 1 takes residues 0 of 4, shard 2 the others.
		cond := "cityHash64(user_id) % 4 != 0"
		if si == 1 {
			cond = "cityHash64(user_id) % 4 = 0"
		}
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".ev_local WHERE "+cond).Scan(&misplaced); err != nil {
			t.Fatal(err)
		}
		if k == 0 || misplaced != 0 {
			t.Errorf("shard %d: %d rows, %d of them where the Distributed engine would not look", si+1, k, misplaced)
		}
		sum += k
	}
	var distinct uint64
	if err := seed.QueryRow(ctx, "SELECT uniqExact(_topic, _partition, _offset) FROM "+db+".ev").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if sum != n || distinct != n {
		t.Fatalf("%d rows over the shards, %d distinct offsets; want exactly %d", sum, distinct, n)
	}
	assertCommittedAtEnd(t, cfg.Kafka.Group, topic)
	t.Logf("%d rows exactly once over 2 shards (weights 1, 3), placement %s", n, place)
}

// eoClusterTables creates, on every node of the 26.9 cluster, the local
// table ev_local (the Kafka columns, window testenv.DedupWindow) and the
// Distributed table ev over the weighted cluster by cityHash64(user_id).
func eoClusterTables(t *testing.T, c testenv.LocalCluster) string {
	t.Helper()
	db := c.NewDatabase(t)
	for _, n := range c.Nodes() {
		testenv.Exec(t, n.Conn(t),
			fmt.Sprintf(`CREATE TABLE %s.ev_local (id UInt64, user_id UInt32, ts DateTime, event_type String, cost Decimal(18, 4), payload String,
				_topic LowCardinality(String), _partition Int32, _offset Int64) ENGINE = %s`, db, c.Engine(db, "ev_local", "id")),
			fmt.Sprintf("CREATE TABLE %s.ev AS %s.ev_local ENGINE = Distributed(%s, %s, ev_local, cityHash64(user_id))", db, db, c.WeightedName, db))
	}
	return db
}

// eoClusterConfig is exactly-once into table (ev_local or the Distributed
// ev) with target: local by user_id on the weighted 26.9 cluster, batches
// of maxRows, under group.
func eoClusterConfig(t *testing.T, c testenv.LocalCluster, db, topic, table, group string, maxRows int) *config.Config {
	t.Helper()
	return newConfig(t, fmt.Sprintf(`
name: %s
delivery: exactly_once
kafka: {brokers: [%q], topics: [%q], group: %s, fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s, cluster: %s, retry_initial: 50ms, retry_max: 500ms}
batch: {max_rows: %d, max_wait: 500ms}
routes: [{topic: %q, table: %s, target: local, sharding_key: user_id}]
http: {listen: ""}
`, group, testenv.Kafka(t)[0], topic, group, c.Shards[0][0].Addr, db, c.WeightedName, maxRows, topic, table))
}

// shardCounts are the rows of db.ev_local on each shard of c.
func shardCounts(t *testing.T, c testenv.LocalCluster, db string) []uint64 {
	t.Helper()
	var out []uint64
	for _, s := range c.Shards {
		out = append(out, countRows(t, s[0].Conn(t), db+".ev_local"))
	}
	return out
}

// TestClusterExactlyOnceRewindOn26Cluster: exactly-once with target: local
// by key into the two-shard 26.9 cluster, the route naming the local
// table; then the group's committed offsets are moved back to 0 with kadm
// (no ledger) while rows sit on both shards, and the sink runs again with
// another batch size (so no batch has a token a shard remembers): the
// check after the rewind asks both shards which offsets they hold, and
// nothing is inserted again on either; only the records produced since
// arrive.
func TestClusterExactlyOnceRewindOn26Cluster(t *testing.T) {
	c := testenv.Cluster26(t)
	db := eoClusterTables(t, c)
	topic := testenv.NewTopic(t, 3)
	group := testenv.UniqueName(t, "eorw")
	const n, more = 6000, 900
	produceEvents(t, topic, n)
	ctx := context.Background()
	seed := c.Conn(t)
	total := func() uint64 { return countRows(t, seed, db+".ev") }
	run := func(maxRows int, want uint64) {
		t.Helper()
		cfg := eoClusterConfig(t, c, db, topic, "ev_local", group, maxRows)
		cw, err := writer.OpenCluster(ctx, cfg.Name, cfg.ClickHouse, cfg.Routes)
		if err != nil {
			t.Fatal(err)
		}
		defer cw.Close()
		runSinkWhile(t, cfg, cw, zerolog.WarnLevel, 3*time.Minute, func() (bool, string) {
			got := total()
			return got >= want, fmt.Sprintf("%d of %d rows", got, want)
		})
		assertCommittedAtEnd(t, group, topic)
	}
	run(2000, n)
	before := shardCounts(t, c, db)
	if before[0] == 0 || before[1] == 0 || before[0]+before[1] != n {
		t.Fatalf("rows per shard %v after the first run; want %d over both", before, n)
	}

	// The operator's rewind: every partition back to 0, no metadata.
	adm := kadm.NewClient(testenv.KafkaClient(t))
	var os kadm.Offsets
	for p := int32(0); p < 3; p++ {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	if resp, err := adm.CommitOffsets(ctx, group, os); err != nil || resp.Error() != nil {
		t.Fatalf("rewinding the group: %v %v", err, resp.Error())
	}
	produceEvents(t, topic, more)
	run(700, n+more)
	time.Sleep(time.Second) // a repeat would land with the last batches
	after := shardCounts(t, c, db)
	var distinct uint64
	if err := seed.QueryRow(ctx, "SELECT uniqExact(_topic, _partition, _offset) FROM "+db+".ev").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if after[0]+after[1] != n+more || distinct != n+more || after[0] < before[0] || after[1] < before[1] {
		t.Fatalf("rows per shard %v (before the rewind %v), %d distinct offsets; want exactly %d, nothing inserted again", after, before, distinct, n+more)
	}
	t.Logf("rewind to 0 with %v rows on the shards: %v after, %d produced since", before, after, more)
}

// TestClusterExactlyOnceDistributedAndShardWindowOn26Cluster: a route
// naming the Distributed table with target: local is accepted for
// exactly-once (the sink writes and checks the local tables its engine
// names) and delivers every row once; then shard 2's local table is set to
// a deduplication window of 0, and the check at start refuses in one line
// naming shard 2 and its replica.
func TestClusterExactlyOnceDistributedAndShardWindowOn26Cluster(t *testing.T) {
	c := testenv.Cluster26(t)
	db := eoClusterTables(t, c)
	topic := testenv.NewTopic(t, 3)
	group := testenv.UniqueName(t, "eodist")
	const n = 4000
	produceEvents(t, topic, n)
	ctx := context.Background()
	cfg := eoClusterConfig(t, c, db, topic, "ev", group, 1500)
	cw := openCluster(t, cfg)
	seed := c.Conn(t)
	runSinkWhile(t, cfg, cw, zerolog.WarnLevel, 3*time.Minute, func() (bool, string) {
		got := countRows(t, seed, db+".ev")
		return got >= n, fmt.Sprintf("%d of %d rows", got, n)
	})
	assertCommittedAtEnd(t, group, topic)
	if k := shardCounts(t, c, db); k[0] == 0 || k[1] == 0 || k[0]+k[1] != n {
		t.Fatalf("rows per shard %v; want %d over both", k, n)
	}

	shard2 := c.Shards[1][0]
	testenv.Exec(t, shard2.Conn(t), "ALTER TABLE "+db+".ev_local MODIFY SETTING non_replicated_deduplication_window = 0")
	p, err := pipeline.New(ctx, cfg, zerolog.Nop(), cw, runOpts(t, cfg, cw)...)
	if err != nil {
		t.Fatal(err)
	}
	err = p.CheckExactlyOnce(ctx)
	want := fmt.Sprintf("table %s.ev_local on shard 2 replica %s has non_replicated_deduplication_window = 0", db, shard2.Addr)
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("check with shard 2's window 0: %v; want one line containing %q", err, want)
	}
	t.Logf("refused: %v", err)
}

// openCluster is the cluster writer of cfg's routes, closed when the test
// ends.
func openCluster(t *testing.T, cfg *config.Config) *writer.Cluster {
	t.Helper()
	cw, err := writer.OpenCluster(context.Background(), cfg.Name, cfg.ClickHouse, cfg.Routes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cw.Close() })
	return cw
}

//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/consumer"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestClusterPipelineFailover runs the whole sink from Kafka into a 2×2
// cluster with target: local by key, through proxies in front of every
// replica, and cuts one replica of each shard in turn while it consumes:
// every row arrives exactly once (counted on both replicas of each shard
// and by distinct id), and the group has committed the topic's end.
func TestClusterPipelineFailover(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := testenv.Kafka(t)
	db := c.NewDatabase(t)
	for _, n := range c.Nodes() {
		testenv.Exec(t, n.Conn(t),
			fmt.Sprintf(`CREATE TABLE %s.ev_local (id UInt64, user_id UInt32, ts DateTime, event_type String, cost Decimal(18, 4), payload String)
			ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/%s/ev_local', '{replica}') ORDER BY id`, db, db),
			fmt.Sprintf("CREATE TABLE %s.ev AS %s.ev_local ENGINE = Distributed(%s, %s, ev_local, cityHash64(user_id))", db, db, c.Name, db))
	}
	var shards []string
	var proxies [][]*testenv.Proxy
	for _, s := range c.Shards {
		var addrs []string
		var ps []*testenv.Proxy
		for _, n := range s {
			p := testenv.NewProxy(t, n.Addr)
			ps = append(ps, p)
			addrs = append(addrs, fmt.Sprintf("%q", p.Addr))
		}
		proxies = append(proxies, ps)
		shards = append(shards, "["+strings.Join(addrs, ", ")+"]")
	}
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
`, testenv.UniqueName(t, "cl"), brokers[0], topic, c.Shards[0][0].Addr, db, c.Name, strings.Join(shards, ", "), topic))

	ctx := context.Background()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
	cw, err := writer.OpenCluster(ctx, cfg.Name, cfg.ClickHouse, cfg.Routes)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	var obs failovers
	cw.Observe(&obs)
	p, err := pipeline.New(ctx, cfg, log, cw)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := consumer.New(ctx, cfg, log, p.Hooks())
	if err != nil {
		t.Fatal(err)
	}
	p.Attach(cons)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- p.Run(runCtx) }()

	seed := c.Conn(t)
	total := func() uint64 {
		var got uint64
		if err := seed.QueryRow(ctx, "SELECT count() FROM "+db+".ev").Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	cut := 0
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := total()
		switch {
		case cut == 0 && got > n/5:
			proxies[0][0].Cut()
			cut++
		case cut == 1 && got > n/2:
			proxies[0][0].Restore()
			proxies[1][0].Cut()
			cut++
		}
		if got >= n && cut == 2 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("after 3 minutes %d of %d rows (cuts done: %d)", got, n, cut)
		}
		select {
		case err := <-ran:
			t.Fatalf("pipeline stopped early: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	cons.Close()
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
	if err := seed.QueryRow(ctx, "SELECT uniqExact(id) FROM "+db+".ev").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if sum != n || distinct != n {
		t.Fatalf("%d rows over the shards, %d distinct ids; want exactly %d", sum, distinct, n)
	}
	assertCommittedAtEnd(t, cfg.Kafka.Group, topic)
	if obs.shard[1].Load() == 0 {
		t.Errorf("no failover on shard 1: its first replica was cut while rows were still coming")
	}
	t.Logf("%d rows exactly once across 2 shards × 2 replicas with one replica of each shard cut in turn; %d batches; failovers: shard 1 %d, shard 2 %d",
		n, p.Stats().Inserts, obs.shard[1].Load(), obs.shard[2].Load())
}

// failovers counts the cluster writer's failovers per shard (1, 2).
type failovers struct{ shard [3]atomic.Int64 }

func (f *failovers) ShardInserted(int, string, int) {}
func (f *failovers) ShardFailed(shard int, _ string, _ int32, failover bool) {
	if failover && shard < len(f.shard) {
		f.shard[shard].Add(1)
	}
}

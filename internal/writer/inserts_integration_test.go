//go:build integration

package writer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sink/internal/budget"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestInsertQueries: on both servers, the InsertQuery count rises with
// the INSERTs another client makes (any table), and a Sharer reading it
// through InsertQueries sees them as the server's rate, none as its own.
// The servers are shared with other tests, so the counts are checked as
// at least what this test sent.
func TestInsertQueries(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		conn := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, conn,
			fmt.Sprintf("CREATE TABLE %s.a (x UInt64) ENGINE = MergeTree ORDER BY x", db),
			fmt.Sprintf("CREATE TABLE %s.b (x UInt64) ENGINE = MergeTree ORDER BY x", db))
		cfg := chConfig(t, s.Addr)
		w, err := writer.Open(ctx, "w", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		name := writer.ServerName(cfg.Addrs)
		sh := budget.NewSharer(budget.Settings{PerMinute: 6000, Window: 2 * time.Second}, writer.ShareReader(w, cfg.QueryTimeout), time.Second, zerolog.Nop())
		sh.SetDemand(name, 100)

		before, err := w.InsertQueries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if before.Uptime <= 0 {
			t.Errorf("uptime %v", before.Uptime)
		}
		sh.Round(ctx)
		start := time.Now()
		const inserts = 10
		for i := range inserts {
			testenv.InsertSeq(t, conn, db, []string{"a", "b"}[i%2], "x", i+1)
		}
		// The rate needs a span of a window at least.
		time.Sleep(2*time.Second - time.Since(start))
		sh.Round(ctx)
		after, err := w.InsertQueries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := after.Count - before.Count; d < inserts {
			t.Errorf("InsertQuery rose by %d over %d INSERTs", d, inserts)
		}
		if after.Uptime < before.Uptime {
			t.Errorf("uptime went from %v to %v", before.Uptime, after.Uptime)
		}
		got := sh.Shares()[name]
		span := time.Since(start).Minutes() + 1.0/60 // the rounds bracket the INSERTs
		if got.Reason != budget.ReasonShared || got.Server < inserts/span || got.Own != 0 || got.Others != got.Server {
			t.Errorf("share %+v, want the server at ≥ %.0f/min, all of it others'", got, inserts/span)
		}
	})
}

// TestClusterInsertQueries: on the replicated cluster, a shard's count is
// the INSERTs sent to any of its replicas, and a replica's fetches of the
// other's parts do not count: 20 INSERTs into shard 1's first replica,
// fetched by its second, raise the second's own count by less than 20
// (by none unless another client writes to it meanwhile).
func TestClusterInsertQueries(t *testing.T) {
	c := testenv.Cluster(t)
	if !c.Keeper {
		t.Skip("the cluster has no replication")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := c.NewDatabase(t)
	c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.ev (k UInt64) ENGINE = %s", db, c.Engine(db, "ev", "k")))
	cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], cluster: %s", c.Shards[0][0].Addr, c.Name), "table: "+db+".ev")
	cw, err := writer.OpenCluster(ctx, "w", cfg.ClickHouse, cfg.Routes)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	one := func(addr string) writer.InsertCount {
		t.Helper()
		w, err := writer.Open(ctx, "w", chConfig(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		n, err := w.InsertQueries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	shards0, err := cw.InsertCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second0 := one(c.Shards[0][1].Addr)
	first := c.Shards[0][0].Conn(t)
	const inserts = 20
	for i := 1; i <= inserts; i++ {
		testenv.InsertSeq(t, first, db, "ev", "k", i) // lengths differ: no block is a duplicate
	}
	second := c.Shards[0][1].Conn(t)
	if n := count(t, second, db+".ev", true); n != inserts*(inserts+1)/2 {
		t.Fatalf("shard 1's second replica has %d rows after SYNC REPLICA", n)
	}
	second1 := one(c.Shards[0][1].Addr)
	if d := second1.Count - second0.Count; d >= inserts {
		t.Errorf("the second replica's InsertQuery rose by %d while it fetched %d parts", d, inserts)
	}
	shards1, err := cw.InsertCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s1 := writer.ShardName(1)
	if len(shards1) != len(c.Shards)+1 {
		t.Fatalf("read %d servers, want the cluster's %d shards and clickhouse.addrs: %v", len(shards1), len(c.Shards), shards1)
	}
	if _, ok := shards1[writer.ServerName(cfg.ClickHouse.Addrs)]; !ok {
		t.Errorf("clickhouse.addrs' server not read: %v", shards1)
	}
	if d := shards1[s1].Count - shards0[s1].Count; d < inserts || d >= 2*inserts {
		t.Errorf("shard 1's count rose by %d over %d INSERTs into one replica (fetches counted?)", d, inserts)
	}
	if shards1[s1].Uptime <= 0 {
		t.Errorf("shard 1's uptime %v", shards1[s1].Uptime)
	}
}

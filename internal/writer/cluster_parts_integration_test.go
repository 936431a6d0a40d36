//go:build integration

package writer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestClusterPartsIsTheMostPressedShard: with merges stopped on shard 2 and
// many small blocks written there, the cluster writer's parts observation
// (what batch.mode adaptive reads) is shard 2's, for a target local route
// and for a target distributed route on the Distributed table, while the
// single server the plain Writer reads (a replica of shard 1) sees one part.
func TestClusterPartsIsTheMostPressedShard(t *testing.T) {
	testenv.EachCluster(t, testClusterPartsIsTheMostPressedShard)
}

func testClusterPartsIsTheMostPressedShard(t *testing.T, c testenv.LocalCluster) {
	db := c.NewDatabase(t)
	c.ExecEachNode(t,
		fmt.Sprintf("CREATE TABLE %s.ev (k UInt64) ENGINE = %s", db, c.Engine(db, "ev", "k", "parts_to_delay_insert = 20", "parts_to_throw_insert = 40")),
		fmt.Sprintf("CREATE TABLE %s.ev_all AS %s.ev ENGINE = Distributed(%s, %s, ev, rand())", db, db, c.Name, db))
	for _, n := range c.Shards[1] {
		testenv.Exec(t, n.Conn(t), "SYSTEM STOP MERGES "+db+".ev")
	}
	const blocks = 12
	s2 := c.Shards[1][0].Conn(t)
	for i := 1; i <= blocks; i++ {
		testenv.InsertSeq(t, s2, db, "ev", "k", i) // lengths differ: no block is a duplicate
	}
	testenv.InsertSeq(t, c.Shards[0][0].Conn(t), db, "ev", "k", 3)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, route := range []string{
		fmt.Sprintf("table: %s.ev_all, target: local, sharding: random", db),
		fmt.Sprintf("table: %s.ev_all, target: distributed", db),
	} {
		cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q], cluster: %s", c.Shards[0][0].Addr, c.Name), route)
		cw, err := writer.OpenCluster(ctx, "w", cfg.ClickHouse, cfg.Routes)
		if err != nil {
			t.Fatal(err)
		}
		p, err := cw.Parts(ctx, db, "ev_all")
		cw.Close()
		if err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		if p.Active != blocks || p.DelayAt != 20 || p.ThrowAt != 40 {
			t.Errorf("%s: parts %+v, want shard 2's %d active, delay at 20, throw at 40", route, p, blocks)
		}
	}
	// The plain Writer on shard 1's replica sees only that server's part.
	cfg := clusterConfig(t, fmt.Sprintf("addrs: [%q]", c.Shards[0][0].Addr), "table: "+db+".ev")
	w, err := writer.Open(ctx, "w", cfg.ClickHouse)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if p, err := w.Parts(ctx, db, "ev"); err != nil || p.Active != 1 {
		t.Errorf("single-server parts of shard 1's replica: %+v, %v; want 1 active", p, err)
	}
}

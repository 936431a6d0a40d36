//go:build integration

package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/cluster"
	"sink/internal/decode"
	"sink/internal/testenv"
)

// TestClusterShardedRowsLandWhereTheServerPlacesThem writes, for every type
// a sharding key may have and every sharding hash it takes, rows decoded
// straight into their shards' parts (the blocks a target: local route by
// key builds) through the cluster writer, then asks each shard's own
// server which slot each of its rows belongs to, by the sharding
// expression itself (cityHash64(k) % the total weight, …, as the
// Distributed engine computes it), and requires every row to be on the
// shard that slot belongs to, and every row to be somewhere exactly once.
// On the 26.9 cluster it runs over the weighted cluster too (weights 1 and
// 3). 18.16 has no xxHash64: there the route is refused instead.
func TestClusterShardedRowsLandWhereTheServerPlacesThem(t *testing.T) {
	testenv.EachCluster(t, func(t *testing.T, c testenv.LocalCluster) {
		names := []string{c.Name}
		if c.WeightedName != "" {
			names = append(names, c.WeightedName)
		}
		db := c.NewDatabase(t)
		for ti, kt := range shardKeyTypes {
			table := fmt.Sprintf("k%d", ti)
			c.ExecEachNode(t, fmt.Sprintf("CREATE TABLE %s.%s (i UInt32, h String, k %s, p String) ENGINE = %s", db, table, kt.typ, c.Engine(db, table, "i")))
			t.Run(kt.typ, func(t *testing.T) {
				for _, name := range names {
					for _, fn := range kt.hashes {
						testShardedRowsLand(t, c, name, db, table, kt.typ, fn, kt.key)
					}
				}
			})
		}
	})
}

// testShardedRowsLand writes 1,000 rows keyed by key through a writer on
// cluster name with hash fn, tagged h = name/fn, and checks where each one
// landed.
func testShardedRowsLand(t *testing.T, c testenv.LocalCluster, name, db, table, typ, fn string, key func(int) any) {
	t.Helper()
	const n = 1000
	tag := name + "/" + fn
	yaml := fmt.Sprintf("name: w\nkafka: {topics: [t]}\nroutes: [{topic: t, table: %s.%s, target: local, sharding_key: k, sharding_hash: %s}]\n"+
		"clickhouse: {dial_timeout: 2s, query_timeout: 10s, addrs: [%q], cluster: %s}\n", db, table, fn, c.Shards[0][0].Addr, name)
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cw, err := OpenCluster(ctx, "w", cfg.ClickHouse, cfg.Routes)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	cols, err := cw.Describe(ctx, db, table)
	if err != nil {
		t.Fatal(err)
	}
	keyName, pl := cw.Placer(db, table, cols)
	if pl == nil {
		h, _ := cluster.NewKeyHash(fn, typ)
		if err := cluster.CheckHash(ctx, cw.conn, h, typ); err != nil && strings.Contains(err.Error(), "no such function") {
			t.Logf("%s: %v", tag, err)
			return
		}
		t.Fatalf("%s: no placement for a %s key", tag, typ)
	}
	p, err := decode.Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewShardedBlock(keyName, pl)
	for i := range n {
		b, _ := json.Marshal(map[string]any{"i": i, "h": tag, "k": key(i), "p": fmt.Sprintf("row %d", i)})
		if err := p.Append(blk, &kgo.Record{Value: b}); err != nil {
			t.Fatal(err)
		}
	}
	// The writer sends the block's own parts: no split.
	tt, err := cw.target(ctx, db, table)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := cw.split(ctx, cw.lay.Load(), tt, nil, blk)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := blk.ShardParts()
	for i := range sent {
		if sent[i] != own[i] {
			t.Fatalf("%s: shard %d's part is not the block's own", tag, i+1)
		}
	}
	tab := chtable.NewTable(db, table, cols, blk.Columns())
	if err := cw.Insert(ctx, tab, blk, 1, nil, nil); err != nil {
		t.Fatalf("%s: %v", tag, err)
	}
	checkLanded(t, c, cw.Topology(), db+"."+table, typ, fn, tag, n)
}

// checkLanded asks each shard's first replica which of its rows tagged tag
// the sharding expression places elsewhere, and counts them all.
func checkLanded(t *testing.T, c testenv.LocalCluster, topo *cluster.Topology, table, typ, fn, tag string, n int) {
	t.Helper()
	expr := "toUInt64(" + fn + "(k))"
	if fn == cluster.HashIdentity {
		// The engine reads a signed key as the unsigned integer of its width.
		width := map[string]int{"Int8": 8, "UInt8": 8, "Int16": 16, "UInt16": 16, "Date": 16, "Int32": 32, "UInt32": 32, "DateTime": 32}[typ]
		expr = "toUInt64(k)"
		if width > 0 {
			expr = fmt.Sprintf("toUInt64(toUInt%d(k))", width)
		}
	}
	slots := topo.Slots()
	total := 0
	for si, shard := range c.Shards {
		var mine []string
		for slot, s := range slots {
			if s == si {
				mine = append(mine, fmt.Sprint(slot))
			}
		}
		conn := shard[0].Conn(t)
		c.SyncReplica(t, conn, table)
		q := fmt.Sprintf("SELECT count(), countIf(%s %% %d NOT IN (%s)) FROM %s WHERE h = %s",
			expr, len(slots), strings.Join(mine, ", "), table, chschema.QuoteString(tag))
		var rows, misplaced uint64
		if err := conn.QueryRow(context.Background(), q).Scan(&rows, &misplaced); err != nil {
			t.Fatalf("%s: %s: %v", tag, q, err)
		}
		if misplaced > 0 {
			t.Errorf("%s: shard %d holds %d of its %d rows that %s %% %d places on another shard", tag, si+1, misplaced, rows, expr, len(slots))
		}
		if rows == 0 && typ != "LowCardinality(String)" {
			t.Errorf("%s: shard %d holds none of the %d rows", tag, si+1, n)
		}
		total += int(rows)
	}
	if total != n {
		t.Errorf("%s: %d rows on the shards, want %d", tag, total, n)
	}
}

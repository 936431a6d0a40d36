package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/cluster"
	"sink/internal/decode"
)

// shardKeyTypes are the types a sharding key may have, with the hashes
// each takes, and the JSON value of row i's key (nil: the field is left
// out, so the row holds the type's zero value).
var shardKeyTypes = []struct {
	typ    string
	hashes []string
	key    func(i int) any
}{
	{"Int8", intHashes, func(i int) any { return i%256 - 128 }},
	{"Int16", intHashes, func(i int) any { return i*131%65536 - 32768 }},
	{"Int32", intHashes, func(i int) any { return i*104_729 - 30_000_000 }},
	{"Int64", intHashes, func(i int) any { return int64(i)*7_919_000_001 - 1<<40 }},
	{"UInt8", intHashes, func(i int) any { return i % 256 }},
	{"UInt16", intHashes, func(i int) any { return i * 97 % 65536 }},
	{"UInt32", intHashes, func(i int) any { return uint32(i) * 2_654_435_761 }},
	{"UInt64", intHashes, func(i int) any { return uint64(i) * 11_400_714_819_323_198_485 }},
	{"String", strHashes, func(i int) any { return fmt.Sprintf("user-%d-%s", i, strings.Repeat("k", i%40)) }},
	{"FixedString(8)", strHashes, func(i int) any { return fmt.Sprintf("u%d", i)[:min(8, len(fmt.Sprint(i))+1)] }},
	{"LowCardinality(String)", strHashes, func(i int) any { return fmt.Sprintf("region-%d", i%13) }},
	{"Date", intHashes, func(i int) any { return fmt.Sprintf("2026-%02d-%02d", 1+i%12, 1+i%28) }},
	{"DateTime", intHashes, func(i int) any { return 1_780_000_000 + i*3_607 }},
}

var (
	intHashes = []string{cluster.HashCity, cluster.HashXX, cluster.HashMurmur, cluster.HashInt, cluster.HashIdentity}
	strHashes = []string{cluster.HashCity, cluster.HashXX, cluster.HashMurmur}
)

// shardTopology is three shards of weights 1, 2 and 1.
func shardTopology() *cluster.Topology {
	return &cluster.Topology{Name: "t", Shards: []cluster.Shard{
		{Num: 1, Weight: 1, Replicas: []cluster.Replica{{Addr: "a:1", Num: 1}}},
		{Num: 2, Weight: 2, Replicas: []cluster.Replica{{Addr: "b:1", Num: 1}}},
		{Num: 3, Weight: 1, Replicas: []cluster.Replica{{Addr: "c:1", Num: 1}}},
	}}
}

// TestShardedBlockEqualsSplit decodes the same records, for every key type
// and hash, into a plain block and into a block that places each row on
// its shard as it is appended, and checks that the cluster writer sends
// the sharded block's own parts, and that each holds exactly the rows, in
// order and value for value in every column, that splitting the plain
// block by the same placement gives. Every fifth record's key is missing
// (the zero key); a record taken back with Unappend, one whose key does
// not convert and one whose other column does not leave no trace.
func TestShardedBlockEqualsSplit(t *testing.T) {
	const n = 300
	for _, kt := range shardKeyTypes {
		for _, fn := range kt.hashes {
			t.Run(kt.typ+"_"+fn, func(t *testing.T) {
				testShardedBlockEqualsSplit(t, kt.typ, fn, kt.key, n)
			})
		}
	}
}

func testShardedBlockEqualsSplit(t *testing.T, typ, fn string, key func(int) any, n int) {
	types := []string{"UInt32", typ, "String", "Nullable(Int64)", "Array(String)", "Decimal(18, 4)", "DateTime64(3, 'UTC')"}
	cols := make([]chschema.ColumnSchema, len(types))
	for i, ty := range types {
		cols[i] = chschema.ColumnSchema{Name: fmt.Sprintf("c%d", i), Type: ty}
	}
	cols[1].Name = "k"
	p, err := decode.Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := cluster.NewKeyHash(fn, typ)
	if err != nil {
		t.Fatal(err)
	}
	topo := shardTopology()
	pl, err := cluster.NewPlacement(topo, h)
	if err != nil {
		t.Fatal(err)
	}
	plain, sharded := p.NewBlock(), p.NewShardedBlock("k", pl)
	if !sharded.Sharded() {
		t.Fatalf("a %s key with %s: the block is not sharded", typ, fn)
	}
	for i := range n {
		rec := map[string]any{"c0": i, "c2": fmt.Sprintf("s%d", i), "c4": []string{"a", fmt.Sprint(i)}, "c5": float64(i) + 0.25, "c6": 1_780_000_000_000 + i}
		if i%5 != 0 {
			rec["k"] = key(i)
		}
		if i%3 != 0 {
			rec["c3"] = i * 1000
		}
		b, _ := json.Marshal(rec)
		for _, blk := range []*decode.Block{plain, sharded} {
			if err := p.Append(blk, &kgo.Record{Value: b}); err != nil {
				t.Fatalf("row %d %s: %v", i, b, err)
			}
		}
		// A record taken back, and one whose key does not convert.
		if i%50 == 7 {
			if err := p.Append(sharded, &kgo.Record{Value: b}); err != nil {
				t.Fatal(err)
			}
			p.Unappend(sharded)
			// The key places the row, then a later column fails: its part
			// is rolled back.
			bad, _ := json.Marshal(map[string]any{"c0": 1, "k": key(i), "c3": "not a number"})
			if err := p.Append(sharded, &kgo.Record{Value: bad}); err == nil {
				t.Fatalf("%s appended", bad)
			}
			if !strings.Contains(typ, "String") {
				if err := p.Append(sharded, &kgo.Record{Value: []byte(`{"c0": 1, "k": {"not": "a key"}}`)}); err == nil {
					t.Fatalf("a key of an object appended to %s", typ)
				}
			}
		}
	}
	if sharded.Rows() != n || plain.Rows() != n {
		t.Fatalf("rows: sharded %d, plain %d, want %d", sharded.Rows(), plain.Rows(), n)
	}
	if sharded.Bytes() != plain.Bytes() {
		t.Errorf("bytes: sharded %d, plain %d", sharded.Bytes(), plain.Bytes())
	}
	c := &Cluster{}
	lay := &layout{topo: topo}
	tt := &tableTarget{target: config.TargetLocal, key: "k", hash: fn, hashes: map[string]*cluster.KeyHash{typ: h}}
	got, err := c.split(context.Background(), lay, tt, nil, sharded)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := sharded.ShardParts()
	want, err := c.split(context.Background(), lay, tt, nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	spread := 0
	for s := range want {
		if got[s] != own[s] {
			t.Errorf("shard %d: the writer did not send the block's own part", s+1)
		}
		if (got[s] == nil) != (want[s] == nil) {
			t.Fatalf("shard %d: part %v, the split's %v", s+1, got[s], want[s])
		}
		if got[s] == nil {
			continue
		}
		spread++
		if got[s].Rows() != want[s].Rows() {
			t.Fatalf("shard %d: %d rows, the split's %d", s+1, got[s].Rows(), want[s].Rows())
		}
		for ci := range cols {
			if g, w := got[s].ColumnData(ci), want[s].ColumnData(ci); !reflect.DeepEqual(g, w) {
				t.Errorf("shard %d column %s: %.200v, the split's %.200v", s+1, cols[ci].Type, g, w)
			}
		}
	}
	if spread < 2 && !strings.HasPrefix(typ, "LowCardinality") {
		t.Errorf("the rows went to %d shard(s) of 3", spread)
	}
	// Seen whole, a sharded block is its parts one after the other.
	var whole []uint32
	for _, part := range own {
		if part != nil {
			whole = append(whole, part.ColumnData(0).([]uint32)...)
		}
	}
	if !reflect.DeepEqual(sharded.ColumnData(0), whole) {
		t.Errorf("the sharded block's column is not its parts' one after the other")
	}
}

// TestShardedBlockStalePlacementIsSplit: a block placed by a placement the
// topology no longer gives (a shard added since) is split again by the
// current one, not sent by its parts.
func TestShardedBlockStalePlacementIsSplit(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "k", Type: "UInt64"}, {Name: "s", Type: "String"}}
	p, err := decode.Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := cluster.NewKeyHash(cluster.HashCity, "UInt64")
	old := shardTopology()
	old.Shards = old.Shards[:2]
	pl, _ := cluster.NewPlacement(old, h)
	blk := p.NewShardedBlock("k", pl)
	for i := range 100 {
		if err := p.Append(blk, &kgo.Record{Value: fmt.Appendf(nil, `{"k": %d, "s": "v%d"}`, i, i)}); err != nil {
			t.Fatal(err)
		}
	}
	now := shardTopology()
	cur, _ := cluster.NewPlacement(now, h)
	tt := &tableTarget{target: config.TargetLocal, key: "k", hash: cluster.HashCity, hashes: map[string]*cluster.KeyHash{"UInt64": h}}
	parts, err := (&Cluster{}).split(context.Background(), &layout{topo: now}, tt, nil, blk)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for s, part := range parts {
		if part == nil {
			continue
		}
		total += part.Rows()
		for _, k := range part.ColumnData(0).([]uint64) {
			if got := cur.PlaceBits(k); got != s {
				t.Errorf("key %d sent to shard index %d, the current placement says %d", k, s, got)
			}
		}
	}
	if len(parts) != 3 || total != 100 {
		t.Errorf("%d parts holding %d rows, want 3 holding 100", len(parts), total)
	}
}

// TestPlacerAnswersWithoutWaiting: Placer names the key and one placement
// for every block while the topology stays, a new one when it changes,
// none before the key's hash is checked or for a table not placed by a
// key, and none (rather than waiting) while another goroutine holds the
// locks it needs.
func TestPlacerAnswersWithoutWaiting(t *testing.T) {
	h, _ := cluster.NewKeyHash(cluster.HashCity, "UInt64")
	cols := []chschema.ColumnSchema{{Name: "i", Type: "UInt32"}, {Name: "k", Type: "UInt64"}}
	tt := &tableTarget{target: config.TargetLocal, key: "k", hash: cluster.HashCity, hashes: map[string]*cluster.KeyHash{}}
	c := &Cluster{targets: map[string]*tableTarget{
		"db.t":   tt,
		"db.r":   {target: config.TargetLocal, random: true, hashes: map[string]*cluster.KeyHash{}},
		"db.raw": nil,
	}}
	c.lay.Store(&layout{topo: shardTopology()})
	if _, p := c.Placer("db", "t", cols); p != nil {
		t.Error("a placement before the hash was checked")
	}
	tt.hashes["UInt64"] = h
	key, p1 := c.Placer("db", "t", cols)
	if key != "k" || p1 == nil || p1.ShardCount() != 3 {
		t.Fatalf("Placer = %q, %v; want k and a placement over 3 shards", key, p1)
	}
	if _, p2 := c.Placer("db", "t", cols); p2 != p1 {
		t.Error("a second block got another placement on the same topology")
	}
	c.lay.Store(&layout{topo: shardTopology()})
	if _, p3 := c.Placer("db", "t", cols); p3 == p1 || p3 == nil {
		t.Error("the same placement after the topology was read again")
	}
	for _, table := range []string{"r", "raw", "missing"} {
		if _, p := c.Placer("db", table, cols); p != nil {
			t.Errorf("table %s: a placement", table)
		}
	}
	if _, p := c.Placer("db", "t", cols[:1]); p != nil {
		t.Error("a placement for blocks without the key column")
	}
	c.mu.Lock()
	if _, p := c.Placer("db", "t", cols); p != nil {
		t.Error("a placement while the cluster's lock is held")
	}
	c.mu.Unlock()
	tt.mu.Lock()
	if _, p := c.Placer("db", "t", cols); p != nil {
		t.Error("a placement while the table's lock is held")
	}
	tt.mu.Unlock()
}

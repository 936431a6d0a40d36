package writer

import (
	"context"
	"testing"

	chproto "github.com/ClickHouse/ch-go/proto"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/cluster"
	"sink/internal/decode"
)

// BenchmarkBatchByKey is the client's work for one batch of 50,000 bench
// events on 2 shards, from the records to the encoded INSERT blocks:
// decode, place, fill the driver's columns and encode each part.
//
//   - whole: the batch decoded into one block and sent whole (sharding:
//     random), the bound the others are measured against;
//   - split: decoded into one block, then split by cityHash64(user_id)
//     into one part per shard (a batch decoded before the placement was
//     known, or placed by a topology that changed since);
//   - sharded: each row decoded straight into its shard's part
//     (decode.Plan.NewShardedBlock), the parts sent as they are.
//
// ns/row is wall time, cpu-ns/row the process's CPU (garbage collection
// included).
//
//	go test ./internal/writer -run '^$' -bench BatchByKey -benchmem
func BenchmarkBatchByKey(b *testing.B) {
	const n = 50_000
	p, _, recs := benchBlock(b, benchTable, n)
	h, err := cluster.NewKeyHash(cluster.HashCity, "UInt64")
	if err != nil {
		b.Fatal(err)
	}
	topo := shardTopology()
	topo.Shards = topo.Shards[:2]
	topo.Shards[1].Weight = 1
	pl, err := cluster.NewPlacement(topo, h)
	if err != nil {
		b.Fatal(err)
	}
	c := &Cluster{}
	lay := &layout{topo: topo}
	tt := &tableTarget{target: config.TargetLocal, key: "user_id", hash: cluster.HashCity, hashes: map[string]*cluster.KeyHash{"UInt64": h}}
	for _, v := range []struct {
		name  string
		block *decode.Block
		parts func(blk *decode.Block) []chschema.Block
	}{
		{"whole", p.NewBlock(), func(blk *decode.Block) []chschema.Block { return []chschema.Block{blk} }},
		{"split", p.NewBlock(), func(blk *decode.Block) []chschema.Block {
			parts, err := c.split(context.Background(), lay, tt, nil, blk)
			if err != nil {
				b.Fatal(err)
			}
			return parts
		}},
		{"sharded", p.NewShardedBlock("user_id", pl), func(blk *decode.Block) []chschema.Block {
			parts, err := c.split(context.Background(), lay, tt, nil, blk)
			if err != nil {
				b.Fatal(err)
			}
			return parts
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var buf chproto.Buffer
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			for i := 0; i < b.N; i++ {
				v.block.Reset()
				for _, r := range recs {
					if err := p.Append(v.block, r); err != nil {
						b.Fatal(err)
					}
				}
				rows := 0
				for _, part := range v.parts(v.block) {
					if part == nil {
						continue
					}
					rows += part.Rows()
					cols := driverColumns(b, benchTable)
					if err := fill(cols, part); err != nil {
						b.Fatal(err)
					}
					buf.Reset()
					encodeBlock(b, &buf, cols)
				}
				if rows != n {
					b.Fatalf("%d rows sent, want %d", rows, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N*n), "cpu-ns/row")
		})
	}
}

package writer

import (
	"syscall"
	"testing"
	"time"

	"sink/internal/chschema"
)

// BenchmarkSplitByKey measures what target: local with a sharding_key adds
// on the client per batch: listing each shard's rows and gathering every
// column of the block into one part per shard. The block is 100,000 events
// of the bench's generator on the bench's table (and the wide one), placed
// on 2 shards by user_id (the placement's hash itself is not included).
// cpu-ns/op is the process's CPU time per split, garbage collection
// included.
//
//	go test ./internal/writer -run '^$' -bench SplitByKey -benchmem
func BenchmarkSplitByKey(b *testing.B) {
	for _, tc := range []struct {
		name   string
		schema []chschema.ColumnSchema
	}{{"bench", benchTable}, {"wide", benchWideTable}} {
		b.Run(tc.name, func(b *testing.B) {
			const n, shards = 100_000, 2
			_, blk, _ := benchBlock(b, tc.schema, n)
			users := blk.ColumnData(1).([]uint64)
			shardOf := make([]int, n)
			for i, u := range users {
				shardOf[i] = int(u*0x9E3779B97F4A7C15>>32) % shards
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			for i := 0; i < b.N; i++ {
				parts, err := splitByShard(blk, shardOf, make([]chschema.Block, shards))
				if err != nil {
					b.Fatal(err)
				}
				if parts[0] == nil || parts[1] == nil || parts[0].Rows()+parts[1].Rows() != n {
					b.Fatal("split lost rows")
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time (user and system, every thread: the garbage
// collector's work included) the process has used so far. On a shared
// machine it moves less than wall time with the neighbours' load.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

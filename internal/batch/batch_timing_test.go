package batch

import (
	"fmt"
	"testing"

	"sink/internal/offsets"
)

// BenchmarkAdd is the per-record cost of the accumulator on the hot path:
// one Add per record as the pipeline calls it, records arriving in runs of
// run from one partition (a fetch hands over each partition's records
// together), sealing every 100,000 rows into a reused container. One op is
// one 180-byte record, so MB/s compares with decode's BenchmarkAppend.
//
//	go test ./internal/batch/ -run '^$' -bench Add -benchmem
func BenchmarkAdd(b *testing.B) {
	const recordBytes = 180
	f := func(partitions, run int) {
		b.Run(fmt.Sprintf("partitions=%d/run=%d", partitions, run), func(b *testing.B) {
			tps := make([]offsets.TP, partitions)
			for i := range tps {
				tps[i] = offsets.TP{Topic: "events", Partition: int32(i)}
			}
			next := make([]int64, partitions)
			d, spare := &rows{}, &rows{}
			a := NewAccumulator(Policy{MaxRows: 100_000, MaxBytes: 32 << 20}, d)
			var id uint64
			b.SetBytes(recordBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := (i / run) % partitions
				d.n++
				d.bytes += recordBytes
				full, why := a.Add(t0, tps[p], next[p], 1)
				next[p]++
				if full {
					id++
					sealed := a.Seal(t0, id, why, spare)
					// the insert is done: the container comes back empty
					spare, d = sealed.Data, spare
					*spare = rows{}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
	f(1, 1)     // one partition
	f(8, 500)   // the default benchmark workload: 8 partitions, fetched in runs
	f(12, 1)    // worst case: every record from another partition
	f(1000, 10) // many partitions (regex over many topics)
}

package offsets

import (
	"fmt"
	"testing"
)

// BenchmarkTrack is the per-record cost of offsets tracking as the pipeline
// uses it: Add for every record (runs of run records per partition, one
// unit per 100,000-record batch), then, per batch, Ack of the unit in every
// partition it touched and a Committable. One op is one 180-byte record.
//
//	go test ./internal/offsets/ -run '^$' -bench Track -benchmem
func BenchmarkTrack(b *testing.B) {
	const recordBytes, batchRows = 180, 100_000
	f := func(partitions, run, inFlight int) {
		b.Run(fmt.Sprintf("partitions=%d/run=%d/in_flight=%d", partitions, run, inFlight), func(b *testing.B) {
			tps := make([]TP, partitions)
			for i := range tps {
				tps[i] = TP{Topic: "events", Partition: int32(i)}
			}
			next := make([]int64, partitions)
			tr := New()
			unit, acked := uint64(1), uint64(0)
			inBatch := 0
			b.SetBytes(recordBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := (i / run) % partitions
				tr.Add(tps[p], next[p], 3, unit)
				next[p]++
				if inBatch++; inBatch == batchRows {
					inBatch = 0
					unit++
					// inserts finish in order, inFlight batches behind
					for acked+uint64(inFlight) < unit-1 {
						acked++
						tr.Ack(acked, tps)
						_ = tr.Committable()
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
	f(1, 1, 0)
	f(8, 500, 2) // the default workload with max_in_flight 2
	f(12, 1, 2)  // every record from another partition
	f(1000, 10, 2)
}

package consumer

import "sink/config"

// FetchLimits are the consume-side bounds given to franz-go.
type FetchLimits struct {
	MaxBytes       int64 // kgo.FetchMaxBytes: per fetch response
	PartitionBytes int64 // kgo.FetchMaxPartitionBytes: per partition in a response
	Concurrent     int   // kgo.MaxConcurrentFetches: fetches in flight or buffered, unpolled
}

const (
	// FetchShare is the part of batch.buffer_memory that franz-go's fetch
	// buffers may use on top of the batches: buffer_memory / FetchShare.
	FetchShare = 4
	// fetchCost is what one fetch of fetch_max_bytes holds in the Go heap
	// until its last record is polled and decoded: the response as read,
	// the decompressed record batches, and one kgo.Record per record
	// (which, for records of ~200 bytes, is as big as the data). Measured
	// with `bench inprocess` (heap ≈ 2.4 × fetch_max_bytes per fetch).
	fetchCost = 5 // halves: 2.5 ×
	// concurrentFetches lets one fetch be read from the network while the
	// previous one is decoded, on any number of brokers.
	concurrentFetches = 2
)

// FetchLimitsFor derives franz-go's fetch limits from the config: franz-go
// cannot bound the bytes it buffers for consuming (decompression happens
// after the fact), so the sink bounds the fetches instead. At most
// concurrentFetches fetches are in flight or waiting to be polled, each at
// most kafka.fetch_max_bytes and small enough that all of them fit in
// buffer_memory / FetchShare (64 MiB for the default 256 MiB):
// fetch_max_bytes is lowered to buffer_memory / (FetchShare × 2.5 ×
// concurrentFetches), 12.8 MiB at the default, and
// max_partition_fetch_bytes to at most that. The derived cap never goes
// below 1 MiB, Kafka's default record batch limit; a smaller configured
// value stays as it is.
func FetchLimitsFor(cfg *config.Config) FetchLimits {
	k := cfg.Kafka
	fetch := int64(k.FetchMaxBytes)
	budget := int64(cfg.Batch.BufferMemory) * 2 / (FetchShare * fetchCost * concurrentFetches)
	fetch = min(fetch, max(budget, 1<<20))
	return FetchLimits{MaxBytes: fetch, PartitionBytes: min(int64(k.MaxPartitionFetchBytes), fetch), Concurrent: concurrentFetches}
}

// MemoryLimit is a soft limit for the Go heap derived from the buffer
// budget, for runtime/debug.SetMemoryLimit when the operator set no
// GOMEMLIMIT: buffer_memory for the batches, the fetch buffers' share
// (buffer_memory / FetchShare, see FetchLimitsFor), as much again for block
// capacity beyond the bytes the budget counts, and 64 MiB for the runtime,
// clients and metrics: 1.5 × buffer_memory + 64 MiB (448 MiB for the
// default 256 MiB). That is above the most the live heap holds when the
// budget is full, so the limit makes the collector run earlier than GOGC
// alone would, never without end.
func MemoryLimit(cfg *config.Config) int64 {
	b := int64(cfg.Batch.BufferMemory)
	return b + 2*b/FetchShare + 64<<20
}

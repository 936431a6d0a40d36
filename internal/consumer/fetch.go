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
	// until its last record is decoded: the decompressed record batches
	// and one kgo.Record (≈170 bytes) per record. Measured on the bench's
	// workload (180-byte JSON records, snappy-compressed about 2:1 by the
	// producer): a 12.8 MB fetch held 142,650 records, 25.7 MB of values
	// plus ≈24 MB of kgo.Record, about 4 × the fetch. Both come from the
	// consumer's pool (pool.go), whose slices are up to 12.5% larger than
	// a batch needs (6% on average: ≈4.2 × the fetch, a few MiB over the
	// fetch share at the default budget, inside MemoryLimit's 64 MiB for
	// the runtime and clients).
	fetchCost = 4
	// concurrentFetches is the fetches held at once: the pipeline decodes
	// one while franz-go reads and parses the next (it polls a fetch
	// whole, so the broker gets the next request at once), on any number
	// of brokers.
	concurrentFetches = 2
	// maxFetch is Kafka's own fetch.max.bytes default: a fetch larger
	// than that buys nothing even when buffer_memory has room for it.
	maxFetch = 50 << 20
	// maxPartitionFetch is 8× Kafka's max.partition.fetch.bytes default,
	// so one busy partition can fill a good part of a batch in one fetch.
	maxPartitionFetch = 8 << 20
)

// FetchLimitsFor derives franz-go's fetch limits from the config: franz-go
// cannot bound the bytes it buffers for consuming (decompression happens
// after the fact), so the sink bounds the fetches instead. At most
// concurrentFetches fetches are held (one decoded, one read), each small
// enough that all of them fit in buffer_memory / FetchShare (64 MiB for the
// default 256 MiB): a fetch is buffer_memory / (FetchShare × fetchCost ×
// concurrentFetches), 8 MiB at the default, never below 1 MiB (Kafka's
// default record batch limit) nor above maxFetch; a partition's share of it
// is at most maxPartitionFetch. The deprecated kafka.fetch_max_bytes and
// max_partition_fetch_bytes, when set, lower these sizes, never raise them.
//
// Smaller fetches cost little now that fetching overlaps decoding: on the
// 2-core bench machine, 4, 8 and 12.8 MiB fetches moved 1,000,000 records
// within the run-to-run noise of each other, while 12.8 MiB fetches (two
// held) raised the peak RSS from ≈270 to ≈340–380 MiB.
func FetchLimitsFor(cfg *config.Config) FetchLimits {
	k := cfg.Kafka
	budget := int64(cfg.Batch.BufferMemory) / (FetchShare * fetchCost * concurrentFetches)
	fetch := min(max(budget, 1<<20), maxFetch)
	if k.FetchMaxBytes > 0 {
		fetch = min(fetch, int64(k.FetchMaxBytes))
	}
	part := min(fetch, maxPartitionFetch)
	if k.MaxPartitionFetchBytes > 0 {
		part = min(part, int64(k.MaxPartitionFetchBytes))
	}
	return FetchLimits{MaxBytes: fetch, PartitionBytes: part, Concurrent: concurrentFetches}
}

// MemoryLimit is a soft limit for the Go heap derived from the buffer
// budget, for runtime/debug.SetMemoryLimit when the operator set no
// GOMEMLIMIT: the smaller of two bounds.
//
//   - What the heap holds at most with the budget full: buffer_memory for
//     the batches, the fetch buffers' share (buffer_memory / FetchShare,
//     see FetchLimitsFor), as much again for block capacity beyond the
//     bytes the budget counts, and 64 MiB for the runtime, clients and
//     metrics: 1.5 × buffer_memory + 64 MiB. A limit there brings
//     collections forward but never makes the collector run without end.
//   - The RSS the sink promises, buffer_memory + RSSHeadroom, less what the
//     process holds outside the Go runtime's accounting (its mapped code
//     and data: the peak RSS sat 9–15 MiB above the limit in the bench's
//     backlog runs) and a margin: buffer_memory + RSSHeadroom - 24 MiB.
//     Without it, GOGC alone let the heap grow to twice what is live, which
//     took a 3,000,000-record backlog to 414–437 MiB at the default budget.
//
// The second is the smaller from buffer_memory 80 MiB up: 360 MiB for the
// default 256 MiB (and the first, 160 MiB, for 64 MiB). With the budget full (ClickHouse
// unreachable while a backlog waits) the live heap can then pass the
// limit: the collector runs more often while little is allocated (a
// 30-second stall with the default budget cost 0.26 CPU-s more), and the
// RSS stays above it.
func MemoryLimit(cfg *config.Config) int64 {
	b := int64(cfg.Batch.BufferMemory)
	return min(b+2*b/FetchShare+64<<20, b+RSSHeadroom-24<<20)
}

// RSSHeadroom is how far above batch.buffer_memory the sink's resident
// memory stays (docs/guarantees.md): the bound the chaos scenarios and the
// bench's backlog target check.
const RSSHeadroom = 128 << 20

// SpareLimit is the most capacity of String column buffers kept between
// batches for the next ones to fill (column.SetSpareLimit): buffer_memory /
// 8, 32 MiB for the default 256 MiB. Like the capacity of a block on the
// pipeline's free list, it is block memory the budget does not count, and
// it lives inside MemoryLimit's share for that.
func SpareLimit(cfg *config.Config) int { return int(cfg.Batch.BufferMemory / 8) }

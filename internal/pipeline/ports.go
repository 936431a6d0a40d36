package pipeline

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/offsets"
	"sink/internal/pipeline/dispatch"
	"sink/internal/tables"
)

// The pipeline talks to Kafka and ClickHouse only through the ports
// below (and those its parts declare: internal/tables, internal/cdc), so
// its state machine can be driven by fakes in unit tests, and it imports
// none of the adapters: consumer.Consumer is the production Source,
// writer.Writer and writer.Cluster the production Sinks (and
// consumer.Sampler the production tables.Sampler, eosio.IO the production
// delivery.IO), all wired in by cmd/sink (ports_test.go asserts
// each at compile time, with the optional capabilities each has;
// TestUnitImportsNoAdapter checks the imports). The ports speak
// internal/chtable's vocabulary, which the writer shares.

// Source is the Kafka side: the consumer group member the records come
// from, where their offsets are committed and where bad records go.
//
// Poll is called from the pipeline's poller goroutine, one call at a time;
// AllowRebalance and Commit from the owner goroutine; ProduceDLQ from the
// owner goroutine or a retry timer, and its done callback may run on any
// goroutine.
type Source interface {
	// Poll returns every buffered record, blocking until there are some
	// or ctx ends. Rebalances wait until AllowRebalance.
	Poll(ctx context.Context) kgo.Fetches
	// AllowRebalance lets a rebalance that waited for the last poll go on.
	AllowRebalance()
	// Commit commits the positions synchronously. meta, when not nil,
	// is the commit metadata to store with each partition's offset (the
	// exactly-once ledger); a partition missing from meta gets none.
	Commit(ctx context.Context, pos map[offsets.TP]offsets.Commit, meta map[offsets.TP]string) error
	// ProduceDLQ sends a copy of rec, with why it could not be written,
	// to the dead-letter topic (without its value when refOnly); done is
	// called once with nil when Kafka has it, or with the error
	// (kafkaerr.Classify sorts it).
	ProduceDLQ(ctx context.Context, topic string, rec *kgo.Record, cause error, refOnly bool, done func(error))
}

// Sink is the ClickHouse side: where the tables are described (the
// catalog's Describer: at start, for a table named after a new topic, and
// on describe goroutines) and the sealed batches inserted (dispatch's
// Inserter: one goroutine per batch in flight, concurrently).
type Sink interface {
	tables.Describer
	dispatch.Inserter
}

// The capabilities below are optional: the pipeline asks its Source or
// Sink for one with a type assertion where it needs it, and does without
// (or refuses the config that needs it, with one line) when the adapter
// lacks it. The fakes of the unit tests have only the ones a test needs.

// pauseSource is a Source whose fetching can be paused without leaving
// the group (consumer.Consumer: franz-go's PauseFetchTopics). Both are
// called from the owner goroutine. Without it, a pause stops asking for
// polls instead.
type pauseSource interface {
	PauseFetch(topics []string)
	ResumeFetch()
}

// seekSource is a Source that can fetch partitions again from an earlier
// offset (consumer.Consumer.Seek): exactly-once delivery uses it to consume
// again the records of a batch it dropped because one of its partitions was
// given up before the batch was recorded. Seek is called from the owner
// goroutine while a group callback waits for it.
type seekSource interface {
	Seek(pos map[offsets.TP]int64)
}

// positionsSource is a Source that can ask the brokers for the group's
// committed offsets and the partitions' log end offsets
// (consumer.Consumer.Positions), called on its own goroutine. Without it,
// /status knows a partition's numbers only from its fetches and commits.
type positionsSource interface {
	Positions(ctx context.Context, topics []string) (committed, ends map[offsets.TP]int64, err error)
}

// protocolSource is a Source that knows the group protocol the broker
// runs this member under (consumer.Consumer.GroupProtocol: classic or
// consumer); /status shows it. Called from the owner goroutine.
type protocolSource interface {
	GroupProtocol() string
}

package pipeline

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/offsets"
	"sink/internal/writer"
)

// The pipeline talks to Kafka and ClickHouse only through the two ports
// below, so its state machine can be driven by fakes in unit tests.
// consumer.Consumer is the production Source and writer.Writer the
// production Sink (ports_test.go asserts both at compile time).

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
	// (consumer.ClassifyDLQ sorts it).
	ProduceDLQ(ctx context.Context, topic string, rec *kgo.Record, cause error, refOnly bool, done func(error))
}

// Sink is the ClickHouse side: where the tables are described and the
// sealed batches inserted. Describe is called from the owner goroutine
// (at start, and for a table named after a new topic) and from describe
// goroutines; Insert from one goroutine per batch in flight, concurrently.
type Sink interface {
	// Describe returns the columns of db.table (writer.ErrNoTable when it
	// does not exist).
	Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error)
	// Insert writes block into t as one INSERT and retries the same block
	// until it succeeds or fails for good, calling onRetry before each
	// wait and refresh on schema errors (see writer.Writer.Insert). It
	// returns nil, the permanent error, or ctx's error once ctx ends.
	// Per-insert settings (the exactly-once deduplication token) come in
	// ctx (writer.WithInsertSettings).
	Insert(ctx context.Context, t *writer.Table, block chschema.Block, batchID uint64,
		onRetry func(writer.Attempt), refresh writer.Refresh) error
}

// Exactly-once delivery needs more than the ports: it reads the group's
// committed ledgers through the Kafka client and asks the server and the
// table what they hold. Only the production Source and Sink offer these;
// New and Attach refuse others when delivery is exactly_once.
type (
	clientSource interface{ Client() *kgo.Client }
	connSink     interface{ Conn() driver.Conn }
)

// seekSource is a Source that can fetch partitions again from an earlier
// offset (consumer.Consumer.Seek): exactly-once delivery uses it to consume
// again the records of a batch it dropped because one of its partitions was
// given up before the batch was recorded. Seek is called from the owner
// goroutine while a group callback waits for it.
type seekSource interface {
	Seek(pos map[offsets.TP]int64)
}

// A Source that can also pause its fetching without leaving the group is
// a pauseSource (admin.go); POST /pause uses it.

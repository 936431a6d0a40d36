package pipeline

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/adapt"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/eos"
	"sink/internal/offsets"
)

// The pipeline talks to Kafka and ClickHouse only through the ports
// below, so its state machine can be driven by fakes in unit tests, and
// it imports none of the adapters: consumer.Consumer is the production
// Source, writer.Writer and writer.Cluster the production Sinks, eosio.IO
// the production ExactlyOnce and consumer.Sampler the production Sampler,
// all wired in by cmd/sink (ports_test.go asserts each at compile time,
// with the optional capabilities each has; TestUnitImportsNoAdapter
// checks the imports). The ports speak internal/chtable's vocabulary,
// which the writer shares.

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

// Sink is the ClickHouse side: where the tables are described and the
// sealed batches inserted. Describe is called from the owner goroutine
// (at start, and for a table named after a new topic) and from describe
// goroutines; Insert from one goroutine per batch in flight, concurrently.
type Sink interface {
	// Describe returns the columns of db.table (chtable.ErrNoTable when it
	// does not exist).
	Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error)
	// Insert writes block into t as one INSERT and retries the same block
	// until it succeeds or fails for good, calling onRetry before each
	// wait and refresh on schema errors (see writer.Writer.Insert). It
	// returns nil, the permanent error, or ctx's error once ctx ends.
	// Per-insert settings (the exactly-once deduplication token) come in
	// ctx (chtable.WithInsertSettings).
	Insert(ctx context.Context, t *chtable.Table, block chschema.Block, batchID uint64,
		onRetry func(chtable.Attempt), refresh chtable.Refresh) error
}

// ExactlyOnce is the I/O of delivery: exactly_once beyond Source and Sink
// (eos.IO is the production one; WithExactlyOnce gives it). The intent
// commits go through Source.Commit with their metadata and the replays
// through Sink.Insert with their token; what is left is reading back what
// earlier runs left behind. Every method is called from the owner
// goroutine: at start (Windows) and when partitions are assigned
// (recovery: Snapshot, TopicState, ReadRanges, Present).
type ExactlyOnce interface {
	// Snapshot returns every committed offset of the group with its
	// metadata (the ledgers), the partitions of other members included.
	Snapshot(ctx context.Context) (eos.Snapshot, error)
	// TopicState returns the topic ID of each topic of tps (absent when
	// the broker gives none) and each partition's log end offset. Its
	// error says whether it may pass (kafkaerr.Classify).
	TopicState(ctx context.Context, tps []offsets.TP) (ids map[string]string, ends map[offsets.TP]int64, err error)
	// ReadRanges reads back the committed records of ranges, per
	// partition in offset order (offsets compacted away or aborted are
	// absent); an error when a range's end cannot be reached.
	ReadRanges(ctx context.Context, ranges []eos.Range) (map[offsets.TP][]*kgo.Record, error)
	// Present returns the runs of tp's offsets from..to-1 (to -1: no end)
	// that t holds in its _offset column, in order; for a table written
	// shard by shard, those any shard holds (every replica is asked).
	Present(ctx context.Context, t *chtable.Table, tp offsets.TP, from, to int64) ([]eos.Span, error)
	// Windows refuses in one line what exactly-once cannot work with (the
	// server, a table, a materialized view; on a cluster naming the shard
	// and replica) or returns each table's deduplication window, in the
	// order of tables (for a table written shard by shard, the smallest of
	// its shards' local tables, with the replicas not reached).
	Windows(ctx context.Context, tables []*chtable.Table) ([]eos.Window, error)
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

// placementSink is a Sink that splits a table's batches across the shards
// of a cluster by a sharding key (writer.Cluster). Placement fingerprints
// how it splits db.table's rows now ("" when it does not): exactly-once
// records it with each batch, and replays a batch only under the same
// placement. Called from the owner goroutine.
type placementSink interface {
	Placement(ctx context.Context, db, table string) (string, error)
}

// serverNamer is the Sink's optional answer to which servers receive a
// table's INSERTs (writer.Cluster: the shards its batches are split
// over), each with a budget of its own. Called from the owner goroutine.
type serverNamer interface {
	Servers(db, table string) []string
}

// partsReader is the Sink's optional ability to read tables' parts
// (writer.Writer has it; writer.Cluster reads every replica of every shard
// and gives the most pressed one's); without it the adaptive controller
// works from the rate, insert durations and errors alone. Called from a
// probe goroutine.
type partsReader interface {
	PartsOf(ctx context.Context, tables []chtable.TableName) (map[chtable.TableName]adapt.Parts, error)
}

// latestSink is a Sink that reads the newest stored values of rows by key
// (writer.Writer.Latest). Called from insert goroutines.
type latestSink interface {
	Latest(ctx context.Context, t *chtable.Table, q chtable.LatestQuery) ([][]any, error)
}

// TableCreator is a Sink that can create tables (writer.Writer and
// writer.Cluster): schema.create: if_missing and the dead-letter table
// need it, and PlanCreates (sink check) asks it whether each table
// exists. Called on the goroutine that calls New.
type TableCreator interface {
	TableExists(ctx context.Context, db, table string) (bool, error)
	CreateTable(ctx context.Context, s chtable.TableSpec) (ddl []string, created bool, err error)
	Features(ctx context.Context) (chschema.ServerInfo, error)
}

// columnAdder is a Sink that can add a column to a table (writer.Writer
// and writer.Cluster): schema.evolve: add_columns needs it. Features is
// called from New, AddColumn from an evolve goroutine.
type columnAdder interface {
	AddColumn(ctx context.Context, info chschema.ServerInfo, db, table, cluster, name, typ string) (ddl string, added bool, err error)
	Features(ctx context.Context) (chschema.ServerInfo, error)
}

// truncater is a Sink that can apply a TRUNCATE event (writer.Writer and
// writer.Cluster; truncate: apply needs it): it empties db.table (ON
// CLUSTER cluster when set) and returns the statements it ran. Called
// from a goroutine of its own.
type truncater interface {
	Truncate(ctx context.Context, db, table, cluster string) (ddl string, err error)
}

// Sampler reads the newest records of a topic: schema.create: if_missing
// types a missing table's columns by them. main gives one that reads with
// the consumer's brokers and security and joins no group (consumer.Sampler;
// WithSampler, and PlanCreates's parameter). Called on the goroutine that
// calls New or PlanCreates.
type Sampler interface {
	// Sample returns up to n of the newest records of topic, spread over
	// its partitions (none when it holds none).
	Sample(ctx context.Context, topic string, n int) ([]*kgo.Record, error)
}

// shareUsage is the optional side of an Allowance that shares each
// server's budget with the other connectors writing to it
// (internal/budget's Sharer): it is told this connector's INSERTs to each
// server and its demand there.
type shareUsage interface {
	Inserted(server string, n int)
	SetDemand(server string, perMinute float64)
}

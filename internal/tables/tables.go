// Package tables is the tables the connector writes to, through their
// life: the routes compiled against their tables (Catalog: a table named
// after its topic is described and compiled for on the topic's first
// record), missing tables created from a sample of their topic's records
// (schema.create: if_missing; PlanCreates is the dry run `sink check`
// prints), the dead-letter tables (their DDL and the row of a bad record),
// the changes of a table while the connector runs (re-read every
// clickhouse.schema_refresh and after a schema error, applied between two
// batches), and schema evolution (fields no column takes: counted, logged,
// added as columns on request, their records held until the column
// exists).
//
// The catalog reaches ClickHouse through the ports it declares (Describer,
// and the optional Creator and ColumnAdder, which writer.Writer and
// writer.Cluster have) and the connector's other parts through Owner.
//
// Concurrency: a Catalog belongs to the connector's owner goroutine, which
// calls every method (Open and the Plan functions run before it starts).
// The table reads and ALTERs it starts run on goroutines of their own
// (Owner.Spawn) and hand their outcome back as a Result
// (Owner.Described), which the owner applies with Handle.
package tables

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/metrics"
)

// Describer is the ClickHouse side's description of a table (the
// pipeline's Sink). Describe is called from the owner goroutine (at start,
// and for a table named after a new topic) and from describe goroutines.
type Describer interface {
	// Describe returns the columns of db.table (chtable.ErrNoTable when it
	// does not exist).
	Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error)
}

// Creator is a target that can create tables (writer.Writer and
// writer.Cluster): schema.create: if_missing and the dead-letter table
// need it, and PlanCreates (sink check) asks it whether each table
// exists. Called on the goroutine that calls Open.
type Creator interface {
	TableExists(ctx context.Context, db, table string) (bool, error)
	CreateTable(ctx context.Context, s chtable.TableSpec) (ddl []string, created bool, err error)
	Features(ctx context.Context) (chschema.ServerInfo, error)
}

// ColumnAdder is a target that can add a column to a table
// (writer.Writer and writer.Cluster): schema.evolve: add_columns needs it.
// Features is called from Open, AddColumn from an evolve goroutine.
type ColumnAdder interface {
	AddColumn(ctx context.Context, info chschema.ServerInfo, db, table, cluster, name, typ string) (ddl string, added bool, err error)
	Features(ctx context.Context) (chschema.ServerInfo, error)
}

// Sharder is a Sink that places a table's rows on the shards of a cluster
// by a sharding key (writer.Cluster, for a route with target: local and a
// sharding_key): Placer names the key's column and the placement for
// blocks with columns cols, or nil when the table's rows are not placed
// by a key (or not yet). A table's blocks then put each row into its
// shard's part as it is decoded (decode.Plan.NewShardedBlock). Placer does
// no I/O; it is called from the owner goroutine.
type Sharder interface {
	Placer(db, table string, cols []chschema.ColumnSchema) (key string, p chschema.Placer)
}

// Sampler reads the newest records of a topic: schema.create: if_missing
// types a missing table's columns by them. main gives one that reads with
// the consumer's brokers and security and joins no group (consumer.Sampler).
// Called on the goroutine that calls Open or PlanCreates.
type Sampler interface {
	// Sample returns up to n of the newest records of topic, spread over
	// its partitions (none when it holds none).
	Sample(ctx context.Context, topic string, n int) ([]*kgo.Record, error)
}

// Owner is what the catalog asks of the connector it serves (the
// pipeline wires it to its other parts).
type Owner interface {
	// Spawn runs f on a goroutine that the connector joins before the
	// ClickHouse pool closes (f uses the Sink).
	Spawn(f func())
	// Described hands a Result to the owner goroutine, which applies it
	// with Handle (dropped once the connector has made its last commit).
	// It is called from the goroutines Spawn started.
	Described(r Result)
	// Stopping reports whether something already stops the connector.
	Stopping() bool
	// Reshape is called just before t's columns change: the open batches
	// of t, built for the columns it had, are sealed, and no block of
	// that layout is used again.
	Reshape(ctx context.Context, t *Table)
	// TableAdded is called for every table resolved (at Open, or on a
	// topic's first record), TableBounded when a table's latency bound
	// tightened (a route resolved for a topic that names it).
	TableAdded(t *Table)
	TableBounded(t *Table)
}

// Table is one ClickHouse target table.
type Table struct {
	name       string         // "db.table"
	t          *chtable.Table // the columns now
	plan       *decode.Plan   // any route's plan: all share the column layout
	m          *metrics.Table // nil without metrics; safe from insert goroutines
	sharder    Sharder        // the Sink, when it places rows on shards; else nil
	maxLatency time.Duration  // the smallest max_latency of the routes into it; 0: none
	deadLetter bool           // a dead-letter table (deadletter.go)
	syncInsert bool           // its INSERTs wait for every shard (a dead-letter table on a cluster)
	// describing: a re-read of the columns is running (DescribeAll)
	describing bool
	drift      *driftState // fields no column takes (evolve.go); nil until one is seen
	// unfilledAt: per column most of a batch's rows left unfilled, when
	// that was last logged (flushUnfilled).
	unfilledAt map[string]time.Time
}

// Name is the table as "db.table".
func (t *Table) Name() string { return t.name }

// Target is the table's INSERT target, for the columns it has now.
func (t *Table) Target() *chtable.Table { return t.t }

// NewBlock is an empty block for the columns the table has now; on a
// cluster written by a sharding key, one that places each row on its
// shard as it is decoded (Sharder).
func (t *Table) NewBlock() *decode.Block {
	if t.sharder != nil {
		if key, p := t.sharder.Placer(t.t.Database, t.t.Name, t.t.Insert); p != nil {
			return t.plan.NewShardedBlock(key, p)
		}
	}
	return t.plan.NewBlock()
}

// Metrics is the table's metric handles (nil without metrics).
func (t *Table) Metrics() *metrics.Table { return t.m }

// MaxLatency is the smallest max_latency of the routes into the table (0:
// none set).
func (t *Table) MaxLatency() time.Duration { return t.maxLatency }

// DeadLetter reports whether t holds dead letters (errors.dlq_table); a nil
// t does not.
func (t *Table) DeadLetter() bool { return t != nil && t.deadLetter }

// InsertContext is the context of an INSERT into t. On a cluster the
// dead-letter table the sink creates is a Distributed table, and its
// INSERTs are synchronous, as a target: distributed route's are: they
// return only once every shard has its rows, so the offset of a bad
// record is committed only once its row is on its shard, never while it
// waits in a node's queue.
func (t *Table) InsertContext(ctx context.Context) context.Context {
	if !t.syncInsert {
		return ctx
	}
	return chtable.WithDistributedSync(ctx)
}

// Route is one route, compiled against its table.
type Route struct {
	cfg   config.Route
	plan  *decode.Plan
	table *Table
	// settled caches the last unmapped fields of this route's records
	// that had nothing to wait for (evolve.go: WaitFor).
	settled settledFields
}

// Config is the route as configured.
func (r *Route) Config() *config.Route { return &r.cfg }

// Plan decodes the route's records into rows of its table.
func (r *Route) Plan() *decode.Plan { return r.plan }

// Table is the route's table.
func (r *Route) Table() *Table { return r.table }

// MeantFor is the table r's records are meant for ("" when r is nil: no
// route takes them), as a dead-letter row's target_table says.
func MeantFor(r *Route) string {
	if r != nil && r.table != nil {
		return r.table.name
	}
	return ""
}

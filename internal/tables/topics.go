package tables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"sink/internal/chschema"
	"sink/internal/chtable"
)

// Tables named after their topic (a route's table template: ${topic},
// ${topic.last}, ${N}) are resolved per topic, on the topic's first record
// (resolveTopic). Whoever can create topics chooses those names, so a
// topic whose name gives no table the route may write is input, like a
// record that does not decode: its records are bad records with the cause
// (a *TopicError), dead-lettered under errors.tolerance: all, never a
// reason to stop a connector that tolerates bad records. The table a
// topic's name gives may be
//   - no table name by the template's rules (config.TopicTableError: a dot
//     that would choose the database, a database outside the route's list);
//   - a table the config names for another job (tableJob): a dead-letter
//     table, or on a cluster the local table behind one;
//   - missing;
//   - one the route's mapping cannot fill.
// The last two may change while the sink runs, so the catalog remembers a
// topic's error for recheckEvery and resolves the topic again on its first
// record after that: a table created meanwhile is picked up, and a topic
// without a table costs one system.columns query per period, not one per
// record. Like the rest of the catalog, only the owner goroutine touches
// this.

// TopicError is a topic whose records go to no table: the table its
// route's template gives for it is not one the route may write (see
// above). The pipeline treats each of the topic's records as a bad record
// with this cause.
type TopicError struct {
	Topic string
	// Route is the configured route whose template named the table: its
	// dlq_table, when it has one, takes the topic's bad records.
	Route *Route
	Err   error
}

func (e *TopicError) Error() string { return e.Err.Error() }
func (e *TopicError) Unwrap() error { return e.Err }

// badTopic is a topic's TopicError and when to resolve the topic again.
type badTopic struct {
	err   *TopicError
	until time.Time
}

// defaultRecheck is recheckEvery when clickhouse.schema_refresh is 0 (no
// periodic re-read of tables): a missing table is still looked up again,
// never on every record.
const defaultRecheck = 30 * time.Second

// recheckEvery is how long a topic's TopicError stands before the topic
// is resolved again: clickhouse.schema_refresh, the period tables are
// re-read by, or defaultRecheck when that is 0.
func (c *Catalog) recheckEvery() time.Duration {
	if d := c.cfg.ClickHouse.SchemaRefresh; d > 0 {
		return d
	}
	return defaultRecheck
}

// stillBad is topic's TopicError while it stands (nil: resolve the topic).
func (c *Catalog) stillBad(topic string) error {
	b, ok := c.badTopics[topic]
	if !ok {
		return nil
	}
	if c.now().Before(b.until) {
		return b.err
	}
	delete(c.badTopics, topic)
	return nil
}

// refuseTopic remembers that topic, of configured route rs, goes to no
// table because of err, and returns the TopicError.
func (c *Catalog) refuseTopic(rs *Route, topic string, err error) error {
	every := c.recheckEvery()
	if errors.Is(err, chtable.ErrNoTable) {
		err = fmt.Errorf("%w (looked up again every %s: once created, it takes the topic's records from then on)", err, every)
	}
	te := &TopicError{Topic: topic, Route: rs, Err: err}
	if c.badTopics == nil {
		c.badTopics = map[string]badTopic{}
	}
	c.badTopics[topic] = badTopic{err: te, until: c.now().Add(every)}
	return te
}

// tableJob refuses db.table for a table named after a topic when the
// config names it for another job than taking a route's records: a
// dead-letter table (errors.dlq_table, a route's dlq_table) or, on a
// cluster, the local table behind one. Otherwise whoever creates topics
// could write rows into the dead letters, or add columns to them.
func (c *Catalog) tableJob(db, table, template, topic string) error {
	name := db + "." + table
	for _, dlq := range c.cfg.DLQTables() {
		job := ""
		switch {
		case name == dlq:
			job = "the dead-letter table"
		case c.cfg.ClickHouse.Clustered() && name == dlq+chtable.LocalSuffix:
			job = "the local table behind the dead-letter table " + dlq
		default:
			continue
		}
		return fmt.Errorf("table %s (from %q for topic %q) is %s: a topic's records never go to a table the config names for another job", name, template, topic, job)
	}
	return nil
}

// EngineReader is a sink that can read a table's engine
// (writer.Writer.TableEngine, and writer.Cluster's): resolveTopic refuses
// a table named after a topic whose engine takes no INSERT. A sink without
// it leaves such a table to its first INSERT, which fails for good.
type EngineReader interface {
	TableEngine(ctx context.Context, db, table string) (string, error)
}

// noInsertEngines are the engines ClickHouse refuses INSERTs into: a topic
// named after such a table (a view beside the connector's tables, say)
// would otherwise stop the connector at its first batch.
var noInsertEngines = []string{"View", "LiveView", "WindowView", "Dictionary", "Merge"}

// describeForTopic reads the columns of db.table, which configured route
// rs names for topic, within clickhouse.query_timeout. A table that is
// missing, has a column the driver cannot carry or an engine that takes no
// INSERT is a TopicError (refuseTopic); any other error (the server does
// not answer) is returned as it is, and stops the connector.
func (c *Catalog) describeForTopic(ctx context.Context, rs *Route, topic, db, table string) ([]chschema.ColumnSchema, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ClickHouse.QueryTimeout)
	defer cancel()
	var refused error
	schema, err := c.sink.Describe(ctx, db, table)
	if err == nil {
		refused, err = c.checkEngine(ctx, db, table, topic)
	}
	if err != nil && unfitTable(err) {
		refused, err = err, nil
	}
	where := fmt.Sprintf("routes[%d] (table %q for topic %q)", slices.Index(c.routes, rs), rs.cfg.Table, topic)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", where, err)
	case refused != nil:
		return nil, c.refuseTopic(rs, topic, fmt.Errorf("%s: %w", where, refused))
	}
	return schema, nil
}

// checkEngine refuses db.table, described for topic, when its engine
// takes no INSERT (noInsertEngines); an error reading the engine is
// returned as it is (not the topic's doing).
func (c *Catalog) checkEngine(ctx context.Context, db, table, topic string) (refused, err error) {
	er, ok := c.sink.(EngineReader)
	if !ok {
		return nil, nil
	}
	engine, err := er.TableEngine(ctx, db, table)
	if err != nil || !slices.Contains(noInsertEngines, engine) {
		return nil, err
	}
	return fmt.Errorf("table %s.%s (for topic %q) is a %s, which takes no INSERT", db, table, topic, engine), nil
}

// unfitTable reports whether a Describe error is the table's own doing
// (missing, or a column the driver cannot carry) rather than the server's.
func unfitTable(err error) bool {
	var unfit *chtable.UnfitError
	return errors.Is(err, chtable.ErrNoTable) || errors.As(err, &unfit)
}

// TopicErrorOf returns the TopicError in err's chain, nil when it has none.
func TopicErrorOf(err error) *TopicError {
	var te *TopicError
	if errors.As(err, &te) {
		return te
	}
	return nil
}

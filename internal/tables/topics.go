package tables

import (
	"errors"
	"fmt"
	"time"

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

// TopicErrorOf returns the TopicError in err's chain, nil when it has none.
func TopicErrorOf(err error) *TopicError {
	var te *TopicError
	if errors.As(err, &te) {
		return te
	}
	return nil
}

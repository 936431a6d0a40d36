package tables

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/eos"
	"sink/internal/errtext"
	"sink/internal/route"
)

// Dead-letter tables (errors.dlq_table, a route's dlq_table): a bad record
// becomes one row of a ClickHouse table, instead of or besides a copy in
// the dead-letter topic, so that it can be read with SQL.
//
// A dead-letter table is a table like the routes' tables: Open creates it
// when it is missing (DLQTableSpec), describes it and compiles a json plan
// for it; its rows are appended to its own open batch and sealed, queued,
// inserted, retried and acknowledged by the same code as any batch (the
// pipeline's dispatch), within batch.buffer_memory. The row is built from an
// envelope: a record with the bad record's topic, partition, offset,
// timestamp and key, whose value is a JSON object holding the rest (the
// value, cut to errors.dlq_value_max, its length, the headers, the error,
// its class, the table it was meant for and when). Bytes outside JSON's
// escapes (>= 0x20, not '"' or '\\') are written as they are, and the
// scanner hands a string's bytes over unchanged, so a value that is not
// UTF-8 is stored byte for byte (TestUnitDLQTableEnvelope).
//
// Offsets: the bad record is tracked under the dead-letter batch's unit
// (and, with dlq_topic too, under its produce as well: offsets.AddShared),
// so the committed offset passes it only once its row is in ClickHouse.
// A restart after a crash replays the records after the last commit: a
// bad record among them gets its row again (at-least-once, like every
// row; the table's ORDER BY puts the copies side by side, see
// docs/guarantees.md for the query that reads each record once).
//
// Under exactly-once a dead-letter batch is recorded and inserted with a
// token like any batch (the pipeline's exactly-once delivery): recovery
// replays it or finds its rows in the table, and a bad record whose row is
// in is skipped, so each has one row.

// The dead-letter table's column names. _topic, _partition, _offset,
// _timestamp and _key read their record attributes by default
// (route.DefaultSource); the others read the envelope's fields of the
// same name.
const (
	ColDeadLetteredAt = "dead_lettered_at"
	ColTargetTable    = "target_table"
	ColValue          = "value"
	ColValueLength    = "value_length"
	ColHeaderKeys     = "header_keys"
	ColHeaderValues   = "header_values"
	ColError          = "error"
	ColErrorClass     = "error_class"
)

// Error classes of a dead-letter row (error_class).
const (
	// ClassMalformed: the value cannot be parsed at all (not JSON, a bad
	// schema-registry frame, an unknown schema id).
	ClassMalformed = "malformed"
	// ClassColumn: a value does not fit its column (a type, a range, a
	// missing or null value refused by errors.on_missing / on_null).
	ClassColumn = "column"
	// ClassUnrouted: no route takes the record (errors.unrouted: dlq).
	ClassUnrouted = "unrouted"
	// ClassTable: the record's topic goes to no table: the table its
	// route's template names for it is no table name, a dead-letter
	// table, missing, or one the route cannot fill (TopicError).
	ClassTable = "table"
	// ClassDecoder: the sink's decoder failed on the record (a panic it
	// recovered: a bug to report, with the record).
	ClassDecoder = "decoder"
	// ClassOther: anything else.
	ClassOther = "other"
)

// classified is a bad record's error with its class (errorClass), which
// the dead-letter copy's headers name the failed stage by.
type classified struct {
	error
	class string
}

func (c classified) Unwrap() error { return c.error }

// DeadLetterClass is the error's class: malformed, column, unrouted,
// decoder or other.
func (c classified) DeadLetterClass() string { return c.class }

// Classified wraps a bad record's error with its class, for the Kafka
// adapter that writes the dead-letter copy (it reads DeadLetterClass).
func Classified(err error) error { return classified{err, errorClass(err)} }

// errorClass names the class of a bad record's error.
func errorClass(err error) string {
	var re *decode.RecordError
	switch {
	case errors.Is(err, ErrUnrouted):
		return ClassUnrouted
	case TopicErrorOf(err) != nil:
		return ClassTable
	case errors.Is(err, decode.ErrPanic):
		return ClassDecoder
	case errors.As(err, &re) && re.Column == "":
		return ClassMalformed
	case re != nil:
		return ClassColumn
	}
	return ClassOther
}

// DLQTableSpec is the table the sink creates for dead letters: a MergeTree
// ordered by where the records were meant to go and where they came from,
// partitioned by month, with ttl (0: none) on dead_lettered_at. srv says
// which types the server has (DateTime64 for _timestamp from 20.1).
func DLQTableSpec(db, table string, srv chschema.ServerTypes, ttl time.Duration, cluster string) chtable.TableSpec {
	cols := []chschema.ColumnSchema{
		{Name: ColDeadLetteredAt, Type: "DateTime"},
		{Name: ColTargetTable, Type: "String"},
	}
	cols = append(cols, chtable.KafkaColumns(srv)...)
	cols = append(cols,
		chschema.ColumnSchema{Name: "_key", Type: "String"},
		chschema.ColumnSchema{Name: ColValue, Type: "String"},
		chschema.ColumnSchema{Name: ColValueLength, Type: "UInt64"},
		chschema.ColumnSchema{Name: ColHeaderKeys, Type: "Array(String)"},
		chschema.ColumnSchema{Name: ColHeaderValues, Type: "Array(String)"},
		chschema.ColumnSchema{Name: ColError, Type: "String"},
		chschema.ColumnSchema{Name: ColErrorClass, Type: "String"},
	)
	s := chtable.TableSpec{
		Database: db, Table: table, Columns: cols,
		OrderBy:     "(" + ColTargetTable + ", _topic, _partition, _offset)",
		PartitionBy: "toYYYYMM(" + ColDeadLetteredAt + ")",
		Cluster:     cluster,
	}
	if ttl > 0 {
		s.TTL = ColDeadLetteredAt + " + INTERVAL " + strconv.FormatInt(int64(ttl/time.Second), 10) + " SECOND"
	}
	return s
}

// ErrUnrouted is the dead-letter cause of a record no route takes.
var ErrUnrouted = errors.New("no route takes the record (errors.unrouted: dlq)")

// UnroutedError is the dead-letter cause of r, which no route takes.
func UnroutedError(r *kgo.Record) error {
	return fmt.Errorf("topic %q partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, ErrUnrouted)
}

// DeadLetters is the dead-letter tables of a catalog, and the records
// dead-lettered this run. Owned by the owner goroutine, like the catalog.
type DeadLetters struct {
	c *Catalog // the catalog the tables are in
	// counts is the records dead-lettered this run (to the topic, the
	// table or both), by the table they were meant for ("" for records no
	// route takes).
	counts map[string]int64
	tables int    // how many of the catalog's tables are dead-letter tables
	env    []byte // the envelope being built (scratch)
	rec    kgo.Record
}

// DeadLetters is the catalog's dead-letter tables.
func (c *Catalog) DeadLetters() *DeadLetters { return &c.dead }

// open creates the dead-letter tables that are missing (unless noCreate),
// describes them and compiles their plans; Open calls it after the routes'
// tables.
func (d *DeadLetters) open(ctx context.Context, noCreate bool) error {
	c := d.c
	d.counts = map[string]int64{}
	for _, key := range c.cfg.DLQTables() {
		db, name := c.cfg.TableFor(config.Route{Table: key})
		skip, err := d.prepare(ctx, db, name, noCreate)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		schema, err := c.sink.Describe(ctx, db, name)
		if err != nil {
			return fmt.Errorf("dead-letter table: %w", err)
		}
		if c.tables[key] != nil {
			return fmt.Errorf("dead-letter table %s is a route's table; dead letters need a table of their own", key)
		}
		insert := decode.InsertColumns(schema)
		ts := c.newTable(chtable.NewTable(db, name, schema, insert), key, 0)
		ts.deadLetter, ts.syncInsert = true, c.cfg.ClickHouse.Cluster != ""
		if ts.plan, err = d.plan(ts, insert); err != nil {
			return err
		}
		d.tables++
		c.addTable(key, ts)
	}
	return nil
}

// prepare creates db.name when it is missing, or with noCreate (sink
// check) reports skip when it is missing: PlanDLQTables prints it.
func (d *DeadLetters) prepare(ctx context.Context, db, name string, noCreate bool) (skip bool, err error) {
	if !noCreate {
		return false, d.create(ctx, db, name)
	}
	tc, ok := d.c.sink.(Creator)
	if !ok {
		return false, nil
	}
	exists, err := tc.TableExists(ctx, db, name)
	return err == nil && !exists, err
}

// create creates db.name with DLQTableSpec when it does not exist.
func (d *DeadLetters) create(ctx context.Context, db, name string) error {
	tc, ok := d.c.sink.(Creator)
	if !ok {
		return nil // a sink that cannot create tables: Describe says if it is missing
	}
	info, err := tc.Features(ctx)
	if err != nil {
		return err
	}
	spec, err := deadLetterSpec(d.c.cfg, db, name, info)
	if err != nil {
		return err
	}
	ddl, created, err := tc.CreateTable(ctx, spec)
	if err != nil {
		return fmt.Errorf("dead-letter table %s.%s: %w", db, name, err)
	}
	if created {
		d.c.log.Info().Str("table", db+"."+name).Strs("ddl", ddl).Msg("dead-letter table created")
	}
	return nil
}

// DLQPlan is what run does about one dead-letter table (sink check).
type DLQPlan struct {
	Table  string // db.table
	Exists bool
	DDL    []string // the statements run would create it with, when missing
}

// PlanDLQTables is the dry run of the dead-letter tables' creation: for
// each one, whether it exists, and the statements that would create it.
func PlanDLQTables(ctx context.Context, cfg *config.Config, w Creator) ([]DLQPlan, error) {
	var out []DLQPlan
	tables := cfg.DLQTables()
	if len(tables) == 0 {
		return nil, nil
	}
	info, err := w.Features(ctx)
	if err != nil {
		return nil, err
	}
	for _, key := range tables {
		db, name := cfg.TableFor(config.Route{Table: key})
		pl := DLQPlan{Table: key}
		if pl.Exists, err = w.TableExists(ctx, db, name); err != nil {
			return nil, err
		}
		if !pl.Exists {
			spec, err := deadLetterSpec(cfg, db, name, info)
			if err != nil {
				return nil, err
			}
			if pl.DDL, err = chtable.CreateTableDDL(spec); err != nil {
				return nil, err
			}
		}
		out = append(out, pl)
	}
	return out, nil
}

// deadLetterSpec is DLQTableSpec for the config on a server, refusing a
// TTL the server cannot keep (TTL came in ClickHouse 19.6). Under
// exactly-once the table remembers the tokens of its last eos.DefaultWindow
// INSERTs (non_replicated_deduplication_window; ClickHouse's default is
// 0), so that a replayed dead-letter batch is dropped if it had landed; on
// a server without tokens exactly-once is refused with its own line
// (eos.Require), so the setting is left out there.
func deadLetterSpec(cfg *config.Config, db, name string, info chschema.ServerInfo) (chtable.TableSpec, error) {
	e := cfg.Errors
	if e.DLQTableTTL > 0 && !info.Version.AtLeast(19, 6) {
		return chtable.TableSpec{}, fmt.Errorf("dead-letter table %s.%s: errors.dlq_table_ttl needs ClickHouse 19.6 or later (the server is %s); set it to 0 or create the table yourself", db, name, info.Version)
	}
	spec := DLQTableSpec(db, name, info.EvolveTypes(), e.DLQTableTTL, cfg.ClickHouse.Cluster)
	if cfg.ExactlyOnce() && info.DedupToken && spec.Cluster == "" {
		spec.Settings = map[string]any{"non_replicated_deduplication_window": eos.DefaultWindow}
	}
	return spec, nil
}

// Any reports whether bad records may become rows of a dead-letter table.
func (d *DeadLetters) Any() bool { return d.tables > 0 }

// TableOf is the dead-letter table of rs's bad records (rs nil: a record
// no route takes), nil when they go to none.
func (d *DeadLetters) TableOf(rs *Route) *Table {
	name := d.c.cfg.Errors.DLQTable
	if rs != nil && rs.cfg.DLQTable != "" {
		name = rs.cfg.DLQTable
	}
	if name == "" {
		return nil
	}
	db, t := d.c.cfg.TableFor(config.Route{Table: name})
	return d.c.tables[db+"."+t]
}

// Append appends r's dead-letter row (meant for table meant, bad because
// of cause) to blk, a block of dead-letter table ts: an open batch, or a
// pending batch rebuilt by exactly-once recovery.
func (d *DeadLetters) Append(blk *decode.Block, ts *Table, r *kgo.Record, cause error, meant string) error {
	d.env = appendEnvelope(d.env[:0], r, cause, meant, int(d.c.cfg.Errors.DLQValueMax), d.c.now())
	d.rec = kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: d.env}
	if err := ts.plan.Append(blk, &d.rec); err != nil {
		return fmt.Errorf("dead-letter table %s: the row of %s[%d] offset %d: %w", ts.t.FullName(), r.Topic, r.Partition, r.Offset, err)
	}
	d.rec = kgo.Record{}
	return nil
}

// Count counts a record dead-lettered, meant for table ("" for a record no
// route takes).
func (d *DeadLetters) Count(table string) { d.counts[table]++ }

// Counted returns the records dead-lettered so far that were meant for
// table ("" for records no route takes); owner goroutine only (the status
// snapshot copies it).
func (d *DeadLetters) Counted(table string) int64 { return d.counts[table] }

// appendEnvelope appends the JSON object of r's dead-letter row to dst.
func appendEnvelope(dst []byte, r *kgo.Record, cause error, meant string, valueMax int, now time.Time) []byte {
	v := r.Value
	if len(v) > valueMax {
		v = v[:valueMax]
	}
	dst = append(dst, `{"`+ColValue+`":"`...)
	dst = appendJSONBytes(dst, v)
	dst = append(dst, `","`+ColValueLength+`":`...)
	dst = strconv.AppendInt(dst, int64(len(r.Value)), 10)
	dst = append(dst, `,"`+ColHeaderKeys+`":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = appendJSONBytes(dst, []byte(h.Key))
		dst = append(dst, '"')
	}
	dst = append(dst, `],"`+ColHeaderValues+`":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = appendJSONBytes(dst, h.Value)
		dst = append(dst, '"')
	}
	dst = append(dst, `],"`+ColError+`":"`...)
	dst = appendJSONBytes(dst, []byte(errtext.Cap(validText(cause.Error()), errtext.Max)))
	dst = append(dst, `","`+ColErrorClass+`":"`...)
	dst = append(dst, errorClass(cause)...)
	dst = append(dst, `","`+ColTargetTable+`":"`...)
	dst = appendJSONBytes(dst, []byte(meant))
	dst = append(dst, `","`+ColDeadLetteredAt+`":`...)
	dst = strconv.AppendInt(dst, now.Unix(), 10)
	return append(dst, '}')
}

// validText replaces what is not UTF-8 in an error text (which may quote
// a record's bytes) so that the error column reads as text.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}

// appendJSONBytes appends b as the inside of a JSON string: '"', '\\' and
// control bytes escaped, every other byte as it is (the json format's
// scanner keeps a string's bytes, UTF-8 or not).
func appendJSONBytes(dst, b []byte) []byte {
	const hex = "0123456789abcdef"
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// plan compiles the rows of dead-letter table ts for its columns as they
// are now (at open, and when the table changed while running); nil for
// any other table.
func (d *DeadLetters) plan(ts *Table, insert []chschema.ColumnSchema) (*decode.Plan, error) {
	if !ts.deadLetter {
		return nil, nil
	}
	plan, err := decode.Compile(route.JSON, insert, nil)
	if err != nil {
		return nil, fmt.Errorf("dead-letter table %s: its rows cannot be written to its columns: %w (stopping; fix the table)", ts.t.FullName(), err)
	}
	// A dead-letter row is the sink's own envelope, its value cut at
	// errors.dlq_value_max (up to 64MiB): no row bound may refuse it.
	plan.SetPolicy(decode.Policy{MaxRowBytes: math.MaxInt})
	return plan, nil
}

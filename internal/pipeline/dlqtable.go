package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/eos"
	"sink/internal/errtext"
	"sink/internal/offsets"
	"sink/internal/route"
)

// Dead-letter tables (errors.dlq_table, a route's dlq_table): a bad record
// becomes one row of a ClickHouse table, instead of or besides a copy in
// the dead-letter topic, so that it can be read with SQL.
//
// A dead-letter table is a table like the routes' tables: New creates it
// when it is missing (DLQTableSpec), describes it and compiles a json plan
// for it; its rows are appended to its own accumulator and sealed,
// queued, inserted, retried and acknowledged by the same code as any batch
// (dispatch.go), within batch.buffer_memory. The row is built from an
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
// token like any batch (exactly.go): recovery replays it (replay,
// deadLetterBlock) or finds its rows in the table, and a bad record
// whose row is in is skipped (deadLettered), so each has one row.

// DLQ table column names. _topic, _partition, _offset, _timestamp and
// _key read their record attributes by default (route.DefaultSource);
// the others read the envelope's fields of the same name.
const (
	dlqColAt         = "dead_lettered_at"
	dlqColTable      = "target_table"
	dlqColValue      = "value"
	dlqColValueLen   = "value_length"
	dlqColHeaderKeys = "header_keys"
	dlqColHeaderVals = "header_values"
	dlqColError      = "error"
	dlqColClass      = "error_class"
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
	// ClassDecoder: the sink's decoder failed on the record (a panic it
	// recovered: a bug to report, with the record).
	ClassDecoder = "decoder"
	// ClassOther: anything else.
	ClassOther = "other"
)

// errorClass names the class of a bad record's error.
func errorClass(err error) string {
	var re *decode.RecordError
	switch {
	case errors.Is(err, errUnrouted):
		return ClassUnrouted
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
		{Name: dlqColAt, Type: "DateTime"},
		{Name: dlqColTable, Type: "String"},
	}
	cols = append(cols, chtable.KafkaColumns(srv)...)
	cols = append(cols,
		chschema.ColumnSchema{Name: "_key", Type: "String"},
		chschema.ColumnSchema{Name: dlqColValue, Type: "String"},
		chschema.ColumnSchema{Name: dlqColValueLen, Type: "UInt64"},
		chschema.ColumnSchema{Name: dlqColHeaderKeys, Type: "Array(String)"},
		chschema.ColumnSchema{Name: dlqColHeaderVals, Type: "Array(String)"},
		chschema.ColumnSchema{Name: dlqColError, Type: "String"},
		chschema.ColumnSchema{Name: dlqColClass, Type: "String"},
	)
	s := chtable.TableSpec{
		Database: db, Table: table, Columns: cols,
		OrderBy:     "(" + dlqColTable + ", _topic, _partition, _offset)",
		PartitionBy: "toYYYYMM(" + dlqColAt + ")",
		Cluster:     cluster,
	}
	if ttl > 0 {
		s.TTL = dlqColAt + " + INTERVAL " + strconv.FormatInt(int64(ttl/time.Second), 10) + " SECOND"
	}
	return s
}

// dlqTables is the pipeline's dead-letter tables and counts.
type dlqTables struct {
	// counts is the records dead-lettered this run (to the topic, the
	// table or both), by the table they were meant for ("" for records no
	// route takes).
	counts map[string]int64
	tables map[*tableState]bool // the dead-letter tables among p.rt.tables
	env    []byte               // the envelope being built (scratch)
	rec    kgo.Record
}

// initDLQTables creates the dead-letter tables that are missing, describes
// them and compiles their plans; New calls it after the routes' tables.
func (p *Pipeline) initDLQTables(ctx context.Context) error {
	p.dlqt = &dlqTables{counts: map[string]int64{}, tables: map[*tableState]bool{}}
	for _, key := range p.cfg.DLQTables() {
		db, name := p.cfg.TableFor(config.Route{Table: key})
		if p.noCreate {
			// sink check: a missing table is printed by PlanDLQTables.
			if tc, ok := p.w.(TableCreator); ok {
				if exists, err := tc.TableExists(ctx, db, name); err != nil || !exists {
					if err != nil {
						return err
					}
					continue
				}
			}
		} else if err := p.createDLQTable(ctx, db, name); err != nil {
			return err
		}
		schema, err := p.w.Describe(ctx, db, name)
		if err != nil {
			return fmt.Errorf("dead-letter table: %w", err)
		}
		if p.rt.table(key) != nil {
			return fmt.Errorf("dead-letter table %s is a route's table; dead letters need a table of their own", key)
		}
		insert := decode.InsertColumns(schema)
		ts := p.newTable(chtable.NewTable(db, name, schema, insert), key, 0)
		p.dlqt.tables[ts] = true
		if ts.plan, err = p.dlqReplan(ts, insert); err != nil {
			return err
		}
		p.rt.addTable(key, ts)
	}
	return nil
}

// createDLQTable creates db.name with DLQTableSpec when it does not exist.
func (p *Pipeline) createDLQTable(ctx context.Context, db, name string) error {
	tc, ok := p.w.(TableCreator)
	if !ok {
		return nil // a sink that cannot create tables: Describe says if it is missing
	}
	info, err := tc.Features(ctx)
	if err != nil {
		return err
	}
	spec, err := p.dlqSpec(db, name, info)
	if err != nil {
		return err
	}
	ddl, created, err := tc.CreateTable(ctx, spec)
	if err != nil {
		return fmt.Errorf("dead-letter table %s.%s: %w", db, name, err)
	}
	if created {
		p.log.Info().Str("table", db+"."+name).Strs("ddl", ddl).Msg("dead-letter table created")
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
func PlanDLQTables(ctx context.Context, cfg *config.Config, w TableCreator) ([]DLQPlan, error) {
	var out []DLQPlan
	tables := cfg.DLQTables()
	if len(tables) == 0 {
		return nil, nil
	}
	info, err := w.Features(ctx)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg}
	for _, key := range tables {
		db, name := cfg.TableFor(config.Route{Table: key})
		pl := DLQPlan{Table: key}
		if pl.Exists, err = w.TableExists(ctx, db, name); err != nil {
			return nil, err
		}
		if !pl.Exists {
			spec, err := p.dlqSpec(db, name, info)
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

// dlqSpec is DLQTableSpec for the config on a server, refusing a TTL the
// server cannot keep (TTL came in ClickHouse 19.6). Under exactly-once the
// table remembers the tokens of its last eos.DefaultWindow INSERTs
// (non_replicated_deduplication_window; ClickHouse's default is 0), so
// that a replayed dead-letter batch is dropped if it had landed; on a
// server without tokens exactly-once is refused with its own line
// (eos.Require), so the setting is left out there.
func (p *Pipeline) dlqSpec(db, name string, info chschema.ServerInfo) (chtable.TableSpec, error) {
	e := p.cfg.Errors
	if e.DLQTableTTL > 0 && !info.Version.AtLeast(19, 6) {
		return chtable.TableSpec{}, fmt.Errorf("dead-letter table %s.%s: errors.dlq_table_ttl needs ClickHouse 19.6 or later (the server is %s); set it to 0 or create the table yourself", db, name, info.Version)
	}
	spec := DLQTableSpec(db, name, info.EvolveTypes(), e.DLQTableTTL, p.cfg.ClickHouse.Cluster)
	if p.cfg.ExactlyOnce() && info.DedupToken && spec.Cluster == "" {
		spec.Settings = map[string]any{"non_replicated_deduplication_window": eos.DefaultWindow}
	}
	return spec, nil
}

// dlqTableOf is the dead-letter table of rs's bad records (rs nil: a
// record no route takes), nil when they go to none.
func (p *Pipeline) dlqTableOf(rs *routeState) *tableState {
	name := p.cfg.Errors.DLQTable
	if rs != nil && rs.route.DLQTable != "" {
		name = rs.route.DLQTable
	}
	if name == "" {
		return nil
	}
	db, t := p.cfg.TableFor(config.Route{Table: name})
	return p.rt.table(db + "." + t)
}

// deadLetterRow appends r's dead-letter row to ts's open batch and returns
// that batch; the caller tracks r under its unit, then calls added.
func (p *Pipeline) deadLetterRow(ts *tableState, tp offsets.TP, r *kgo.Record, cause error, meant string) (*accState, error) {
	a := p.accFor(ts, tp)
	if err := p.appendDeadLetter(a.acc.Data(), ts, r, cause, meant); err != nil {
		return nil, err
	}
	p.dlv.onRow(a, tp)
	return a, nil
}

// appendDeadLetter appends r's dead-letter row (meant for table meant, bad
// because of cause) to blk, a block of dead-letter table ts: an open
// batch, or a pending batch rebuilt by exactly-once recovery.
func (p *Pipeline) appendDeadLetter(blk *decode.Block, ts *tableState, r *kgo.Record, cause error, meant string) error {
	d := p.dlqt
	d.env = appendEnvelope(d.env[:0], r, cause, meant, int(p.cfg.Errors.DLQValueMax), p.now())
	d.rec = kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: d.env}
	if err := ts.plan.Append(blk, &d.rec); err != nil {
		return fmt.Errorf("dead-letter table %s: the row of %s[%d] offset %d: %w", ts.t.FullName(), r.Topic, r.Partition, r.Offset, err)
	}
	d.rec = kgo.Record{}
	return nil
}

// meantFor is the table rs's records are meant for ("" when rs is nil: no
// route takes them), as a dead-letter row's target_table says.
func meantFor(rs *routeState) string {
	if rs != nil && rs.table != nil {
		return rs.table.t.FullName()
	}
	return ""
}

// appendEnvelope appends the JSON object of r's dead-letter row to dst.
func appendEnvelope(dst []byte, r *kgo.Record, cause error, meant string, valueMax int, now time.Time) []byte {
	v := r.Value
	if len(v) > valueMax {
		v = v[:valueMax]
	}
	dst = append(dst, `{"`+dlqColValue+`":"`...)
	dst = appendJSONBytes(dst, v)
	dst = append(dst, `","`+dlqColValueLen+`":`...)
	dst = strconv.AppendInt(dst, int64(len(r.Value)), 10)
	dst = append(dst, `,"`+dlqColHeaderKeys+`":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = appendJSONBytes(dst, []byte(h.Key))
		dst = append(dst, '"')
	}
	dst = append(dst, `],"`+dlqColHeaderVals+`":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = appendJSONBytes(dst, h.Value)
		dst = append(dst, '"')
	}
	dst = append(dst, `],"`+dlqColError+`":"`...)
	dst = appendJSONBytes(dst, []byte(errtext.Cap(validText(cause.Error()), errtext.Max)))
	dst = append(dst, `","`+dlqColClass+`":"`...)
	dst = append(dst, errorClass(cause)...)
	dst = append(dst, `","`+dlqColTable+`":"`...)
	dst = appendJSONBytes(dst, []byte(meant))
	dst = append(dst, `","`+dlqColAt+`":`...)
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

// deadLettered returns the records dead-lettered so far that were meant
// for table ("" for records no route takes); owner goroutine only (the
// status snapshot copies it).
func (p *Pipeline) deadLettered(table string) int64 {
	if p.dlqt == nil {
		return 0
	}
	return p.dlqt.counts[table]
}

// isDLQTable reports whether ts is a dead-letter table.
func (p *Pipeline) isDLQTable(ts *tableState) bool { return p.dlqt != nil && p.dlqt.tables[ts] }

// Table returns the table named "db.table" that New resolved (a route's
// or a dead-letter table), nil when there is none; call it before Run.
func (p *Pipeline) Table(name string) *chtable.Table {
	if ts := p.rt.table(name); ts != nil {
		return ts.t
	}
	return nil
}

// dlqInsertCtx is the context of an INSERT into ts. On a cluster the
// dead-letter table the sink creates is a Distributed table, and its
// INSERTs are synchronous, as a target: distributed route's are: they
// return only once every shard has its rows, so the offset of a bad
// record is committed only once its row is on its shard, never while it
// waits in a node's queue (insert_distributed_sync is
// distributed_foreground_insert's older name, which newer servers keep).
func (p *Pipeline) dlqInsertCtx(ctx context.Context, ts *tableState) context.Context {
	if p.cfg.ClickHouse.Cluster == "" || !p.isDLQTable(ts) {
		return ctx
	}
	return chtable.WithInsertSettings(ctx, clickhouse.Settings{"insert_distributed_sync": 1})
}

// dlqReplan compiles the rows of dead-letter table ts again for its
// columns as they are now (applySchema, when the table changed while
// running); nil for any other table.
func (p *Pipeline) dlqReplan(ts *tableState, insert []chschema.ColumnSchema) (*decode.Plan, error) {
	if !p.isDLQTable(ts) {
		return nil, nil
	}
	plan, err := decode.Compile(route.JSON, insert, nil)
	if err != nil {
		return nil, fmt.Errorf("dead-letter table %s: its rows cannot be written to its columns: %w (stopping; fix the table)", ts.t.FullName(), err)
	}
	return plan, nil
}

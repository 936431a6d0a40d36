package decode

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"
)

// InsertColumns returns the columns an INSERT into this table names, in
// table order: every column whose DefaultKind is "" plus DEFAULT (and
// EPHEMERAL) columns that some mapping names explicitly (a key of a Columns
// map). DEFAULT columns without a source are left out so ClickHouse computes
// them; MATERIALIZED and ALIAS columns are never inserted.
//
// Pass the mappings of every route into the table, then Compile each route
// with the result so that all their Plans share one column layout.
func InsertColumns(table []ColumnSchema, mappings ...map[string]string) []ColumnSchema {
	var out []ColumnSchema
	for _, c := range table {
		switch c.DefaultKind {
		case "":
			out = append(out, c)
		case "DEFAULT", "EPHEMERAL":
			for _, m := range mappings {
				if _, ok := m[c.Name]; ok {
					out = append(out, c)
					break
				}
			}
		}
	}
	return out
}

type srcKind uint8

const (
	srcJSON srcKind = iota
	srcTopic
	srcPartition
	srcOffset
	srcTimestamp
	srcKey
	srcHeader
)

// source is where one column's value comes from.
type source struct {
	kind   srcKind
	slot   int      // srcJSON: index of the top-level key in Plan.keys
	rest   []string // srcJSON: path below the top-level key
	header string   // srcHeader: header name
	// nested: for an unmapped Array column named "n.a" (a Nested column's
	// part), where the record has no "n.a" key: read "n" instead, and take
	// "a" from each element of an array of objects, or from an object
	// holding the parallel arrays.
	nested *source
	pos    string // nested, for a part named by a number k: "k-1", to index tuples written as arrays
}

var metaSources = map[string]srcKind{
	"$topic": srcTopic, "$partition": srcPartition, "$offset": srcOffset,
	"$timestamp": srcTimestamp, "$key": srcKey,
}

// metaColumns are column names that, when not mapped, read a record
// attribute instead of a JSON field.
var metaColumns = map[string]string{
	"_topic": "$topic", "_partition": "$partition", "_offset": "$offset",
	"_timestamp": "$timestamp", "_key": "$key",
}

// Plan is the compiled decoder of one route into one table. It owns a
// reusable JSON parser: use one Plan from one goroutine at a time.
type Plan struct {
	cols  []ColumnSchema
	types []*chType
	srcs  []source
	sig   string // column layout; Blocks of equal layout are interchangeable

	keys   []string          // distinct top-level JSON keys the sources read
	keyIdx map[string]int    // key -> slot
	slots  []*fastjson.Value // per record: value of each key, nil if absent

	parser fastjson.Parser
	ctx    ctx

	dbz *dbzPlan // set for the debezium-json format (debezium.go)

	policy   Policy      // policy.go
	defaults [][2]uint64 // per column: defaults given for missing, null values
	marks    []mark      // defaults given in the row being appended
}

// Compile builds the plan for one route into one table. format is "json"
// or "debezium-json" (see FormatDebezium for what differs).
//
// cols are the columns to fill, in INSERT order — normally
// InsertColumns(table, mappings of all routes into the table...). Every
// column listed is filled; MATERIALIZED and ALIAS columns are skipped.
//
// mapping: column -> source, where a source is a JSON path "a.b.c" (dots
// descend objects; a numeric step indexes an array) or one of $topic
// $partition $offset $timestamp $key $header.NAME. A column not in mapping
// reads the top-level JSON field of the same name (the whole name, dots
// included), except columns named _topic _partition _offset _timestamp _key,
// which default to the matching $ source.
//
// Errors name the column or mapping key: a mapping key that is not a column
// (or is MATERIALIZED/ALIAS), a malformed or unknown source, a $ source into
// an Array, Map, Tuple, Variant or JSON column, or a column type this
// package cannot fill (see the package documentation).
func Compile(format string, cols []ColumnSchema, mapping map[string]string) (*Plan, error) {
	if format == FormatDebezium {
		return compileDebezium(cols, mapping)
	}
	if format != "json" {
		return nil, fmt.Errorf("unsupported format %q (supported: json, %s)", format, FormatDebezium)
	}
	if err := checkMapping(cols, mapping, nil); err != nil {
		return nil, err
	}

	p := &Plan{keyIdx: map[string]int{}}
	var sig strings.Builder
	for _, c := range cols {
		if !insertable(c) {
			continue
		}
		t := parseType(c.Type)
		if t.unsupported() {
			return nil, fmt.Errorf("column %q has type %s which the json format cannot fill", c.Name, c.Type)
		}
		if err := driverCanCarry(c.Type, t); err != nil {
			return nil, fmt.Errorf("column %q has type %s: %v", c.Name, c.Type, err)
		}
		spec, explicit := mapping[c.Name]
		if !explicit {
			spec = metaColumns[c.Name]
		}
		var src source
		switch {
		case spec == "" && !explicit:
			src = p.jsonSource([]string{c.Name})
			if head, rest, ok := strings.Cut(c.Name, "."); ok && t.kind == kArray && head != "" && rest != "" {
				alt := p.jsonSource([]string{head, rest})
				// ClickHouse 18.16 splits Array(Tuple(T, U)) a into a.1, a.2:
				// element k of each tuple, written as a JSON array.
				if k, err := strconv.Atoi(rest); err == nil && k >= 1 && strconv.Itoa(k) == rest {
					alt.pos = strconv.Itoa(k - 1)
				}
				src.nested = &alt
			}
		case strings.HasPrefix(spec, "$"):
			if name, ok := strings.CutPrefix(spec, "$header."); ok && name != "" {
				src = source{kind: srcHeader, header: name}
			} else if k, ok := metaSources[spec]; ok {
				src = source{kind: k}
			} else {
				return nil, fmt.Errorf("column %q: unknown source %q (want a JSON path or $topic, $partition, $offset, $timestamp, $key, $header.NAME)", c.Name, spec)
			}
			if !t.scalar() {
				return nil, fmt.Errorf("column %q: source %s cannot fill type %s", c.Name, spec, c.Type)
			}
		default:
			path, err := splitPath(c.Name, "JSON path", spec, spec)
			if err != nil {
				return nil, err
			}
			src = p.jsonSource(path)
		}
		p.cols = append(p.cols, c)
		p.types = append(p.types, t)
		p.srcs = append(p.srcs, src)
		fmt.Fprintf(&sig, "%s\x00%s\x00", c.Name, c.Type)
	}
	if len(p.cols) == 0 {
		return nil, fmt.Errorf("no insertable columns")
	}
	p.sig = sig.String()
	p.slots = make([]*fastjson.Value, len(p.keys))
	return p, nil
}

// splitPath splits a dotted path; an empty segment is an error naming the
// column and the source as the user wrote it (what says what kind it is).
func splitPath(column, what, spec, path string) ([]string, error) {
	parts := strings.Split(path, ".")
	for _, s := range parts {
		if s == "" {
			return nil, fmt.Errorf("column %q: invalid %s %q", column, what, spec)
		}
	}
	return parts, nil
}

func insertable(c ColumnSchema) bool {
	switch c.DefaultKind {
	case "", "DEFAULT", "EPHEMERAL":
		return true
	}
	return false
}

func (p *Plan) jsonSource(path []string) source {
	slot, ok := p.keyIdx[path[0]]
	if !ok {
		slot = len(p.keys)
		p.keys = append(p.keys, path[0])
		p.keyIdx[path[0]] = slot
	}
	return source{kind: srcJSON, slot: slot, rest: path[1:]}
}

// Columns returns the columns the plan fills, in order.
func (p *Plan) Columns() []ColumnSchema { return append([]ColumnSchema(nil), p.cols...) }

// NewBlock returns an empty block with one buffer per column.
func (p *Plan) NewBlock() *Block {
	b := &Block{cols: p.cols, sig: p.sig, bufs: make([]col, len(p.types))}
	for i, t := range p.types {
		b.bufs[i] = newCol(t)
	}
	return b
}

// Append decodes r.Value and appends exactly one row to b, or returns a
// *RecordError and leaves b unchanged. b may come from any Plan with the same
// Columns(); a block of another layout is a programming error and panics.
func (p *Plan) Append(b *Block, r *kgo.Record) error {
	if b.sig != p.sig {
		panic("decode: Append to a Block whose columns differ from the Plan's")
	}
	if p.dbz != nil {
		return p.appendDebezium(b, r)
	}
	if r.Value == nil {
		return p.tombstone(r)
	}
	v, err := p.parser.ParseBytes(r.Value)
	if err != nil {
		return p.recordError(r, "", "invalid JSON: "+err.Error())
	}
	if v.Type() != fastjson.TypeObject {
		return p.recordError(r, "", "invalid JSON: want an object, got "+v.Type().String())
	}
	o, _ := v.Object()
	// One Object.Get per distinct top-level key: measured faster than one
	// Object.Visit with a map lookup per field (no hashing, and the fast
	// path skips unescaping keys).
	for i, k := range p.keys {
		p.slots[i] = o.Get(k)
	}

	return p.appendRow(b, r)
}

// appendRow reads every column's source (from the JSON record, or the
// Debezium row image) and appends one row to b; on the first failure it
// rolls every column back, so b is unchanged.
func (p *Plan) appendRow(b *Block, r *kgo.Record) error {
	c := &p.ctx
	c.b = b
	bytes0 := b.bytes
	in := &c.in
	p.marks = p.marks[:0]
	for i := range p.srcs {
		var err error
		if p.dbz != nil {
			err = p.readDebezium(i, &p.srcs[i], r, in)
		} else {
			p.read(&p.srcs[i], r, in)
		}
		if err == nil {
			err = p.checkDefault(i, in)
		}
		if err == nil {
			err = b.bufs[i].add(c, in)
		}
		if err != nil {
			for j := 0; j <= i; j++ {
				b.bufs[j].truncate(b.rows)
			}
			b.bytes = bytes0
			c.b = nil
			return p.recordError(r, p.cols[i].Name, err.Error())
		}
	}
	b.rows++
	c.b = nil
	p.countDefaults()
	return nil
}

func (p *Plan) read(s *source, r *kgo.Record, in *input) {
	switch s.kind {
	case srcJSON:
		v := p.slots[s.slot]
		in.proj = nil
		if v == nil && s.nested != nil {
			if v = p.slots[s.nested.slot]; v != nil && v.Type() == fastjson.TypeArray {
				in.kind, in.v, in.proj, in.projPos = inArray, v, s.nested.rest, s.nested.pos
				return
			}
			s = s.nested
		}
		if v != nil && len(s.rest) > 0 {
			v = v.Get(s.rest...)
		}
		p.ctx.fromJSON(v, in)
	case srcTopic:
		in.kind, in.b = inStr, s2b(r.Topic)
	case srcPartition:
		in.kind, in.n = inInt, int64(r.Partition)
	case srcOffset:
		in.kind, in.n = inInt, r.Offset
	case srcTimestamp:
		// A record without a timestamp (zero time, or Kafka's -1) counts as missing.
		if ms := r.Timestamp.UnixMilli(); r.Timestamp.IsZero() || ms < 0 {
			in.kind = inMissing
		} else {
			in.kind, in.t, in.n = inTime, r.Timestamp, ms
		}
	case srcKey:
		if r.Key == nil {
			in.kind = inMissing
		} else {
			in.kind, in.b = inStr, r.Key
		}
	case srcHeader:
		in.kind = inMissing
		for i := range r.Headers {
			if r.Headers[i].Key == s.header {
				if r.Headers[i].Value == nil {
					in.kind = inNull
				} else {
					in.kind, in.b = inStr, r.Headers[i].Value
				}
				break
			}
		}
	}
}

func (p *Plan) recordError(r *kgo.Record, column, reason string) *RecordError {
	return &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Column: column, Reason: reason}
}

// RecordError is a record that cannot be decoded or converted. It belongs
// in the dead-letter topic, never in a batch.
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Column    string // empty for whole-record errors (malformed JSON)
	Reason    string
}

func (e *RecordError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("decode topic %q partition %d offset %d: %s", e.Topic, e.Partition, e.Offset, e.Reason)
	}
	return fmt.Sprintf("decode topic %q partition %d offset %d: column %q: %s", e.Topic, e.Partition, e.Offset, e.Column, e.Reason)
}

// Block is a batch of rows in typed column buffers. It is filled by one
// goroutine; once handed to the writer it is read-only until Reset.
type Block struct {
	cols  []ColumnSchema
	sig   string
	bufs  []col
	rows  int
	bytes int
	arena []byte // current string chunk
}

// Rows returns the number of rows.
func (b *Block) Rows() int { return b.rows }

// Bytes returns the approximate heap bytes the row data holds (value widths,
// string contents, null flags, array offsets), maintained per Append, O(1).
func (b *Block) Bytes() int { return b.bytes }

// Columns returns the block's columns in INSERT order (do not modify).
func (b *Block) Columns() []ColumnSchema { return b.cols }

// ColumnData returns column i as the slice clickhouse-go v2's
// batch.Column(i).Append takes:
//
//	Int8..Int64, UInt8..UInt64, Float32/64   []int8 ... []uint64, []float32, []float64
//	Decimal                                  []decimal.Decimal (shopspring)
//	String, FixedString(N)                   []string (FixedString zero-padded to N)
//	Date, Date32, DateTime64                 []time.Time (UTC)
//	DateTime                                 []int64 (unix seconds)
//	UUID                                     []uuid.UUID
//	Enum8, Enum16                            []int8, []int16 (element values)
//	Bool                                     []bool
//	IPv4                                     []uint32 (big-endian address number)
//	IPv6                                     [][16]byte
//	Nullable(T)                              []*T (nil is NULL)
//	LowCardinality(T)                        as T
//	Array(T)                                 [][]T (Array(Nullable(T)): [][]*T)
//	Map(K, V)                                []*MapRow
//	Int128, Int256, UInt128, UInt256         []big.Int
//	Tuple(...)                               [][]any (one element per tuple element)
//	Dynamic, Variant(...)                    []chcol.Dynamic / []chcol.Variant (typed)
//	JSON                                     []string (one JSON object text per row)
//
// Scalar slices alias the block's buffers: they are valid until the next
// Append or Reset. Nullable, Array, Map and Decimal build a new slice per call.
func (b *Block) ColumnData(i int) any { return b.bufs[i].data() }

// Reset empties the block, keeping buffer capacity. String memory is
// released to the GC rather than reused, so strings handed out before stay
// valid.
func (b *Block) Reset() {
	for _, c := range b.bufs {
		c.reset()
	}
	b.rows, b.bytes, b.arena = 0, 0, nil
}

// checkMapping verifies that cols has no duplicate and that every mapping key
// names an insertable column. role, when set, describes a source's special
// meaning for the error message (e.g. the Debezium version column).
func checkMapping(cols []ColumnSchema, mapping map[string]string, role func(source string) string) error {
	byName := make(map[string]ColumnSchema, len(cols))
	for _, c := range cols {
		if _, dup := byName[c.Name]; dup {
			return fmt.Errorf("column %q is listed twice", c.Name)
		}
		byName[c.Name] = c
	}
	mapped := make([]string, 0, len(mapping))
	for k := range mapping {
		mapped = append(mapped, k)
	}
	sort.Strings(mapped)
	for _, k := range mapped {
		what := ""
		if role != nil {
			what = role(mapping[k])
		}
		c, ok := byName[k]
		if !ok {
			return fmt.Errorf("mapping names column %q%s, which is not in the table", k, what)
		}
		if !insertable(c) {
			return fmt.Errorf("mapping names column %q%s, which is %s and cannot be inserted", k, what, c.DefaultKind)
		}
	}
	return nil
}

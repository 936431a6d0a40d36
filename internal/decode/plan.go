package decode

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/errtext"
	"sink/internal/route"
)

// InsertColumns returns the columns an INSERT into this table names, in
// table order: every column whose DefaultKind is "", every DEFAULT column
// whose expression the server computed once (ColumnSchema.Default, which a
// record without the field gets: see Compile), and DEFAULT (and EPHEMERAL)
// columns that some mapping names explicitly (a key of a Columns map).
// Every format reads a column by its name when no mapping names it, so a
// record that carries the field fills the column. A DEFAULT column whose
// expression cannot be computed once (UnfilledDefault says why) is left out
// unless mapped, so ClickHouse computes it; MATERIALIZED and ALIAS columns
// are never inserted.
//
// Pass the mappings of every route into the table, then Compile each route
// with the result so that all their Plans share one column layout.
func InsertColumns(table []chschema.ColumnSchema, mappings ...map[string]string) []chschema.ColumnSchema {
	var out []chschema.ColumnSchema
	for _, c := range table {
		switch c.DefaultKind {
		case "":
			out = append(out, c)
		case "DEFAULT", "EPHEMERAL":
			if v, _ := defaultFill(c); v != nil {
				out = append(out, c)
				break
			}
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

// defaultFill is the value a record without c's field inserts into c: its
// Default, parsed and checked once to convert to c's type (nil without
// one, or with an error saying why it cannot be used).
func defaultFill(c chschema.ColumnSchema) (*fastjson.Value, error) {
	if c.DefaultKind != "DEFAULT" || c.Default == "" {
		return nil, nil
	}
	t := parseType(c.Type)
	if t.unsupported() {
		return nil, fmt.Errorf("the sink cannot fill type %s", c.Type)
	}
	if err := driverCanCarry(c.Type, t); err != nil {
		return nil, err
	}
	v, err := fastjson.Parse(c.Default)
	if err != nil {
		return nil, fmt.Errorf("its value %s is not JSON: %v", cut([]byte(c.Default)), err)
	}
	b := &Block{bufs: []col{newTopCol(t)}}
	st := appendState{b: b}
	st.fromJSON(v, &st.in)
	if err := b.bufs[0].add(&st, &st.in); err != nil {
		return nil, fmt.Errorf("its value %s does not convert to %s: %v", cut([]byte(c.Default)), c.Type, err)
	}
	return v, nil
}

// UnfilledDefaults calls fn, in table order, for each DEFAULT column of
// schema that insert (InsertColumns' result) leaves out because its
// expression cannot be computed once, with UnfilledDefault's reason:
// records' values for it are not inserted, the server computes it.
func UnfilledDefaults(schema, insert []chschema.ColumnSchema, fn func(c chschema.ColumnSchema, why string)) {
	for _, c := range schema {
		why := UnfilledDefault(c)
		if why != "" && !slices.ContainsFunc(insert, func(i chschema.ColumnSchema) bool { return i.Name == c.Name }) {
			fn(c, why)
		}
	}
}

// UnfilledDefault says, for a DEFAULT column that InsertColumns leaves out
// unless a route maps it, why records' values for it are not inserted ("":
// they are, or c is not a DEFAULT column).
func UnfilledDefault(c chschema.ColumnSchema) string {
	if c.DefaultKind != "DEFAULT" {
		return ""
	}
	v, err := defaultFill(c)
	switch {
	case v != nil:
		return ""
	case err != nil:
		return "its default " + c.DefaultExpr + " cannot stand in for a missing value: " + err.Error()
	case c.DefaultWhy != "":
		return "its default " + c.DefaultExpr + " cannot be computed once: " + c.DefaultWhy
	}
	return "its default " + c.DefaultExpr + " was not computed"
}

// source is where one column's value comes from: a record attribute the
// Plan reads itself, or anything else, which the format reads.
type source struct {
	kind   route.Kind
	header string // route.Header: the header name
	format bool   // the format reads it (rowFormat.read)
	spec   string // the source as the route names it (the column's name when it names none)
}

// Plan is the compiled decoder of one route into one table: the columns,
// their types and sources, and the route's format. It owns the format's
// parsers and scratch space: use one Plan from one goroutine at a time.
type Plan struct {
	cols  []chschema.ColumnSchema
	types []*chType
	srcs  []source
	sig   string // column layout; Blocks of equal layout are interchangeable

	format rowFormat   // format.go
	json   *jsonFormat // the json or connect-json format, whose plain records' fields are read without an interface call; nil for other formats
	st     appendState // conversion scratch, shared with the format

	// fills: per column, the value a record without the field (or with
	// null, into a column that is not Nullable) inserts: the column's
	// DEFAULT computed once (defaultFill); nil when no column has one.
	fills []*fastjson.Value
	// holes is the format when its records may hold placeholder values
	// (placeholderFormat, cdc.go), else nil.
	holes placeholderFormat

	policy   Policy      // policy.go
	defaults [][2]uint64 // per column: defaults given for missing, null values
	unfilled unfilled    // unfilled.go: per column, rows the record gave no value
	marks    []mark      // defaults given in the row being appended (or last appended)
	// lastBytes is b.bytes before the last appended row (Unappend).
	lastBytes int

	drift drift // drift.go: fields no column reads

	oldKeys fastjson.Parser // a moved row's old key (unavailable.go)

	// hints size the buffers of a block's first fill (see capHint): rows,
	// the largest row capacity a column of this plan's blocks has grown
	// to, and per column the largest String byte buffer.
	hintsOnce sync.Once
	rowsHint  capHint
	sizes     []capHint
}

// Compile builds the plan for one route into one table. format is one of
// route's formats: route.JSON, route.Debezium (see debezium.go for what
// differs), or a registry-framed one, which needs WithRegistry.
//
// cols are the columns to fill, in INSERT order — normally
// InsertColumns(table, mappings of all routes into the table...). Every
// column listed is filled; MATERIALIZED and ALIAS columns are skipped.
//
// mapping: column -> source, where a source is a JSON path "a.b.c" (dots
// descend objects; a numeric step indexes an array) or one of $topic
// $partition $offset $timestamp $key $header.NAME (route.ParseSource has the
// grammar). A column not in mapping reads the top-level JSON field of the
// same name (the whole name, dots included), except columns named _topic
// _partition _offset _timestamp _key, which default to the matching $ source
// (route.DefaultSource).
//
// Errors name the column or mapping key: a mapping key that is not a column
// (or is MATERIALIZED/ALIAS), a malformed or unknown source, a $ source into
// an Array, Map, Tuple, Variant or JSON column, or a column type this
// package cannot fill (see the package documentation).
//
// Every format shares this loop: it checks each column's type, parses its
// source, reads record attributes itself and binds every other source to
// the format (rowFormat.bind).
func Compile(format route.Format, cols []chschema.ColumnSchema, mapping map[string]string, opts ...CompileOption) (*Plan, error) {
	var o compileOptions
	for _, opt := range opts {
		opt(&o)
	}
	p := &Plan{}
	f, err := newFormat(format, formatEnv{st: &p.st, pol: &p.policy, reg: o.reg, message: o.message})
	if err != nil {
		return nil, err
	}
	p.format = f
	if jf, ok := f.(*jsonFormat); ok {
		p.json = jf
	}
	p.holes, _ = f.(placeholderFormat)
	p.drift.bind(f)
	if err := checkMapping(cols, mapping, f.role); err != nil {
		return nil, err
	}

	var sig strings.Builder
	for _, c := range cols {
		if !insertable(c) {
			continue
		}
		t := parseType(c.Type)
		if t.unsupported() {
			return nil, fmt.Errorf("column %q has type %s which the %s format cannot fill", c.Name, c.Type, format)
		}
		if err := driverCanCarry(c.Type, t); err != nil {
			return nil, fmt.Errorf("column %q has type %s: %v", c.Name, c.Type, err)
		}
		spec, explicit := mapping[c.Name]
		if !explicit {
			spec, explicit = route.DefaultSource(format, c.Name)
		}
		// A column without a source reads the field of its own name:
		// the whole name, not a path.
		src := route.Source{Kind: route.Field, Path: []string{c.Name}}
		if explicit {
			if src, err = route.ParseSource(format, spec); err != nil {
				return nil, fmt.Errorf("column %q: %s", c.Name, sourceError(err.(*route.SourceError), f.want()))
			}
			if src.Kind != route.Field && src.Kind != route.SourceBlock && !t.scalar() {
				return nil, fmt.Errorf("column %q: source %s cannot fill type %s", c.Name, spec, c.Type)
			}
		}
		col := source{kind: src.Kind, header: src.Header, format: !src.Kind.Record(), spec: spec}
		if !explicit {
			col.spec = c.Name
		}
		if kr, ok := f.(keyReader); ok && src.Kind == route.Key {
			// The format reads the key (a registry-framed key).
			kr.bindKey(len(p.cols), c, t)
			col.format = true
		} else if col.format {
			if err := f.bind(len(p.cols), c, t, src, !explicit); err != nil {
				return nil, err
			}
		}
		if v, _ := defaultFill(c); v != nil {
			if p.fills == nil {
				p.fills = make([]*fastjson.Value, len(p.cols), len(cols))
			}
			p.fills = append(p.fills, v)
		} else if p.fills != nil {
			p.fills = append(p.fills, nil)
		}
		p.cols = append(p.cols, c)
		p.types = append(p.types, t)
		p.srcs = append(p.srcs, col)
		fmt.Fprintf(&sig, "%s\x00%s\x00", c.Name, c.Type)
	}
	if len(p.cols) == 0 {
		return nil, fmt.Errorf("no insertable columns")
	}
	if err := f.done(); err != nil {
		return nil, err
	}
	p.sig = sig.String()
	return p, nil
}

// sourceError words a source that does not parse as Compile reports it;
// want lists what the format accepts.
func sourceError(e *route.SourceError, want string) string {
	switch e.Problem {
	case route.Empty, route.EmptyPathElement:
		return fmt.Sprintf("invalid JSON path %q", e.Spec)
	case route.NoSourceField:
		return fmt.Sprintf("invalid source %q", e.Spec)
	case route.EnvelopeField:
		return e.Error()
	}
	return fmt.Sprintf("unknown source %q (want %s)", e.Spec, want)
}

func insertable(c chschema.ColumnSchema) bool {
	switch c.DefaultKind {
	case "", "DEFAULT", "EPHEMERAL":
		return true
	}
	return false
}

// Columns returns the columns the plan fills, in order.
func (p *Plan) Columns() []chschema.ColumnSchema {
	return append([]chschema.ColumnSchema(nil), p.cols...)
}

// NewBlock returns an empty block with one buffer per column.
func (p *Plan) NewBlock() *Block {
	p.hintsOnce.Do(func() { p.sizes = make([]capHint, len(p.types)) })
	b := &Block{cols: p.cols, sig: p.sig, bufs: make([]col, len(p.types)), unavail: unavailable{ver: -1, del: -1}}
	for i, t := range p.types {
		b.bufs[i] = newTopCol(t)
		if h, ok := b.bufs[i].(hinted); ok {
			h.useHints(&p.rowsHint, &p.sizes[i])
		}
	}
	return b
}

// capHint is the largest capacity a buffer of some kind has grown to in a
// plan's blocks, noted when the buffer grows (a rare event: append
// doubles, then grows by a quarter) and read when a block's buffer is
// first filled. A block created while another is sealed, or after a
// restart of the batch, then allocates its buffers once at the size the
// blocks before it reached, instead of growing them from empty through
// dozens of copies. Blocks are filled and reset on different goroutines:
// atomic; two racing notes may keep the smaller one, which only costs a
// growth later.
//
// Memory: Block.Bytes (what batch.buffer_memory counts) counts the bytes
// rows use, not capacity. A hinted buffer starts, at the block's first
// Append, at the largest capacity seen, which exceeds what a block of the
// same size counts by at most the last growth step (≈25% for large
// buffers: the slack a buffer grown from empty ends with anyway). A block
// sealed early (max_wait, or smaller batches after adaptive sizing
// shrank them) holds that capacity for fewer counted rows. Blocks are
// sealed at max_bytes at the latest, so a block's uncounted capacity stays
// below ≈1.25 × max_bytes, as it already did for a block reused from the
// pipeline's free list (reset keeps row capacity, strCol re-allocates its
// buffer at its last size).
type capHint struct{ n atomic.Int64 }

// note records that a buffer reached capacity n.
func (h *capHint) note(n int) {
	if h != nil && int64(n) > h.n.Load() {
		h.n.Store(int64(n))
	}
}

// get is the capacity to start a buffer at (0: no hint).
func (h *capHint) get() int {
	if h == nil {
		return 0
	}
	return int(h.n.Load())
}

// hinted is a top-level column buffer sized from its plan's hints: rows
// (shared by all columns) and bytes (this column's String bytes).
type hinted interface {
	useHints(rows, bytes *capHint)
}

// Append decodes r and appends exactly one row to b, or returns a
// *RecordError, an error matching ErrSkip (no row by design) or one
// matching ErrUnavailable (the schema registry cannot be asked now: append
// r again later), and leaves b unchanged. b may
// come from any Plan with the same Columns(); a block of another layout is a
// programming error and panics.
//
// A row that would hold more than the policy's MaxRowBytes decoded is a
// *RecordError. So is a panic while r is decoded (a bug the record
// exposes): it is recovered here, b is rolled back, and the error matches
// ErrPanic; the Plan goes on with the next record.
func (p *Plan) Append(b *Block, r *kgo.Record) (err error) {
	if b.sig != p.sig {
		panic("decode: Append to a Block whose columns differ from the Plan's")
	}
	rows, bytes := b.rows, b.bytes
	defer func() {
		if v := recover(); v != nil {
			err = p.recovered(b, r, rows, bytes, v)
		}
	}()
	if err := p.format.begin(recordData{value: r.Value, key: r.Key, offset: r.Offset, topic: r.Topic}); err != nil {
		if b, ok := err.(*badRecord); ok {
			e := recordError(r, b.column, b.reason)
			e.cause = b.cause
			return e
		}
		return err
	}
	return p.appendRow(b, r)
}

// ErrPanic matches (errors.Is) the *RecordError of a record whose decoding
// panicked: the record is bad as far as the pipeline goes (dead-lettered,
// or the connector stops), and its reason says where the sink failed.
var ErrPanic = errors.New("decoder panic")

// recovered rolls b back to rows and bytes after the panic v, clears the
// row's scratch, and returns r's bad-record error.
func (p *Plan) recovered(b *Block, r *kgo.Record, rows, bytes int, v any) error {
	reason := panicReason(v)
	for _, c := range b.bufs {
		c.truncate(rows)
	}
	b.unavail.drop(rows)
	b.rows, b.bytes = rows, bytes
	p.st.b, p.st.unavailable = nil, false
	p.marks = p.marks[:0]
	e := recordError(r, "", reason)
	e.cause = ErrPanic
	return e
}

// appendRow reads every column's source (from the record the format has
// begun, or the record's attributes) and appends one row to b; on the first
// failure it rolls every column back, so b is unchanged.
func (p *Plan) appendRow(b *Block, r *kgo.Record) error {
	c := &p.st
	c.b = b
	bytes0 := b.bytes
	maxRow := p.policy.rowBytes()
	in := &c.in
	p.marks = p.marks[:0]
	for i := range p.srcs {
		var err error
		if s := &p.srcs[i]; s.format {
			if p.json != nil && !p.json.wrapped {
				p.json.fields.read(c, i, in) // jsonFormat.read of a plain record, which never fails
			} else {
				err = p.format.read(i, in)
			}
		} else {
			readRecord(s, r, in)
		}
		switch {
		case err != nil:
		case c.unavailable:
			err = p.addUnavailable(b, r, i, in)
		default:
			if p.fills != nil {
				p.useFill(i, in)
			}
			if err = p.checkDefault(i, in); err == nil {
				err = b.bufs[i].add(c, in)
			}
		}
		if err != nil && p.holes != nil && p.holes.placeholder(i) {
			err = p.zeroPlaceholder(b, i)
		}
		if err == nil && b.bytes-bytes0 > maxRow {
			err = errRowBytes(maxRow)
		}
		if err != nil {
			p.rollback(b, i, bytes0)
			return recordError(r, p.cols[i].Name, err.Error())
		}
	}
	b.rows++
	c.b = nil
	p.lastBytes = bytes0
	p.countDefaults()
	p.noteUnmapped()
	return nil
}

// rollback takes back the row being appended to b, whose columns up to
// last got a value, to b's bytes before it.
func (p *Plan) rollback(b *Block, last, bytes int) {
	p.st.unavailable = false
	for j := 0; j <= last; j++ {
		b.bufs[j].truncate(b.rows)
	}
	b.unavail.drop(b.rows)
	b.bytes = bytes
	p.st.b = nil
}

// useFill makes in column i's DEFAULT when the record has no value for it
// (or null, for a column that is not Nullable) and the column has one, as
// ClickHouse gives a missing value: what the user asked for, not a
// default policed or counted.
func (p *Plan) useFill(i int, in *input) {
	if p.fills[i] != nil && (in.kind == inMissing || in.kind == inNull && !takesNull(p.types[i])) {
		p.st.fromJSON(p.fills[i], in)
	}
}

// addUnavailable appends column i's value that record r does not carry
// (unavailable.go) as the column's zero, noted for the pipeline to fill.
func (p *Plan) addUnavailable(b *Block, r *kgo.Record, i int, in *input) error {
	c := &p.st
	c.unavailable = false
	f := p.format.(filler)
	keys, err := f.fillKeys()
	if err == nil {
		ver, del := f.metaCols()
		b.unavail.note(Cell{Row: b.rows, Col: i}, keys, ver, del)
		if err = p.noteOldKey(b, r, keys); err == nil {
			in.kind = inMissing
			err = b.bufs[i].add(c, in)
		}
	}
	if err != nil {
		err = fmt.Errorf("%v (the value is Debezium's placeholder for an unchanged TOASTed value)", err)
	}
	return err
}

// Unappend takes back the row that the last successful Append added to b,
// with its counts of defaults and unmapped fields, as if the record had
// never been appended. The pipeline uses it for a record that must wait
// (LastUnmapped names a field a column is being added for). It is only
// valid right after that Append, on the same block.
func (p *Plan) Unappend(b *Block) {
	if b.rows == 0 {
		panic("decode: Unappend on an empty Block")
	}
	b.rows--
	for _, c := range b.bufs {
		c.truncate(b.rows)
	}
	b.unavail.drop(b.rows)
	b.bytes = p.lastBytes
	p.uncountDefaults()
	p.marks = p.marks[:0]
	p.drift.unnote()
}

// readRecord reads a source that is an attribute of the Kafka record.
func readRecord(s *source, r *kgo.Record, in *input) {
	switch s.kind {
	case route.Topic:
		in.kind, in.b = inStr, s2b(r.Topic)
	case route.Partition:
		in.kind, in.n = inInt, int64(r.Partition)
	case route.Offset:
		in.kind, in.n = inInt, r.Offset
	case route.Timestamp:
		// A record without a timestamp (zero time, or Kafka's -1) counts as missing.
		if ms := r.Timestamp.UnixMilli(); r.Timestamp.IsZero() || ms < 0 {
			in.kind = inMissing
		} else {
			in.kind, in.t, in.n = inTime, r.Timestamp, ms
		}
	case route.Key:
		if r.Key == nil {
			in.kind = inMissing
		} else {
			in.kind, in.b = inStr, r.Key
		}
	case route.Header:
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

// recordError is the error of a record r that cannot be decoded; column is
// "" for whole-record errors.
func recordError(r *kgo.Record, column, reason string) *RecordError {
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
	cause     error // ErrPanic for a recovered panic, else nil
}

// Unwrap is the error class behind the record's reason: ErrPanic, or nil.
func (e *RecordError) Unwrap() error { return e.cause }

// Error names the record first, then the reason, cut (errtext.Cap) so that
// the whole text fits errtext.Max with the record's coordinates whole (the
// reason keeps at least 128 bytes, should the names be that long).
func (e *RecordError) Error() string {
	var where string
	if e.Column == "" {
		where = fmt.Sprintf("decode topic %q partition %d offset %d: ", e.Topic, e.Partition, e.Offset)
	} else {
		where = fmt.Sprintf("decode topic %q partition %d offset %d: column %q: ", e.Topic, e.Partition, e.Offset, e.Column)
	}
	return where + errtext.Cap(e.Reason, max(errtext.Max-len(where), 128))
}

// Block is a batch of rows in typed column buffers. It is filled by one
// goroutine; once handed to the writer it is read-only until Reset.
type Block struct {
	cols  []chschema.ColumnSchema
	sig   string
	bufs  []col
	rows  int
	bytes int
	arena []byte // current string chunk

	unavail unavailable // values the records did not carry (unavailable.go)
}

// Rows returns the number of rows.
func (b *Block) Rows() int { return b.rows }

// Bytes returns the approximate heap bytes the row data holds (value widths,
// string contents, null flags, array offsets), maintained per Append, O(1).
func (b *Block) Bytes() int { return b.bytes }

// Columns returns the block's columns in INSERT order (do not modify).
func (b *Block) Columns() []chschema.ColumnSchema { return b.cols }

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
//	Map(K, V)                                []*chschema.MapRow
//	Int128, Int256, UInt128, UInt256         []big.Int
//	Tuple(...)                               [][]any (one element per tuple element)
//	Dynamic, Variant(...)                    []chcol.Dynamic / []chcol.Variant (typed)
//	JSON                                     []string (one JSON object text per row)
//
// Scalar slices alias the block's buffers: they are valid until the next
// Append or Reset. Nullable, Array, Map, Decimal and top-level String build
// a new slice per call. Block.Native is the copy-free form of the columns
// that have one.
func (b *Block) ColumnData(i int) any { return b.patched(i, b.bufs[i].data()) }

// Reset empties the block, keeping buffer capacity. String memory is
// released to the GC rather than reused, so strings handed out before stay
// valid.
func (b *Block) Reset() {
	for _, c := range b.bufs {
		c.reset()
	}
	b.rows, b.bytes, b.arena = 0, 0, nil
	b.unavail.reset()
}

// checkMapping verifies that cols has no duplicate and that every mapping key
// names an insertable column. role, when set, describes a source's special
// meaning for the error message (e.g. the Debezium version column).
func checkMapping(cols []chschema.ColumnSchema, mapping map[string]string, role func(source string) string) error {
	byName := make(map[string]chschema.ColumnSchema, len(cols))
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

package decode

import (
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/decode/drift"
	"sink/internal/decode/format"
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
			if v, _ := column.DefaultFill(c); v != nil {
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
	v, err := column.DefaultFill(c)
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
	cols   []chschema.ColumnSchema
	types  []*chtype.Type
	srcs   []source
	layout *column.Layout // the blocks' columns; blocks of equal layout are interchangeable

	format format.Reader // format.go
	json   *jsonFormat   // the json or connect-json format, whose plain records' fields are read without an interface call; nil for other formats
	st     column.State  // conversion scratch, shared with the format
	in     column.Value  // the value of the column being appended

	// fills: per column, the value a record without the field (or with
	// null, into a column that is not Nullable) inserts: the column's
	// DEFAULT computed once (defaultFill); nil when no column has one.
	fills []*fastjson.Value
	// holes is the format when its records may hold placeholder values
	// (placeholderFormat, cdc.go), else nil.
	holes format.PlaceholderReader

	policy   Policy        // policy.go
	rpol     format.Policy // the policy's part the format applies
	defaults [][2]uint64   // per column: defaults given for missing, null values
	unfilled unfilled      // unfilled.go: per column, rows the record gave no value
	marks    []mark        // defaults given in the row being appended (or last appended)
	// lastBytes is b.bytes before the last appended row (Unappend).
	lastBytes int

	drift drift.Counter // drift.go: fields no column reads

	oldKeys fastjson.Parser // a moved row's old key (unavailable.go)
}

// Compile builds the plan for one route into one table. rf is one of
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
func Compile(rf route.Format, cols []chschema.ColumnSchema, mapping map[string]string, opts ...CompileOption) (*Plan, error) {
	var o compileOptions
	for _, opt := range opts {
		opt(&o)
	}
	p := &Plan{}
	f, err := newFormat(rf, format.Env{State: &p.st, Policy: &p.rpol, Registry: o.reg, Message: o.message})
	if err != nil {
		return nil, err
	}
	p.format = f
	if jf, ok := f.(*jsonFormat); ok {
		p.json = jf
	}
	p.holes, _ = f.(format.PlaceholderReader)
	p.drift.Bind(f, nil)
	if err := checkMapping(cols, mapping, f.Role); err != nil {
		return nil, err
	}

	for _, c := range cols {
		if !insertable(c) {
			continue
		}
		t := chtype.Parse(c.Type)
		if t.Unsupported() {
			return nil, fmt.Errorf("column %q has type %s which the %s format cannot fill", c.Name, c.Type, rf)
		}
		if err := column.CheckDriver(c.Type, t); err != nil {
			return nil, fmt.Errorf("column %q has type %s: %v", c.Name, c.Type, err)
		}
		spec, explicit := mapping[c.Name]
		if !explicit {
			spec, explicit = route.DefaultSource(rf, c.Name)
		}
		// A column without a source reads the field of its own name:
		// the whole name, not a path.
		src := route.Source{Kind: route.Field, Path: []string{c.Name}}
		if explicit {
			if src, err = route.ParseSource(rf, spec); err != nil {
				return nil, fmt.Errorf("column %q: %s", c.Name, sourceError(err.(*route.SourceError), f.Want()))
			}
			if src.Kind != route.Field && src.Kind != route.SourceBlock && !t.Scalar() {
				return nil, fmt.Errorf("column %q: source %s cannot fill type %s", c.Name, spec, c.Type)
			}
		}
		col := source{kind: src.Kind, header: src.Header, format: !src.Kind.Record(), spec: spec}
		if !explicit {
			col.spec = c.Name
		}
		if kr, ok := f.(format.KeyReader); ok && src.Kind == route.Key {
			// The format reads the key (a registry-framed key).
			kr.BindKey(len(p.cols), c, t)
			col.format = true
		} else if col.format {
			if err := f.Bind(len(p.cols), c, t, src, !explicit); err != nil {
				return nil, err
			}
		}
		if v, _ := column.DefaultFill(c); v != nil {
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
	}
	if len(p.cols) == 0 {
		return nil, fmt.Errorf("no insertable columns")
	}
	if err := f.Done(); err != nil {
		return nil, err
	}
	p.layout = column.NewLayout(p.cols, p.types)
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
func (p *Plan) NewBlock() *column.Block { return p.layout.NewBlock() }

// NewShardedBlock returns an empty block whose rows Append places on the
// shards placer names by the value of column key (a cluster's sharding
// key), each shard's rows in a part of their own
// (column.Layout.NewShardedBlock). It is a plain block (NewBlock) when the
// plan fills no column key, or its type cannot be a sharding key.
func (p *Plan) NewShardedBlock(key string, placer chschema.Placer) *column.Block {
	for i, c := range p.cols {
		if c.Name == key {
			return p.layout.NewShardedBlock(i, placer)
		}
	}
	return p.layout.NewBlock()
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
func (p *Plan) Append(b *column.Block, r *kgo.Record) (err error) {
	if !p.layout.Fits(b) {
		panic("decode: Append to a Block whose columns differ from the Plan's")
	}
	// dst is the block the row goes to: b, or the part of a sharded b
	// its key places it in.
	dst := b
	rows, bytes := b.Rows(), b.Bytes()
	defer func() {
		if v := recover(); v != nil {
			err = p.recovered(dst, r, rows, bytes, v)
		}
	}()
	if err := p.format.Begin(format.Record{Value: r.Value, Key: r.Key, Offset: r.Offset, Topic: r.Topic}); err != nil {
		if b, ok := err.(*format.BadRecord); ok {
			e := recordError(r, b.Column, b.Reason)
			e.cause = b.Cause
			return e
		}
		return err
	}
	if b.Sharded() {
		dst = p.part(b, r)
		rows, bytes = dst.Rows(), dst.Bytes()
	}
	if err := p.appendRow(dst, r); err != nil {
		return err
	}
	b.Landed(dst)
	return nil
}

// part is the part of the sharded block b that the record the format has
// begun goes to, by its sharding key's value as the row will hold it (the
// column's DEFAULT for a missing value). A key the record does not carry
// or that does not read places the row as a missing value would; the
// row's own append then reports what is wrong with it.
func (p *Plan) part(b *column.Block, r *kgo.Record) *column.Block {
	k := b.KeyColumn()
	in := &p.in
	if err := p.readColumn(k, r, in); err != nil {
		*in = column.Value{Kind: column.Missing}
	}
	if p.fills != nil {
		p.useFill(k, in)
	}
	return b.PartFor(&p.st, in)
}

// readColumn sets in to column i's value: read by the format from the
// record it has begun, or an attribute of r.
func (p *Plan) readColumn(i int, r *kgo.Record, in *column.Value) error {
	s := &p.srcs[i]
	if !s.format {
		readRecord(s, r, in)
		return nil
	}
	if p.json != nil && p.json.plain() {
		p.json.readField(i, in) // the json format's Read of a plain record, which never fails
		return nil
	}
	return p.format.Read(i, in)
}

// recovered rolls b back to rows and bytes after the panic v, clears the
// row's scratch, and returns r's bad-record error.
func (p *Plan) recovered(b *column.Block, r *kgo.Record, rows, bytes int, v any) error {
	reason := format.PanicReason(v)
	b.Restore(rows, bytes)
	p.st.End()
	p.marks = p.marks[:0]
	e := recordError(r, "", reason)
	e.cause = format.ErrPanic
	return e
}

// appendRow reads every column's source (from the record the format has
// begun, or the record's attributes) and appends one row to b; on the first
// failure it rolls every column back, so b is unchanged.
func (p *Plan) appendRow(b *column.Block, r *kgo.Record) error {
	c := &p.st
	c.Begin(b)
	bytes0 := b.Bytes()
	maxRow := p.rpol.RowBytes()
	in := &p.in
	p.marks = p.marks[:0]
	for i := range p.srcs {
		err := p.readColumn(i, r, in)
		switch {
		case err == format.ErrNotCarried:
			err = p.addUnavailable(b, r, i, in)
		case err != nil:
		default:
			if p.fills != nil {
				p.useFill(i, in)
			}
			if err = p.checkDefault(i, in); err == nil {
				err = b.Add(c, i, in)
			}
		}
		if err != nil && p.holes != nil && p.holes.Placeholder(i) {
			err = p.zeroPlaceholder(b, i)
		}
		if err == nil && b.Bytes()-bytes0 > maxRow {
			err = errRowBytes(maxRow)
		}
		if err != nil {
			p.rollback(b, i, bytes0)
			return recordError(r, p.cols[i].Name, err.Error())
		}
	}
	b.EndRow()
	c.End()
	p.lastBytes = bytes0
	p.countDefaults()
	p.drift.Note()
	return nil
}

// rollback takes back the row being appended to b, whose columns up to
// last got a value, to b's bytes before it.
func (p *Plan) rollback(b *column.Block, last, bytes int) {
	b.Rollback(last, bytes)
	p.st.End()
}

// useFill makes in column i's DEFAULT when the record has no value for it
// (or null, for a column that is not Nullable) and the column has one, as
// ClickHouse gives a missing value: what the user asked for, not a
// default policed or counted.
func (p *Plan) useFill(i int, in *column.Value) {
	if p.fills[i] != nil && (in.Kind == column.Missing || in.Kind == column.Null && !p.types[i].TakesNull()) {
		p.st.FromJSON(p.fills[i], in)
	}
}

// addUnavailable appends column i's value that record r does not carry
// (unavailable.go) as the column's zero, noted for the pipeline to fill.
func (p *Plan) addUnavailable(b *column.Block, r *kgo.Record, i int, in *column.Value) error {
	f := p.format.(format.Filler)
	keys, err := f.FillKeys()
	if err == nil {
		ver, del := f.MetaCols()
		b.NoteUnfilled(i, keys, ver, del)
		if err = p.noteOldKey(b, r, keys); err == nil {
			in.Kind = column.Missing
			err = b.Add(&p.st, i, in)
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
func (p *Plan) Unappend(b *column.Block) {
	if b.Rows() == 0 {
		panic("decode: Unappend on an empty Block")
	}
	b.Unappend(p.lastBytes)
	p.uncountDefaults()
	p.marks = p.marks[:0]
	p.drift.Unnote()
}

// readRecord reads a source that is an attribute of the Kafka record.
func readRecord(s *source, r *kgo.Record, in *column.Value) {
	switch s.kind {
	case route.Topic:
		in.Kind, in.Bytes = column.String, column.S2B(r.Topic)
	case route.Partition:
		in.Kind, in.Int = column.Integer, int64(r.Partition)
	case route.Offset:
		in.Kind, in.Int = column.Integer, r.Offset
	case route.Timestamp:
		// A record without a timestamp (zero time, or Kafka's -1) counts as missing.
		if ms := r.Timestamp.UnixMilli(); r.Timestamp.IsZero() || ms < 0 {
			in.Kind = column.Missing
		} else {
			in.Kind, in.Time, in.Int = column.Instant, r.Timestamp, ms
		}
	case route.Key:
		if r.Key == nil {
			in.Kind = column.Missing
		} else {
			in.Kind, in.Bytes = column.String, r.Key
		}
	case route.Header:
		in.Kind = column.Missing
		for i := range r.Headers {
			if r.Headers[i].Key == s.header {
				if r.Headers[i].Value == nil {
					in.Kind = column.Null
				} else {
					in.Kind, in.Bytes = column.String, r.Headers[i].Value
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

// zeroPlaceholder gives column i of the row being appended to b its type's
// default (NULL in a Nullable column), after its placeholder failed.
func (p *Plan) zeroPlaceholder(b *column.Block, i int) error {
	b.Drop(i) // what the failed add wrote, if anything
	in := &p.in
	*in = column.Value{Kind: column.Missing}
	return b.Add(&p.st, i, in)
}

// errRowBytes is the reason of a row past its bound.
func errRowBytes(max int) error {
	return column.Reasonf("the row would hold more than %d bytes decoded (batch.max_bytes)", max)
}

// LastUnmapped returns the unmapped fields of the record that the last
// successful Append added (nil when it had none); a nil entry is a field
// beyond MaxUnmappedFields. The slice is the Plan's: valid until the next
// Append, not to be modified.
func (p *Plan) LastUnmapped() []*drift.UnmappedField { return p.drift.Record() }

// TakeUnmapped calls fn for every unmapped field seen since the last call
// (records that failed to decode are not counted) and resets the counts;
// overflow is the records' fields beyond MaxUnmappedFields. fn must not
// keep the pointer.
func (p *Plan) TakeUnmapped(fn func(f *drift.UnmappedField), overflow func(n uint64)) {
	p.drift.Take(fn, overflow)
}

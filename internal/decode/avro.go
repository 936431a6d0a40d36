package decode

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/valyala/fastjson"

	"sink/internal/registry"
	"sink/internal/route"
)

// avroFormat is the avro route format (route.Avro): each record value is a
// registry-framed Avro datum (magic byte 0, the 4-byte schema id, the
// binary encoding of one record of the registered schema).
//
// The writer's schema comes from the registry by id on the first record
// that names it, and is compiled, for this Plan's columns, into a program
// (avroProgram): one step per field of the writer's record, in the order
// the binary encoding has them, that reads the field into the columns that
// want it or skips it. The bytes are read with hamba/avro's Reader; strings
// are copied into a per-record arena, so a steady stream does not allocate.
// A new schema id (the producer added an optional field) is compiled when
// first seen, without a restart; a field the record's schema lacks is a
// missing value (errors.on_missing decides).
//
// Columns read fields: a column without a mapping reads the top-level field
// of its name (a name with dots is a path: Avro names have no dots), a
// mapping gives a path: "a.b" descends records (through unions with null,
// whose null makes every column below it NULL); a path into an array or map
// ("items.0.sku", "attrs.color") and a whole record, array, map or
// duration read the value as JSON (records are objects, arrays arrays, maps
// objects), which fills Tuple, Map, Array and JSON columns, and String
// columns with the compact text. Avro types reach columns as:
//
//	boolean                        true/false
//	int, long                      the integer
//	float, double                  the number (NaN and ±Inf as the strings)
//	string, enum                   the text (enum: the symbol)
//	bytes, fixed                   the bytes, as a string
//	decimal (bytes or fixed)       the exact decimal (Decimal(P, S) rejects more than S places)
//	uuid (string or fixed 16)      the UUID text
//	date                           the day (Date, Date32; DateTime columns: midnight UTC)
//	timestamp-millis/micros/nanos  the instant, exact (DateTime, DateTime64(p))
//	local-timestamp-*              the wall time, in the column's time zone (UTC if none)
//	time-millis/micros             the integer (ms or µs since midnight)
//	duration                       {"months", "days", "milliseconds"}
//	union with null                the value, or NULL (Nullable columns; others get the default)
//	other unions                   the branch's value: only into Variant, Dynamic or JSON columns
//
// Numeric columns given a date or timestamp get the integer as written
// (days, ms, µs or ns). In JSON (nested values), dates are "YYYY-MM-DD",
// timestamps RFC 3339 text in UTC, local timestamps zone-less text.
type avroFormat struct {
	st      *appendState
	policy  *Policy
	binds   []avroBind // per slot (for the avro format: per Plan column); path nil for slots not read here
	readers *schemaReaders[*avroProgram]
	// whole: the schema's value as a whole fills the slots (a record key,
	// which may be of any type), rather than fields of a record.
	whole bool
	// image names the top-level field whose record's fields are the row
	// (a Debezium envelope's "after"), for schema drift; "" for the
	// top-level record's own fields.
	image string
	// key reads the record key for $key columns (keyCols), nil if none.
	key     *avroFormat
	keyCols []bool

	rd   *avro.Reader
	prog *avroProgram // the current record's schema's program

	// per record
	vals  []input           // per Plan column: the value begin read
	jv    []*fastjson.Value // per Plan column read as JSON: its value (converted in read)
	arena []byte            // the record's strings and number texts
	items int               // array and map items read, bounded by maxAvroItems
	size  int               // the payload's length, which bounds any length in it
	dec   decimals
}

// avroBind is what a slot reads.
type avroBind struct {
	path []string
	name string // the column, for errors
	t    *chType
	// present: the slot only says whether the record at path is there
	// (inTrue) or null (inNull), e.g. a Debezium event's after image.
	present bool
}

func newAvroFormat(env formatEnv) *avroFormat {
	f := &avroFormat{st: env.st, policy: env.pol, rd: avro.NewReader(nil, 0)}
	f.readers = newSchemaReaders(env.reg, f.compileSchema)
	return f
}

// newAvroKey returns the reader of registry-framed keys for env.
func newAvroKey(env formatEnv) *avroFormat {
	k := newAvroFormat(env)
	k.whole = true
	return k
}

// bindKey makes $key column col read the key: a registry-framed key is
// decoded with its schema (a record key becomes a JSON object), any other
// key is its bytes as text.
func (f *avroFormat) bindKey(col int, c ColumnSchema, t *chType) {
	if f.key == nil {
		f.key = newAvroKey(formatEnv{st: f.st, pol: f.policy, reg: f.readers.reg})
	}
	f.key.setSlot(col, avroBind{path: []string{}, name: c.Name, t: t})
	for len(f.keyCols) <= col {
		f.keyCols = append(f.keyCols, false)
	}
	f.keyCols[col] = true
}

// setSlot sets what slot i reads.
func (f *avroFormat) setSlot(i int, b avroBind) {
	for len(f.binds) <= i {
		f.binds = append(f.binds, avroBind{})
	}
	f.binds[i] = b
}

func (*avroFormat) role(string) string { return "" }

func (*avroFormat) want() string {
	return "a field path such as a.b or " + strings.Join(route.RecordSources(), ", ") + ", " + route.HeaderPrefix + "NAME"
}

func (f *avroFormat) bind(col int, c ColumnSchema, t *chType, src route.Source, byName bool) error {
	path := src.Path
	if byName {
		// Avro names have no dots, so a column named "a.b" can only mean
		// the path.
		path = strings.Split(c.Name, ".")
		for _, p := range path {
			if p == "" {
				path = src.Path
				break
			}
		}
	}
	f.setSlot(col, avroBind{path: path, name: c.Name, t: t})
	return nil
}

func (f *avroFormat) done() error {
	f.sized()
	if f.key != nil {
		f.key.sized()
	}
	return nil
}

// sized allocates the per-record values; call it after the last slot is set.
func (f *avroFormat) sized() {
	f.vals = make([]input, len(f.binds))
	f.jv = make([]*fastjson.Value, len(f.binds))
}

func (*avroFormat) lenient() bool { return false }

func (f *avroFormat) begin(r recordData) error {
	if r.value == nil {
		if f.policy.TombstoneBad {
			return bad("", "tombstone (null value) and errors.on_tombstone is bad_record")
		}
		return errTombstone
	}
	if err := f.decodeFramed(r.value); err != nil {
		return err
	}
	if f.key != nil {
		return f.key.decodeKey(r.key)
	}
	return nil
}

// decodeFramed decodes a registry-framed value into the slots.
func (f *avroFormat) decodeFramed(value []byte) error {
	id, payload, err := frameID(value)
	if err != nil {
		return err
	}
	prog, err := f.readers.get(id)
	if err != nil {
		return err
	}
	return f.decode(prog, payload)
}

// decodeKey decodes a record key into the slots: registry-framed (magic
// byte 0 and a schema id) with its schema, otherwise its bytes as text, and
// a missing key as missing.
func (f *avroFormat) decodeKey(key []byte) error {
	if len(key) < 5 || key[0] != 0 {
		for i, b := range f.binds {
			if b.path == nil {
				continue
			}
			f.jv[i] = nil
			f.vals[i] = input{kind: inMissing}
			if key != nil {
				f.vals[i] = input{kind: inStr, b: key}
			}
		}
		return nil
	}
	err := f.decodeFramed(key)
	if br, ok := err.(*badRecord); ok {
		br.reason = "record key: " + br.reason
	}
	return err
}

// decode runs prog over payload into f.vals.
func (f *avroFormat) decode(prog *avroProgram, payload []byte) error {
	f.prog = prog
	for i := range f.binds {
		f.vals[i].kind = inMissing
		f.jv[i] = nil
	}
	f.arena = f.arena[:0]
	f.items = 0
	f.size = len(payload)
	rd := f.rd.Reset(payload)
	rd.Error = nil
	if err := f.run(prog, prog.root, 0); err != nil {
		return bad("", "invalid Avro for schema id "+strconv.Itoa(prog.id)+": "+err.Error())
	}
	if rd.Error != nil {
		return bad("", "invalid Avro for schema id "+strconv.Itoa(prog.id)+": "+avroErr(rd.Error))
	}
	if rd.Peek(); rd.Error == nil {
		return bad("", "invalid Avro for schema id "+strconv.Itoa(prog.id)+": bytes left after the record (is it written with another schema?)")
	}
	return nil
}

func avroErr(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "the record ends early"
	}
	return err.Error()
}

func (f *avroFormat) read(col int, in *input) error {
	if col < len(f.keyCols) && f.keyCols[col] {
		return f.key.slot(col, in)
	}
	return f.slot(col, in)
}

// slot sets in to slot i's value in the record decoded last.
func (f *avroFormat) slot(i int, in *input) error {
	if v := f.jv[i]; v != nil {
		f.st.fromJSON(v, in)
		return nil
	}
	*in = f.vals[i]
	return nil
}

// avroProgram is one writer schema compiled for one Plan's columns.
type avroProgram struct {
	id   int
	root []avroOp // the top-level record's fields, in encoding order
	json []avroJSONSlot
	// unmapped: the top-level fields no column reads (schema drift).
	unmapped knownUnmapped
}

// avroJSONSlot is a value read as JSON: the columns that read it, each at
// a path below it.
type avroJSONSlot struct {
	parser fastjson.Parser
	cols   []int
	paths  [][]string
	buf    []byte
}

type avroOpKind uint8

const (
	opSkip   avroOpKind = iota // read past the value
	opNull                     // a null: the columns get NULL
	opLeaf                     // a scalar: the columns get it
	opRecord                   // a record: its fields' steps
	opUnion                    // a union: the branch's step
	opJSON                     // a complex value: read as JSON into a slot
)

// leafKind is how a scalar is read.
type leafKind uint8

const (
	leafBool leafKind = iota
	leafInt
	leafLong
	leafFloat
	leafDouble
	leafString
	leafBytes
	leafFixed
	leafEnum
	leafDecimalBytes
	leafDecimalFixed
	leafUUIDFixed
	leafDate
	leafTsMillis
	leafTsMicros
	leafTsNanos
	leafLocalMillis
	leafLocalMicros
	leafLocalNanos
)

// avroOp is one step of a program.
type avroOp struct {
	kind     avroOpKind
	schema   avro.Schema // opSkip, opJSON: the value's schema
	leaf     leafKind
	scale    int      // decimal
	size     int      // fixed
	symbols  []string // enum
	cols     []int    // opNull, opLeaf: the columns set
	locs     []*time.Location
	fields   []avroOp // opRecord
	branches []avroOp // opUnion
	slot     int      // opJSON
}

// bindReq is a column to place below a schema node: the rest of its path.
type bindReq struct {
	col  int
	rest []string
}

// compileSchema builds the program of a registry schema for the bound
// columns. Its errors name the column.
func (f *avroFormat) compileSchema(s *registry.Schema) (*avroProgram, error) {
	sch, err := parseAvroSchema(s)
	if err != nil {
		return nil, err
	}
	prog := &avroProgram{id: s.ID}
	var reqs []bindReq
	for col, b := range f.binds {
		if b.path != nil {
			reqs = append(reqs, bindReq{col: col, rest: b.path})
		}
	}
	c := avroCompiler{f: f, prog: prog}
	if f.whole {
		op, err := c.value(sch, reqs)
		if err != nil {
			return nil, err
		}
		prog.root = []avroOp{op}
		return prog, nil
	}
	rs, ok := resolveRef(sch).(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("schema id %d is an Avro %s, not a record", s.ID, sch.Type())
	}
	if prog.root, err = c.record(rs, reqs); err != nil {
		return nil, err
	}
	prog.unmapped.fields = skippedFields(rs, prog.root, f.image)
	return prog, nil
}

// skippedFields lists the fields of record rs that ops (its compiled
// fields) skip: the fields no column reads. With image set, it lists those
// of the record in rs's field image instead (a record, or a union of null
// and a record).
func skippedFields(rs *avro.RecordSchema, ops []avroOp, image string) []schemaField {
	var out []schemaField
	for i, fld := range rs.Fields() {
		if image == "" {
			if ops[i].kind == opSkip {
				out = append(out, schemaField{name: fld.Name(), typ: avroSchemaType(fld.Type(), 0)})
			}
			continue
		}
		if fld.Name() != image {
			continue
		}
		sch, op := resolveRef(fld.Type()), ops[i]
		if u, ok := sch.(*avro.UnionSchema); ok && op.kind == opUnion {
			for j, b := range u.Types() {
				if op.branches[j].kind == opRecord {
					sch, op = resolveRef(b), op.branches[j]
					break
				}
			}
		}
		if inner, ok := sch.(*avro.RecordSchema); ok && op.kind == opRecord {
			return skippedFields(inner, op.fields, "")
		}
		return nil
	}
	return out
}

// unmappedFields returns the unmapped fields of the schema of the record
// decoded last (drift.go).
func (f *avroFormat) unmappedFields() *knownUnmapped {
	if f.prog == nil {
		return nil
	}
	return &f.prog.unmapped
}

// parseAvroSchema parses a registry schema with the named types it
// references.
func parseAvroSchema(s *registry.Schema) (avro.Schema, error) {
	if s.Type != sr.TypeAvro {
		return nil, fmt.Errorf("schema id %d is a %s schema, not Avro", s.ID, s.Type)
	}
	cache := &avro.SchemaCache{}
	for _, ref := range s.References {
		if _, err := avro.ParseWithCache(ref.Text, "", cache); err != nil {
			return nil, fmt.Errorf("schema id %d: reference %q: %v", s.ID, ref.Name, err)
		}
	}
	sch, err := avro.ParseWithCache(s.Text, "", cache)
	if err != nil {
		return nil, fmt.Errorf("schema id %d is not a valid Avro schema: %v", s.ID, err)
	}
	return sch, nil
}

func resolveRef(s avro.Schema) avro.Schema {
	for {
		r, ok := s.(*avro.RefSchema)
		if !ok {
			return s
		}
		s = r.Schema()
	}
}

type avroCompiler struct {
	f    *avroFormat
	prog *avroProgram
}

// record compiles a record's fields for the columns below it.
func (c *avroCompiler) record(rs *avro.RecordSchema, reqs []bindReq) ([]avroOp, error) {
	ops := make([]avroOp, len(rs.Fields()))
	for i, fld := range rs.Fields() {
		var mine []bindReq
		for _, r := range reqs {
			if r.rest[0] == fld.Name() {
				mine = append(mine, bindReq{col: r.col, rest: r.rest[1:]})
			}
		}
		if len(mine) == 0 {
			ops[i] = avroOp{kind: opSkip, schema: fld.Type()}
			continue
		}
		op, err := c.value(fld.Type(), mine)
		if err != nil {
			return nil, err
		}
		ops[i] = op
	}
	return ops, nil
}

// value compiles one value of schema s for the columns below it.
func (c *avroCompiler) value(s avro.Schema, reqs []bindReq) (avroOp, error) {
	s = resolveRef(s)
	var whole, deeper bool
	var marks []int // presence slots of a record here
	for _, r := range reqs {
		switch {
		case len(r.rest) > 0:
			deeper = true
		case c.f.binds[r.col].present:
			marks = append(marks, r.col)
		default:
			whole = true
		}
	}
	switch t := s.(type) {
	case *avro.UnionSchema:
		return c.union(t, reqs)
	case *avro.RecordSchema:
		if whole {
			return c.json(s, reqs), nil
		}
		var below []bindReq
		for _, r := range reqs {
			if len(r.rest) > 0 {
				below = append(below, r)
			}
		}
		fields, err := c.record(t, below)
		return avroOp{kind: opRecord, fields: fields, cols: marks}, err
	case *avro.ArraySchema, *avro.MapSchema:
		return c.json(s, reqs), nil
	}
	if deeper {
		for _, r := range reqs {
			if len(r.rest) > 0 {
				b := c.f.binds[r.col]
				return avroOp{}, bad(b.name, fmt.Sprintf("path %s: %s is an Avro %s, not a record, array or map",
					strings.Join(b.path, "."), strings.Join(b.path[:len(b.path)-len(r.rest)], "."), s.Type()))
			}
		}
	}
	if s.Type() == avro.Null {
		return avroOp{kind: opNull, cols: colsOf(reqs)}, nil
	}
	if isDuration(s) {
		return c.json(s, reqs), nil
	}
	op, err := scalarOp(s)
	if err != nil {
		return avroOp{}, err
	}
	op.cols = colsOf(reqs)
	op.locs = make([]*time.Location, len(op.cols))
	for i, col := range op.cols {
		op.locs[i] = columnLoc(c.f.binds[col].t)
	}
	return op, nil
}

// scalarOp is the leaf step of a scalar schema, without columns.
func scalarOp(s avro.Schema) (avroOp, error) {
	op := avroOp{kind: opLeaf}
	lt := logicalType(s)
	switch t := s.(type) {
	case *avro.EnumSchema:
		op.leaf, op.symbols = leafEnum, t.Symbols()
	case *avro.FixedSchema:
		op.leaf, op.size = leafFixed, t.Size()
		switch lt {
		case string(avro.Decimal):
			op.leaf, op.scale = leafDecimalFixed, t.Logical().(*avro.DecimalLogicalSchema).Scale()
		case string(avro.UUID):
			if t.Size() == 16 {
				op.leaf = leafUUIDFixed
			}
		}
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Boolean:
			op.leaf = leafBool
		case avro.Int:
			op.leaf = leafInt
			if lt == string(avro.Date) {
				op.leaf = leafDate
			}
		case avro.Long:
			op.leaf = leafLong
			switch lt {
			case string(avro.TimestampMillis):
				op.leaf = leafTsMillis
			case string(avro.TimestampMicros):
				op.leaf = leafTsMicros
			case "timestamp-nanos":
				op.leaf = leafTsNanos
			case string(avro.LocalTimestampMillis):
				op.leaf = leafLocalMillis
			case string(avro.LocalTimestampMicros):
				op.leaf = leafLocalMicros
			case "local-timestamp-nanos":
				op.leaf = leafLocalNanos
			}
		case avro.Float:
			op.leaf = leafFloat
		case avro.Double:
			op.leaf = leafDouble
		case avro.String:
			op.leaf = leafString
		case avro.Bytes:
			op.leaf = leafBytes
			if lt == string(avro.Decimal) {
				op.leaf, op.scale = leafDecimalBytes, t.Logical().(*avro.DecimalLogicalSchema).Scale()
			}
		default:
			return avroOp{}, fmt.Errorf("unsupported Avro type %s", t.Type())
		}
	default:
		return avroOp{}, fmt.Errorf("unsupported Avro type %s", s.Type())
	}
	return op, nil
}

// union compiles a union: each branch for the same columns. A union with
// more than one non-null branch can only fill Variant, Dynamic, JSON and
// String columns, which take whichever value comes.
func (c *avroCompiler) union(u *avro.UnionSchema, reqs []bindReq) (avroOp, error) {
	nonNull := 0
	for _, b := range u.Types() {
		if b.Type() != avro.Null {
			nonNull++
		}
	}
	if nonNull > 1 {
		for _, r := range reqs {
			if len(r.rest) > 0 {
				continue
			}
			b := c.f.binds[r.col]
			if !takesAnyType(b.t) {
				return avroOp{}, bad(b.name, fmt.Sprintf("field %s is the Avro union %s, which fills only a Variant (ClickHouse 26.9), Dynamic, JSON or String column, not %s",
					strings.Join(b.path, "."), u.String(), b.t.str))
			}
		}
	}
	op := avroOp{kind: opUnion, branches: make([]avroOp, len(u.Types()))}
	for i, b := range u.Types() {
		if b.Type() == avro.Null {
			op.branches[i] = avroOp{kind: opNull, cols: colsOf(reqs)}
			continue
		}
		br, err := c.value(b, reqs)
		if err != nil {
			return avroOp{}, err
		}
		op.branches[i] = br
	}
	return op, nil
}

// takesAnyType reports whether a column of type t takes values of
// different types: Variant, Dynamic, JSON and String.
func takesAnyType(t *chType) bool {
	switch t.base().kind {
	case kVariant, kDynamic, kJSON, kString:
		return true
	}
	return false
}

// json compiles a value read as JSON for the columns below it.
func (c *avroCompiler) json(s avro.Schema, reqs []bindReq) avroOp {
	slot := avroJSONSlot{}
	for _, r := range reqs {
		slot.cols = append(slot.cols, r.col)
		slot.paths = append(slot.paths, r.rest)
	}
	c.prog.json = append(c.prog.json, slot)
	return avroOp{kind: opJSON, schema: s, slot: len(c.prog.json) - 1}
}

func colsOf(reqs []bindReq) []int {
	out := make([]int, len(reqs))
	for i, r := range reqs {
		out[i] = r.col
	}
	return out
}

// columnLoc is the time zone of a DateTime or DateTime64 column (nil: UTC).
func columnLoc(t *chType) *time.Location {
	return t.base().loc
}

// logicalType is s's logical type: what hamba/avro knows, or the raw
// property (timestamp-nanos, local-timestamp-nanos are newer than it), or
// the logical type a Kafka Connect semantic type (connect.name) that has
// none stands for: Debezium's dates and timestamps.
func logicalType(s avro.Schema) string {
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		return string(l.Logical().Type())
	}
	p, ok := s.(interface{ Prop(string) any })
	if !ok {
		return ""
	}
	if lt, ok := p.Prop("logicalType").(string); ok {
		return lt
	}
	if name, ok := p.Prop("connect.name").(string); ok {
		return connectLogical[name]
	}
	return ""
}

// connectLogical maps the Kafka Connect semantic types that Debezium's
// Avro schemas carry without a logicalType to the Avro logical type of the
// same meaning.
var connectLogical = map[string]string{
	"io.debezium.time.Date":           string(avro.Date),
	"io.debezium.time.Timestamp":      string(avro.TimestampMillis),
	"io.debezium.time.MicroTimestamp": string(avro.TimestampMicros),
	"io.debezium.time.NanoTimestamp":  "timestamp-nanos",
}

func isDuration(s avro.Schema) bool {
	fx, ok := s.(*avro.FixedSchema)
	return ok && fx.Size() == 12 && logicalType(s) == string(avro.Duration)
}

// maxAvroItems bounds the array and map items one record may hold, so a
// hostile block count of zero-width items (nulls) cannot spin; maxAvroDepth
// bounds nesting (recursive schemas).
const (
	maxAvroItems = 1 << 20
	maxAvroDepth = 128
)

// run executes ops (a record's fields) against the reader.
func (f *avroFormat) run(prog *avroProgram, ops []avroOp, depth int) error {
	if depth > maxAvroDepth {
		return errors.New("records nest deeper than " + strconv.Itoa(maxAvroDepth))
	}
	rd := f.rd
	for i := range ops {
		if rd.Error != nil {
			return nil
		}
		if err := f.step(prog, &ops[i], depth); err != nil {
			return err
		}
	}
	return nil
}

func (f *avroFormat) step(prog *avroProgram, op *avroOp, depth int) error {
	rd := f.rd
	switch op.kind {
	case opSkip:
		return f.skip(op.schema, depth)
	case opNull:
		for _, col := range op.cols {
			f.vals[col].kind = inNull
		}
	case opRecord:
		for _, col := range op.cols {
			f.vals[col].kind = inTrue // the record is there
		}
		return f.run(prog, op.fields, depth+1)
	case opUnion:
		i := rd.ReadLong()
		if rd.Error != nil {
			return nil
		}
		if i < 0 || i >= int64(len(op.branches)) {
			return fmt.Errorf("union branch %d of %d", i, len(op.branches))
		}
		return f.step(prog, &op.branches[i], depth+1)
	case opLeaf:
		return f.leaf(op)
	case opJSON:
		slot := &prog.json[op.slot]
		var err error
		if slot.buf, err = f.render(slot.buf[:0], op.schema, depth+1); err != nil || rd.Error != nil {
			return err
		}
		v, perr := slot.parser.ParseBytes(slot.buf)
		if perr != nil {
			return fmt.Errorf("nested value: %v", perr)
		}
		for i, col := range slot.cols {
			if p := slot.paths[i]; len(p) > 0 {
				f.jv[col] = v.Get(p...)
			} else {
				f.jv[col] = v
			}
			f.vals[col].kind = inMissing
		}
	}
	return nil
}

// bytesLen reads a string or bytes length and checks it against the
// payload.
func (f *avroFormat) bytesLen() (int, error) {
	n := f.rd.ReadLong()
	if f.rd.Error != nil {
		return 0, nil
	}
	if n < 0 || n > int64(f.size) {
		return 0, fmt.Errorf("string or bytes length %d in a %d-byte record", n, f.size)
	}
	return int(n), nil
}

// readN reads n bytes into the arena and returns them.
func (f *avroFormat) readN(n int) []byte {
	start := len(f.arena)
	if cap(f.arena)-start < n {
		grown := make([]byte, start, 2*cap(f.arena)+n)
		copy(grown, f.arena)
		f.arena = grown
	}
	f.arena = f.arena[:start+n]
	b := f.arena[start : start+n : start+n]
	f.rd.Read(b)
	return b
}

// leaf reads a scalar into its columns.
func (f *avroFormat) leaf(op *avroOp) error {
	if len(op.cols) == 1 && op.locs[0] == nil {
		// The common case: read straight into the slot.
		in := &f.vals[op.cols[0]]
		*in = input{}
		return f.readLeaf(op, in)
	}
	var in input
	if err := f.readLeaf(op, &in); err != nil || f.rd.Error != nil {
		return err
	}
	for i, col := range op.cols {
		f.vals[col] = in
		if loc := op.locs[i]; loc != nil && op.leaf >= leafLocalMillis {
			// A local timestamp is a wall time: read it in the column's zone.
			t := in.t
			f.vals[col].t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc)
		}
	}
	return nil
}

// readLeaf reads a scalar into in; strings and number texts go to the
// arena.
func (f *avroFormat) readLeaf(op *avroOp, in *input) error {
	rd := f.rd
	switch op.leaf {
	case leafBool:
		in.kind = inFalse
		if rd.ReadBool() {
			in.kind = inTrue
		}
	case leafInt:
		in.kind, in.n = inInt, int64(rd.ReadInt())
	case leafLong:
		in.kind, in.n = inInt, rd.ReadLong()
	case leafFloat:
		f.floatText(in, float64(rd.ReadFloat()), 32)
	case leafDouble:
		f.floatText(in, rd.ReadDouble(), 64)
	case leafString, leafBytes:
		n, err := f.bytesLen()
		if err != nil {
			return err
		}
		in.kind, in.b = inStr, f.readN(n)
	case leafFixed:
		in.kind, in.b = inStr, f.readN(op.size)
	case leafUUIDFixed:
		raw := f.readN(16)
		in.kind, in.b = inStr, f.appendUUID(raw)
	case leafEnum:
		i := rd.ReadInt()
		if rd.Error != nil {
			return nil
		}
		if i < 0 || int(i) >= len(op.symbols) {
			return fmt.Errorf("enum index %d of %d symbols", i, len(op.symbols))
		}
		in.kind, in.b = inStr, s2b(op.symbols[i])
	case leafDecimalBytes, leafDecimalFixed:
		n := op.size
		if op.leaf == leafDecimalBytes {
			var err error
			if n, err = f.bytesLen(); err != nil {
				return err
			}
		}
		raw := f.readN(n)
		start := len(f.arena)
		f.arena = f.dec.decimalText(f.arena, raw, op.scale)
		in.kind, in.b = inNum, f.arena[start:len(f.arena):len(f.arena)]
	case leafDate:
		days := int64(rd.ReadInt())
		in.kind, in.n, in.t = inTime, days, time.Unix(days*secondsPerDay, 0).UTC()
	default: // timestamps
		v := rd.ReadLong()
		in.kind, in.n, in.t = inTime, v, avroInstant(op.leaf, v)
	}
	return nil
}

// avroInstant is the instant of a timestamp leaf's value (local ones as
// the UTC instant of the same wall time).
func avroInstant(k leafKind, v int64) time.Time {
	switch k {
	case leafTsMillis, leafLocalMillis:
		return time.UnixMilli(v).UTC()
	case leafTsMicros, leafLocalMicros:
		return time.UnixMicro(v).UTC()
	}
	return time.Unix(0, v).UTC()
}

// floatText makes in the number v (NaN and infinities as their strings,
// which Float columns read).
func (f *avroFormat) floatText(in *input, v float64, bits int) {
	start := len(f.arena)
	switch {
	case math.IsNaN(v):
		f.arena = append(f.arena, "NaN"...)
		in.kind = inStr
	case math.IsInf(v, 1):
		f.arena = append(f.arena, "+Inf"...)
		in.kind = inStr
	case math.IsInf(v, -1):
		f.arena = append(f.arena, "-Inf"...)
		in.kind = inStr
	default:
		f.arena = strconv.AppendFloat(f.arena, v, 'g', -1, bits)
		in.kind = inNum
	}
	in.b = f.arena[start:len(f.arena):len(f.arena)]
}

// appendUUID formats 16 bytes as UUID text in the arena.
func (f *avroFormat) appendUUID(raw []byte) []byte {
	const hex = "0123456789abcdef"
	start := len(f.arena)
	for i, x := range raw {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			f.arena = append(f.arena, '-')
		}
		f.arena = append(f.arena, hex[x>>4], hex[x&15])
	}
	return f.arena[start:len(f.arena):len(f.arena)]
}

// moreItems counts n more array or map items against maxAvroItems.
func (f *avroFormat) moreItems(n int64) error {
	if n < 0 || n > maxAvroItems-int64(f.items) {
		return fmt.Errorf("block of %d items (at most %d per record)", n, maxAvroItems)
	}
	f.items += int(n)
	return nil
}

// blocks walks an array's or map's blocks, calling item for each item (a
// map's item reads its key first).
func (f *avroFormat) blocks(item func(i int) error) error {
	rd := f.rd
	i := 0
	for rd.Error == nil {
		n := rd.ReadLong()
		if n == 0 || rd.Error != nil {
			return nil
		}
		if n < 0 {
			if n == math.MinInt64 {
				return fmt.Errorf("invalid block count")
			}
			n = -n
			rd.ReadLong() // the block's byte size
		}
		if err := f.moreItems(n); err != nil {
			return err
		}
		for range n {
			if rd.Error != nil {
				return nil
			}
			if err := item(i); err != nil {
				return err
			}
			i++
		}
	}
	return nil
}

// skip reads past a value of schema s.
func (f *avroFormat) skip(s avro.Schema, depth int) error {
	if depth > maxAvroDepth {
		return errors.New("values nest deeper than " + strconv.Itoa(maxAvroDepth))
	}
	rd := f.rd
	s = resolveRef(s)
	switch t := s.(type) {
	case *avro.RecordSchema:
		for _, fld := range t.Fields() {
			if err := f.skip(fld.Type(), depth+1); err != nil || rd.Error != nil {
				return err
			}
		}
		return nil
	case *avro.UnionSchema:
		i := rd.ReadLong()
		if rd.Error != nil {
			return nil
		}
		if i < 0 || i >= int64(len(t.Types())) {
			return fmt.Errorf("union branch %d of %d", i, len(t.Types()))
		}
		return f.skip(t.Types()[i], depth+1)
	case *avro.ArraySchema:
		return f.blocks(func(int) error { return f.skip(t.Items(), depth+1) })
	case *avro.MapSchema:
		return f.blocks(func(int) error {
			n, err := f.bytesLen()
			if err != nil {
				return err
			}
			rd.SkipNBytes(n)
			return f.skip(t.Values(), depth+1)
		})
	case *avro.FixedSchema:
		rd.SkipNBytes(t.Size())
		return nil
	case *avro.EnumSchema:
		rd.SkipInt()
		return nil
	}
	switch s.Type() {
	case avro.Null:
	case avro.Boolean:
		rd.SkipBool()
	case avro.Int:
		rd.SkipInt()
	case avro.Long:
		rd.SkipLong()
	case avro.Float:
		rd.SkipFloat()
	case avro.Double:
		rd.SkipDouble()
	case avro.String, avro.Bytes:
		n, err := f.bytesLen()
		if err != nil {
			return err
		}
		rd.SkipNBytes(n)
	default:
		return fmt.Errorf("unsupported Avro type %s", s.Type())
	}
	return nil
}

// render appends the JSON text of a value of schema s (see avroFormat for
// how each type is written).
func (f *avroFormat) render(dst []byte, s avro.Schema, depth int) ([]byte, error) {
	if depth > maxAvroDepth {
		return dst, errors.New("values nest deeper than " + strconv.Itoa(maxAvroDepth))
	}
	rd := f.rd
	s = resolveRef(s)
	var err error
	switch t := s.(type) {
	case *avro.RecordSchema:
		dst = append(dst, '{')
		for i, fld := range t.Fields() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, s2b(fld.Name()))
			dst = append(dst, ':')
			if dst, err = f.render(dst, fld.Type(), depth+1); err != nil || rd.Error != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case *avro.UnionSchema:
		i := rd.ReadLong()
		if rd.Error != nil {
			return dst, nil
		}
		if i < 0 || i >= int64(len(t.Types())) {
			return dst, fmt.Errorf("union branch %d of %d", i, len(t.Types()))
		}
		return f.render(dst, t.Types()[i], depth+1)
	case *avro.ArraySchema:
		dst = append(dst, '[')
		err = f.blocks(func(i int) error {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			dst, err = f.render(dst, t.Items(), depth+1)
			return err
		})
		return append(dst, ']'), err
	case *avro.MapSchema:
		dst = append(dst, '{')
		err = f.blocks(func(i int) error {
			if i > 0 {
				dst = append(dst, ',')
			}
			n, err := f.bytesLen()
			if err != nil {
				return err
			}
			dst = appendJSONString(dst, f.readN(n))
			dst = append(dst, ':')
			dst, err = f.render(dst, t.Values(), depth+1)
			return err
		})
		return append(dst, '}'), err
	case *avro.EnumSchema:
		i := rd.ReadInt()
		if rd.Error != nil {
			return dst, nil
		}
		if i < 0 || int(i) >= len(t.Symbols()) {
			return dst, fmt.Errorf("enum index %d of %d symbols", i, len(t.Symbols()))
		}
		return appendJSONString(dst, s2b(t.Symbols()[i])), nil
	}
	if isDuration(s) {
		raw := f.readN(12)
		le := func(b []byte) uint64 { return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 }
		dst = append(dst, `{"months":`...)
		dst = strconv.AppendUint(dst, le(raw[0:4]), 10)
		dst = append(dst, `,"days":`...)
		dst = strconv.AppendUint(dst, le(raw[4:8]), 10)
		dst = append(dst, `,"milliseconds":`...)
		dst = strconv.AppendUint(dst, le(raw[8:12]), 10)
		return append(dst, '}'), nil
	}
	if s.Type() == avro.Null {
		return append(dst, "null"...), nil
	}
	op, err := scalarOp(s)
	if err != nil {
		return dst, err
	}
	return f.renderLeaf(dst, &op)
}

// renderLeaf reads a scalar and writes it as JSON.
func (f *avroFormat) renderLeaf(dst []byte, op *avroOp) ([]byte, error) {
	rd := f.rd
	var in input
	mark := len(f.arena)
	switch op.leaf {
	case leafBool:
		if rd.ReadBool() {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case leafInt:
		return strconv.AppendInt(dst, int64(rd.ReadInt()), 10), nil
	case leafLong:
		return strconv.AppendInt(dst, rd.ReadLong(), 10), nil
	case leafFloat, leafDouble:
		if op.leaf == leafFloat {
			f.floatText(&in, float64(rd.ReadFloat()), 32)
		} else {
			f.floatText(&in, rd.ReadDouble(), 64)
		}
		if in.kind == inStr {
			dst = appendJSONString(dst, in.b)
		} else {
			dst = append(dst, in.b...)
		}
	case leafDate:
		days := int64(rd.ReadInt())
		dst = append(dst, '"')
		dst = time.Unix(days*secondsPerDay, 0).UTC().AppendFormat(dst, "2006-01-02")
		dst = append(dst, '"')
	case leafTsMillis, leafTsMicros, leafTsNanos:
		dst = append(dst, '"')
		dst = avroInstant(op.leaf, rd.ReadLong()).AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	case leafLocalMillis, leafLocalMicros, leafLocalNanos:
		dst = append(dst, '"')
		dst = avroInstant(op.leaf, rd.ReadLong()).AppendFormat(dst, "2006-01-02 15:04:05.999999999")
		dst = append(dst, '"')
	default:
		// Strings, bytes, fixed, enums, decimals, uuids.
		if err := f.readLeaf(op, &in); err != nil {
			return dst, err
		}
		if in.kind == inNum {
			dst = append(dst, in.b...)
		} else {
			dst = appendJSONString(dst, in.b)
		}
	}
	f.arena = f.arena[:mark]
	return dst, nil
}

package avrofmt

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/valyala/fastjson"

	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/decode/drift"
	"sink/internal/decode/format"
	"sink/internal/registry"
)

// The avro format's schema compiler: a writer schema from the registry and
// the Plan's bound columns become an avroProgram, one avroOp per field in
// encoding order (read into columns, read as JSON, or skip).

// avroProgram is one writer schema compiled for one Plan's columns.
type avroProgram struct {
	id   int
	root []avroOp // the top-level record's fields, in encoding order
	json []avroJSONSlot
	// unmapped: the top-level fields no column reads (schema drift).
	unmapped drift.Known
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
	prec     int      // decimal: its precision, the most digits a value has
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
func (f *Reader) compileSchema(s *registry.Schema) (*avroProgram, error) {
	sch, err := parseAvroSchema(s)
	if err != nil {
		return nil, err
	}
	if err := checkAvroSchema(sch); err != nil {
		return nil, fmt.Errorf("invalid Avro schema: %v", err)
	}
	prog := &avroProgram{id: s.ID}
	var reqs []bindReq
	for col, b := range f.binds {
		if b.Path != nil {
			reqs = append(reqs, bindReq{col: col, rest: b.Path})
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
	prog.unmapped.Fields = skippedFields(rs, prog.root, f.image)
	return prog, nil
}

// skippedFields lists the fields of record rs that ops (its compiled
// fields) skip: the fields no column reads. With image set, it lists those
// of the record in rs's field image instead (a record, or a union of null
// and a record).
func skippedFields(rs *avro.RecordSchema, ops []avroOp, image string) []drift.Field {
	var out []drift.Field
	for i, fld := range rs.Fields() {
		if image == "" {
			if ops[i].kind == opSkip {
				out = append(out, drift.Field{Name: fld.Name(), Type: avroSchemaType(fld.Type(), 0), Default: avroDefault(fld)})
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

// UnmappedFields returns the unmapped fields of the schema of the record
// decoded last (drift.go).
func (f *Reader) UnmappedFields() *drift.Known {
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
	f    *Reader
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
		case c.f.binds[r.col].Present:
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
				return avroOp{}, format.Bad(b.Name, fmt.Sprintf("path %s: %s is an Avro %s, not a record, array or map",
					strings.Join(b.Path, "."), strings.Join(b.Path[:len(b.Path)-len(r.rest)], "."), s.Type()))
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
		op.locs[i] = c.f.binds[col].Type.Base().Loc // nil: UTC
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
			if d := decimalOf(t); d != nil {
				op.leaf, op.scale, op.prec = leafDecimalFixed, d.Scale(), d.Precision()
			}
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
			if d := decimalOf(t); d != nil && lt == string(avro.Decimal) {
				op.leaf, op.scale, op.prec = leafDecimalBytes, d.Scale(), d.Precision()
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
			if !takesAnyType(b.Type) {
				return avroOp{}, format.Bad(b.Name, fmt.Sprintf("field %s is the Avro union %s, which fills only a Variant (ClickHouse 26.9), Dynamic, JSON or String column, not %s",
					strings.Join(b.Path, "."), u.String(), b.Type.Text))
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
func takesAnyType(t *chtype.Type) bool {
	switch t.Base().Kind {
	case chtype.Variant, chtype.Dynamic, chtype.JSON, chtype.String:
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

// decimalOf is the decimal logical type of s, nil where it has none or
// its decimal is invalid (a precision the library refused): such a schema
// is read as its underlying bytes or fixed, as the Avro specification
// asks of an invalid logical type.
func decimalOf(s avro.LogicalTypeSchema) *avro.DecimalLogicalSchema {
	d, _ := s.Logical().(*avro.DecimalLogicalSchema)
	return d
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

// avroDefault is the default of Avro field fld (nil when it declares none,
// or declares null).
func avroDefault(fld *avro.Field) *column.FieldDefault {
	if !fld.HasDefault() || fld.Default() == nil {
		return nil
	}
	s := resolveRef(fld.Type())
	if u, ok := s.(*avro.UnionSchema); ok && len(u.Types()) > 0 {
		s = resolveRef(u.Types()[0]) // a union's default is of its first branch
	}
	d := &column.FieldDefault{}
	switch logicalType(s) {
	case "":
	case string(avro.Date):
		d.Unit = "days"
	case string(avro.TimestampMillis), string(avro.LocalTimestampMillis):
		d.Unit = "ms"
	case string(avro.TimestampMicros), string(avro.LocalTimestampMicros):
		d.Unit = "us"
	case "timestamp-nanos", "local-timestamp-nanos":
		d.Unit = "ns"
	case string(avro.UUID):
	default:
		d.Skip = "the default of a field of logical type " + logicalType(s) + " is not written"
	}
	switch s.Type() {
	case avro.Bytes, avro.Fixed, avro.Record, avro.Array, avro.Map:
		d.Skip = "the default of an Avro " + string(s.Type()) + " field is not written"
	}
	b, err := json.Marshal(fld.Default())
	if err != nil {
		d.Skip = "its default is not JSON: " + err.Error()
	}
	d.JSON = string(b)
	return d
}

// maxDecimalPrecision is the widest Decimal(P, S) every supported server
// has (Decimal128); wider decimals are kept as their exact text.
const maxDecimalPrecision = 38

// maxSchemaDepth bounds the nesting SchemaType follows (a recursive
// schema would otherwise not end).
const maxSchemaDepth = 16

// avroSchemaType is the column type of an Avro field of schema s.
func avroSchemaType(s avro.Schema, depth int) *drift.SchemaType {
	s = resolveRef(s)
	label := s.String()
	if len(label) > 64 {
		label = string(s.Type())
	}
	if depth > maxSchemaDepth {
		return drift.NoColumn("nested too deep", label)
	}
	lt := logicalType(s)
	switch t := s.(type) {
	case *avro.UnionSchema:
		var branches []avro.Schema
		null := false
		for _, b := range t.Types() {
			if b.Type() == avro.Null {
				null = true
			} else {
				branches = append(branches, b)
			}
		}
		switch len(branches) {
		case 0:
			return drift.NoColumn("only null", label)
		case 1:
			return avroSchemaType(branches[0], depth+1).Null(null, label)
		}
		// Several types: the decoder fills a String with whichever comes.
		return drift.PlainType("String", label).Null(null, label)
	case *avro.RecordSchema:
		return drift.ObjectType(label)
	case *avro.ArraySchema:
		return drift.ArrayType(avroSchemaType(t.Items(), depth+1), label)
	case *avro.MapSchema:
		return drift.MapType(avroSchemaType(t.Values(), depth+1), label)
	case *avro.EnumSchema:
		return drift.PlainType("String", label)
	case *avro.FixedSchema:
		switch {
		case lt == string(avro.Decimal) && decimalOf(t) != nil:
			return decimalType(decimalOf(t), label)
		case lt == string(avro.UUID) && t.Size() == 16:
			return drift.PlainType("UUID", label)
		case isDuration(s):
			return drift.ObjectType(label)
		}
		return drift.PlainType("String", label)
	}
	switch s.Type() {
	case avro.Boolean:
		return drift.BoolType(label)
	case avro.Int:
		if lt == string(avro.Date) {
			return drift.DateType(label)
		}
		return drift.PlainType("Int32", label)
	case avro.Long:
		switch lt {
		case string(avro.TimestampMillis), string(avro.LocalTimestampMillis):
			return drift.TimeType(3, label)
		case string(avro.TimestampMicros), string(avro.LocalTimestampMicros):
			return drift.TimeType(6, label)
		case "timestamp-nanos", "local-timestamp-nanos":
			return drift.TimeType(9, label)
		}
		return drift.PlainType("Int64", label)
	case avro.Float:
		return drift.PlainType("Float32", label)
	case avro.Double:
		return drift.PlainType("Float64", label)
	case avro.String:
		if lt == string(avro.UUID) {
			return drift.PlainType("UUID", label)
		}
		return drift.PlainType("String", label)
	case avro.Bytes:
		if lt == string(avro.Decimal) {
			if d, ok := s.(avro.LogicalTypeSchema).Logical().(*avro.DecimalLogicalSchema); ok {
				return decimalType(d, label)
			}
		}
		return drift.PlainType("String", label)
	}
	return drift.NoColumn("not a type the avro format reads", label)
}

func decimalType(d *avro.DecimalLogicalSchema, label string) *drift.SchemaType {
	if d.Precision() > maxDecimalPrecision {
		return drift.PlainType("String", label)
	}
	return drift.PlainType(fmt.Sprintf("Decimal(%d, %d)", d.Precision(), d.Scale()), label)
}

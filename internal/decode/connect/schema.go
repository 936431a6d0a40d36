package connect

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"sink/internal/decode/column"
)

// Kafka Connect's schema language, as its JsonConverter writes it into the
// "schema" member of an envelope: compiled once per distinct schema text
// (connectSchemas), then used to check each record's payload against it
// (check) and to give each column the schema of the value it reads
// (connSchema.cols), whose semantic type decides the conversion.

// connType is one of Connect's schema types.
type connType uint8

const (
	ctBoolean connType = iota + 1
	ctInt8
	ctInt16
	ctInt32
	ctInt64
	ctFloat
	ctDouble
	ctString
	ctBytes
	ctArray
	ctMap
	ctStruct
)

var connTypeNames = map[string]connType{
	"boolean": ctBoolean, "int8": ctInt8, "int16": ctInt16, "int32": ctInt32, "int64": ctInt64,
	"float": ctFloat, "double": ctDouble, "string": ctString, "bytes": ctBytes,
	"array": ctArray, "map": ctMap, "struct": ctStruct,
}

func (t connType) String() string {
	for n, c := range connTypeNames {
		if c == t {
			return n
		}
	}
	return "?"
}

// semBase is the Connect type each semantic type is carried in; a schema
// that names one on another type is not one Connect (or Debezium) writes.
var semBase = map[SemKind]connType{
	SemDate: ctInt32, SemTimeMillis: ctInt32,
	SemTsMillis: ctInt64, SemTsMicros: ctInt64, SemTsNanos: ctInt64, SemTimeMicros: ctInt64, SemTimeNanos: ctInt64,
	SemDuration: ctInt64, SemDecimal: ctBytes, SemVarDecimal: ctStruct,
	SemJSON: ctString, SemZonedTs: ctString, SemZonedTime: ctString,
}

// connNode is one compiled Connect schema (a struct's field, an array's
// items, ...).
type connNode struct {
	typ        connType
	name       string // the schema's name, "" without one
	sem        Sem    // the semantic type its name (or, for bytes, its type) gives
	optional   bool   // null is a value
	hasDefault bool   // declares a default: Connect reads null as it
	precision  int    // a Decimal's connect.decimal.precision (0: none declared)
	fields     []connField
	items      *connNode // array
	keys, vals *connNode // map
	// rewrite: a composite column reading this value gets it converted
	// (connRewriter): it is, or holds, a value whose JSON form is not
	// the value (a decimal's bytes, a day number, a map keyed by other
	// than strings).
	rewrite bool
}

// connField is one field of a struct schema.
type connField struct {
	name string
	node *connNode
}

// field returns the struct field called name, or nil.
func (n *connNode) field(name string) *connNode {
	for i := range n.fields {
		if n.fields[i].name == name {
			return n.fields[i].node
		}
	}
	return nil
}

// child is the schema of the value a path step reaches from a value of
// schema n: a struct's field, an array's element (a numeric step), a
// map's value (string keys); nil where the step leads nowhere the schema
// describes.
func (n *connNode) child(step string) *connNode {
	switch n.typ {
	case ctStruct:
		return n.field(step)
	case ctArray:
		if i, err := strconv.Atoi(step); err == nil && i >= 0 {
			return n.items
		}
	case ctMap:
		if n.keys.typ == ctString {
			return n.vals
		}
	}
	return nil
}

// MaxSchemaDepth bounds the nesting of a schema the sink compiles (fastjson
// bounds the text's nesting at 300; a schema nests twice per level).
const MaxSchemaDepth = 128

// compileConnect compiles one schema (a JSON object) as Connect's
// JsonConverter reads it: type (required), optional, name, parameters
// (a Decimal's scale), default; items of an array, keys and values of a
// map, fields of a struct (each with its name in "field").
func compileConnect(v *fastjson.Value, depth int) (*connNode, error) {
	if depth > MaxSchemaDepth {
		return nil, fmt.Errorf("nested deeper than %d", MaxSchemaDepth)
	}
	if v.Type() != fastjson.TypeObject {
		return nil, fmt.Errorf("a schema is a JSON object, not %s", v.Type())
	}
	tn := v.GetStringBytes("type")
	typ := connTypeNames[string(tn)]
	if typ == 0 {
		return nil, fmt.Errorf("unknown type %q", column.Cut(tn))
	}
	n := &connNode{typ: typ, name: string(v.GetStringBytes("name")), optional: v.GetBool("optional")}
	if d := v.Get("default"); d != nil && d.Type() != fastjson.TypeNull {
		n.hasDefault = true
	}
	if err := n.semantic(v); err != nil {
		return nil, err
	}
	if err := n.compileChildren(v, depth); err != nil {
		return nil, err
	}
	n.rewrite = n.rewrite || rewritten(n.sem.Kind) || (typ == ctMap && n.keys.typ != ctString)
	return n, nil
}

// rewritten: the semantic types whose values a composite column gets
// converted (connRewriter).
func rewritten(k SemKind) bool {
	switch k {
	case SemDate, SemTsMillis, SemTsMicros, SemTsNanos, SemTimeMillis, SemTimeMicros, SemTimeNanos, SemDecimal, SemVarDecimal:
		return true
	}
	return false
}

// semantic sets n.sem from the schema's name (or bytes without one).
func (n *connNode) semantic(v *fastjson.Value) error {
	k := SemNames[n.name]
	if k == SemPlain && n.name == "" && n.typ == ctBytes {
		k = SemBytes
	}
	if k == SemPlain {
		return nil
	}
	if base := semBase[k]; base != 0 && base != n.typ {
		return fmt.Errorf("%s is carried as %s, this schema's type is %s", n.name, base, n.typ)
	}
	n.sem.Kind = k
	if k == SemDecimal {
		s, ok := ScaleParam(v)
		if !ok || s > MaxScale || s < -MaxScale {
			return fmt.Errorf("%s without an integer scale parameter", n.name)
		}
		n.sem.Scale = s
		if p, ok := atoi32(v.GetStringBytes("parameters", "connect.decimal.precision")); ok && p > 0 {
			n.precision = int(p)
		}
	}
	return nil
}

// compileChildren compiles the schemas an array, map or struct holds.
func (n *connNode) compileChildren(v *fastjson.Value, depth int) error {
	var err error
	switch n.typ {
	case ctArray:
		if n.items, err = compileMember(v, "items", depth); err == nil {
			n.rewrite = n.items.rewrite
		}
	case ctMap:
		if n.keys, err = compileMember(v, "keys", depth); err != nil {
			return err
		}
		if n.vals, err = compileMember(v, "values", depth); err == nil {
			n.rewrite = n.keys.rewrite || n.vals.rewrite
		}
	case ctStruct:
		err = n.compileFields(v, depth)
	}
	return err
}

// compileMember compiles the schema in member key of v ("items", "keys",
// "values"), which Connect requires.
func compileMember(v *fastjson.Value, key string, depth int) (*connNode, error) {
	m := v.Get(key)
	if m == nil || m.Type() == fastjson.TypeNull {
		return nil, fmt.Errorf("a %s schema without %s", v.GetStringBytes("type"), key)
	}
	c, err := compileConnect(m, depth+1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return c, nil
}

// compileFields compiles a struct's fields.
func (n *connNode) compileFields(v *fastjson.Value, depth int) error {
	fs := v.Get("fields")
	if fs == nil || fs.Type() != fastjson.TypeArray {
		return fmt.Errorf("a struct schema whose fields are not an array")
	}
	list, _ := fs.Array()
	n.fields = make([]connField, 0, len(list))
	for i, f := range list {
		name := f.Get("field")
		if name == nil || name.Type() != fastjson.TypeString {
			return fmt.Errorf("field %d has no name", i)
		}
		c, err := compileConnect(f, depth+1)
		if err != nil {
			return fmt.Errorf("field %q: %w", column.Cut(name.GetStringBytes()), err)
		}
		n.fields = append(n.fields, connField{name: string(name.GetStringBytes()), node: c})
		n.rewrite = n.rewrite || c.rewrite
	}
	return nil
}

// connMismatch is a payload value that its schema does not describe: where
// (the path, innermost step first, as it is unwound) and what.
type connMismatch struct {
	path []string
	msg  string
}

func (m *connMismatch) Error() string {
	var b strings.Builder
	for i := len(m.path) - 1; i >= 0; i-- {
		if b.Len() > 0 && !strings.HasPrefix(m.path[i], "[") {
			b.WriteByte('.')
		}
		b.WriteString(m.path[i])
	}
	if b.Len() == 0 {
		return "payload does not match its schema: " + m.msg
	}
	return "payload does not match its schema: " + b.String() + ": " + m.msg
}

// at adds the step the mismatch was found below.
func (m *connMismatch) at(step string) *connMismatch {
	m.path = append(m.path, step)
	return m
}

func mismatch(n *connNode, v *fastjson.Value) *connMismatch {
	what := n.typ.String()
	if n.name != "" {
		what += " (" + n.name + ")"
	}
	if v == nil || v.Type() == fastjson.TypeNull {
		return &connMismatch{msg: "null for a required " + what + " without a default"}
	}
	return &connMismatch{msg: "want " + connWant(n) + " for " + what + ", got " + column.Cut(v.MarshalTo(nil))}
}

// connWant says in JSON terms what a value of schema n is written as.
func connWant(n *connNode) string {
	switch n.typ {
	case ctBoolean:
		return "true or false"
	case ctInt8, ctInt16, ctInt32, ctInt64:
		return "an integer within " + n.typ.String()
	case ctFloat, ctDouble:
		return `a number, "NaN", "Infinity" or "-Infinity"`
	case ctString:
		return "a string"
	case ctBytes:
		if n.sem.Kind == SemDecimal {
			return "a base64 string or a number"
		}
		return "a base64 string"
	case ctArray:
		return "an array"
	case ctMap:
		if n.keys.typ == ctString {
			return "an object"
		}
		return "an array of [key, value] pairs"
	}
	return "an object"
}

// connChecker checks payloads against their schemas, with scratch for
// base64 that decodes nowhere.
type connChecker struct {
	b64 []byte
}

// check reports whether v (nil: absent) is a value of schema n, as
// Connect's JsonConverter reads one: null only where the schema is
// optional or has a default; integers within their type; floats as numbers
// or the texts Jackson writes for NaN and the infinities; bytes as base64
// (a Decimal also as a number); a struct's members by its fields (members
// it does not name are ignored, as Connect ignores them); a map with
// string keys as an object, any other as an array of [key, value] pairs.
func (c *connChecker) check(n *connNode, v *fastjson.Value) *connMismatch {
	if v == nil || v.Type() == fastjson.TypeNull {
		if n.optional || n.hasDefault {
			return nil
		}
		return mismatch(n, v)
	}
	ok := true
	switch n.typ {
	case ctBoolean:
		ok = v.Type() == fastjson.TypeTrue || v.Type() == fastjson.TypeFalse
	case ctInt8, ctInt16, ctInt32, ctInt64:
		ok = intFits(n.typ, v)
	case ctFloat, ctDouble:
		ok = isFloat(v)
	case ctString:
		ok = v.Type() == fastjson.TypeString
	case ctBytes:
		ok = c.isBytes(n, v)
	case ctArray, ctMap, ctStruct:
		return c.checkComposite(n, v)
	}
	if !ok {
		return mismatch(n, v)
	}
	return nil
}

// intFits: v is an integer that Connect's type t holds.
func intFits(t connType, v *fastjson.Value) bool {
	if v.Type() != fastjson.TypeNumber {
		return false
	}
	x, err := v.Int64()
	if err != nil {
		return false
	}
	switch t {
	case ctInt8:
		return x >= math.MinInt8 && x <= math.MaxInt8
	case ctInt16:
		return x >= math.MinInt16 && x <= math.MaxInt16
	case ctInt32:
		return x >= math.MinInt32 && x <= math.MaxInt32
	}
	return true
}

// isFloat: v is a number, or one of the texts Jackson writes for the
// values JSON has no number for.
func isFloat(v *fastjson.Value) bool {
	switch v.Type() {
	case fastjson.TypeNumber:
		return true
	case fastjson.TypeString:
		switch string(v.GetStringBytes()) {
		case "NaN", "Infinity", "-Infinity":
			return true
		}
	}
	return false
}

// isBytes: v is base64 text (a Decimal may be a number, as the converter
// writes with decimal.format=NUMERIC).
func (c *connChecker) isBytes(n *connNode, v *fastjson.Value) bool {
	if v.Type() == fastjson.TypeNumber {
		return n.sem.Kind == SemDecimal
	}
	if v.Type() != fastjson.TypeString {
		return false
	}
	s := v.GetStringBytes()
	if need := base64.StdEncoding.DecodedLen(len(s)); cap(c.b64) < need {
		c.b64 = make([]byte, need)
	}
	_, err := base64.StdEncoding.Decode(c.b64[:cap(c.b64)], s)
	return err == nil
}

// checkComposite is check for arrays, maps and structs.
func (c *connChecker) checkComposite(n *connNode, v *fastjson.Value) *connMismatch {
	switch {
	case n.typ == ctStruct && v.Type() == fastjson.TypeObject:
		return c.checkStruct(n, v)
	case n.typ == ctArray && v.Type() == fastjson.TypeArray:
		return c.checkElements(n.items, v)
	case n.typ == ctMap && n.keys.typ == ctString && v.Type() == fastjson.TypeObject:
		var m *connMismatch
		o, _ := v.Object()
		o.Visit(func(k []byte, e *fastjson.Value) {
			if m == nil {
				if m = c.check(n.vals, e); m != nil {
					m.at(string(k))
				}
			}
		})
		return m
	case n.typ == ctMap && n.keys.typ != ctString && v.Type() == fastjson.TypeArray:
		return c.checkPairs(n, v)
	}
	return mismatch(n, v)
}

// checkElements checks each element of the array v against items.
func (c *connChecker) checkElements(items *connNode, v *fastjson.Value) *connMismatch {
	els, _ := v.Array()
	for i, e := range els {
		if m := c.check(items, e); m != nil {
			return m.at("[" + strconv.Itoa(i) + "]")
		}
	}
	return nil
}

// checkPairs checks a map with keys other than strings: an array of
// [key, value] pairs.
func (c *connChecker) checkPairs(n *connNode, v *fastjson.Value) *connMismatch {
	els, _ := v.Array()
	for i, e := range els {
		kv, err := e.Array()
		if err != nil || len(kv) != 2 {
			return (&connMismatch{msg: "want a [key, value] pair, got " + column.Cut(e.MarshalTo(nil))}).at("[" + strconv.Itoa(i) + "]")
		}
		if m := c.check(n.keys, kv[0]); m != nil {
			return m.at("[" + strconv.Itoa(i) + "] key")
		}
		if m := c.check(n.vals, kv[1]); m != nil {
			return m.at("[" + strconv.Itoa(i) + "] value")
		}
	}
	return nil
}

// checkStruct checks the members of the object v by the fields of the
// struct schema n. The converter writes them in the schema's order, so
// they are first taken in order; an object in another order (or with
// other members) is checked field by field, by name.
func (c *connChecker) checkStruct(n *connNode, v *fastjson.Value) *connMismatch {
	o, _ := v.Object()
	i, inOrder := 0, true
	var m *connMismatch
	o.Visit(func(k []byte, e *fastjson.Value) {
		if !inOrder || m != nil {
			return
		}
		if i >= len(n.fields) || string(k) != n.fields[i].name {
			inOrder = false
			return
		}
		if m = c.check(n.fields[i].node, e); m != nil {
			m.at(n.fields[i].name)
		}
		i++
	})
	if m != nil || (inOrder && i == len(n.fields)) {
		return m
	}
	for i := range n.fields {
		f := &n.fields[i]
		if m := c.check(f.node, v.Get(f.name)); m != nil {
			return m.at(f.name)
		}
	}
	return nil
}

// connectDefault is the default of a field of a JSON converter schema
// block (nil when it declares none, or declares null).
func connectDefault(f *fastjson.Value) *column.FieldDefault {
	v := f.Get("default")
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil
	}
	d := &column.FieldDefault{JSON: string(v.MarshalTo(nil))}
	// A semantic type that the format converts (a Debezium date, time or
	// decimal) is read differently from its raw form: writing the raw
	// default would not be what the records insert.
	if name := string(f.GetStringBytes("name")); SemNames[name] != SemPlain {
		d.Skip = "the default of a field of semantic type " + name + " is not written"
	} else if string(f.GetStringBytes("type")) == "bytes" {
		d.Skip = "the default of a bytes field is not written"
	}
	return d
}

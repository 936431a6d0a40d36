package connect

import (
	"bytes"

	"github.com/valyala/fastjson"

	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/decode/format"
	"sink/internal/jsonscan"
	"sink/internal/route"
)

// Envelope reads the records of a json or connect-json route that are
// Kafka Connect's JSON envelope: what its JsonConverter writes with
// schemas.enable=true (its default), {"schema": S, "payload": P}, S in
// Connect's schema language (schema.go) or null. Which records are
// envelopes is jsonscan's rule (Scanner.Envelope): an object of exactly
// the members schema and payload, the schema null or naming a Connect
// type.
//
// The payload's fields are the record's: a column reads the payload field
// of its name or a path into the payload (struct fields, array elements,
// map values), as the json format reads a plain record, and converts by
// the schema of the value it reads, with the debezium-json format's rules
// for semantic types (Conv):
//
//	org.apache.kafka.connect.data.Decimal  base64 of the unscaled two's-complement
//	                                       value, the schema's scale (or a number,
//	                                       decimal.format=NUMERIC): exact decimal
//	org.apache.kafka.connect.data.Date     days since 1970-01-01
//	org.apache.kafka.connect.data.Time     ms since midnight
//	org.apache.kafka.connect.data.Timestamp  ms since the epoch
//	Debezium's io.debezium.* types         as debezium-json reads them
//	bytes (no name)                        base64: String columns get the bytes
//
// A struct, array or map read whole (into a Tuple, Nested, Array, Map,
// JSON or String column) holding any of these gets them converted inside
// it (connRewriter): a decimal becomes its number, a date "2006-01-02", a
// timestamp RFC 3339 in UTC, a time of day "15:04:05.999"; bytes stay
// base64. A map whose keys are not strings, which the converter writes as
// an array of [key, value] pairs, becomes an object keyed by the keys'
// text (for a Map column). Optional fields are null when absent.
//
// Each payload is checked against its schema first (connChecker.check):
// a payload the schema does not describe is a bad record naming the field
// and what it holds, and so is a schema Connect would not read. The schema
// text is compiled once per distinct text (a cache of up to 256 texts and
// 4 MiB). An envelope whose schema is null carries a payload without one:
// it is read as a plain record. A null payload is a tombstone (the json format's
// errors.on_tombstone). The payload must be an object (a struct, or a map
// with string keys): a schema of another type is a bad record.
//
// Format json reads envelopes and plain records alike, each record by
// what it is, so a topic whose producer turned schemas.enable on or off
// midway is read whole. A json route one of whose columns reads a field
// called schema or payload (route.EnvelopePath) reads every record as
// written instead, envelopes too, as before the sink read them. Format
// connect-json requires the envelope: any other record is bad.
//
// An Envelope belongs to its json format's reader (package decode)
// and is used from one goroutine.
type Envelope struct {
	st     *column.State
	fields Loader // the format's field reader: the payload's fields load into it
	Strict bool   // connect-json: a record that is no envelope is bad
	// off: a json route whose columns read the envelope itself; its
	// records are read as written.
	off   bool
	cols  []Col      // per Plan column: how its type takes semantic types
	paths [][]string // per Plan column: the path it reads (nil: none)

	schemas connectSchemas
	cur     *connSchema // the record's schema; nil when the envelope has none
	parser  fastjson.Parser
	check   connChecker
	sem     Conv
	rw      connRewriter
}

// Loader is the field reader of the json format that reads an envelope:
// the payload's fields load into it, and its columns read them from there.
type Loader interface {
	Load(o *fastjson.Object)
}

// NewEnvelope returns the envelope reader of a json format's reader, whose
// payloads load into fields; strict (connect-json) makes every record
// that is no envelope bad.
func NewEnvelope(st *column.State, fields Loader, strict bool) *Envelope {
	e := &Envelope{st: st, fields: fields, Strict: strict, sem: NewConv(st)}
	e.rw = connRewriter{st: st, sem: &e.sem}
	return e
}

// Bind notes that column col of type t reads path.
func (e *Envelope) Bind(col int, t *chtype.Type, path []string) {
	for len(e.cols) <= col {
		e.cols = append(e.cols, Col{})
		e.paths = append(e.paths, nil)
	}
	e.cols[col], e.paths[col] = ColOf(t), path
	if !e.Strict && route.EnvelopePath(path) {
		e.off = true
	}
}

// Spans returns where the schema and payload of the record the
// scanner holds are, when it is an envelope this route reads as one.
func (e *Envelope) Spans(sc *jsonscan.Scanner) (schema, payload jsonscan.Span, ok bool) {
	if e.off {
		return schema, payload, false
	}
	return sc.Envelope()
}

// NotEnvelope is connect-json's answer for any other record.
const NotEnvelope = "not Kafka Connect's JSON envelope {\"schema\": ..., \"payload\": ...} (format connect-json; format json reads both)"

// Begin reads an envelope: the schema (cached), the payload checked
// against it, and the payload's fields loaded for the columns. tombstone
// is the format's answer for a null payload.
func (e *Envelope) Begin(doc []byte, schema, payload jsonscan.Span, tombstone func() error) error {
	var s *connSchema
	if sch := doc[schema.Start:schema.End]; string(sch) != "null" {
		s = e.schemas.get(sch, e.resolve)
	}
	v, err := e.parser.ParseBytes(doc[payload.Start:payload.End])
	if err != nil {
		return format.Bad("", "invalid JSON: "+err.Error()) // the scanner accepted it: not expected
	}
	return e.load(s, v, tombstone)
}

// Quick reads value when it is, byte for byte, the envelope of the schema
// the last record had, {"schema":S,"payload":P} (spaces allowed), without
// scanning S again: a producer's records carry the same schema text, which
// is most of each record. ok is false for any other value, which the
// caller then scans whole; the outcome is the same either way. err is the
// record's outcome when ok.
func (e *Envelope) Quick(value []byte, tombstone func() error) (ok bool, err error) {
	last := e.schemas.last
	if e.off || last == nil {
		return false, nil
	}
	pl, ok := payloadAfter(value, last.text)
	// The payload is parsed on its own: one level shallower than in the
	// record, so one nested near the limit is left to the whole scan.
	if !ok || !nestedBelow(pl, jsonscan.MaxDepth-2) {
		return false, nil
	}
	v, perr := e.parser.ParseBytes(pl)
	if perr != nil {
		return false, nil
	}
	return true, e.load(last, v, tombstone)
}

// payloadAfter returns P of a value written {"schema":S,"payload":P}
// (spaces allowed) where S is schema byte for byte; P is not checked.
func payloadAfter(value []byte, schema string) ([]byte, bool) {
	i := SkipSpace(value, 0)
	if i >= len(value) || value[i] != '{' {
		return nil, false
	}
	i, ok := Member(value, i+1, `"schema"`)
	if !ok || len(value)-i < len(schema) || string(value[i:i+len(schema)]) != schema {
		return nil, false
	}
	if i = SkipSpace(value, i+len(schema)); i >= len(value) || value[i] != ',' {
		return nil, false
	}
	if i, ok = Member(value, i+1, `"payload"`); !ok {
		return nil, false
	}
	rest := bytes.TrimRight(value[i:], " \t\r\n")
	if len(rest) == 0 || rest[len(rest)-1] != '}' {
		return nil, false
	}
	return rest[:len(rest)-1], true
}

// load reads the payload v of an envelope whose schema is s (nil: none).
func (e *Envelope) load(s *connSchema, v *fastjson.Value, tombstone func() error) error {
	e.cur = nil
	if s != nil {
		if s.err != nil {
			return format.Bad("", "Kafka Connect envelope with a schema Connect would not read: "+s.err.Error())
		}
		e.cur = s
	}
	if v.Type() == fastjson.TypeNull {
		return tombstone()
	}
	if e.cur != nil {
		if m := e.check.check(e.cur.root, v); m != nil {
			return format.Bad("", m.Error())
		}
	}
	o, err := v.Object()
	if err != nil {
		what := "a JSON " + v.Type().String()
		if e.cur != nil {
			what = "a " + e.cur.root.typ.String()
		}
		return format.Bad("", "Kafka Connect envelope whose payload is "+what+": the sink reads the fields of a struct (or map) into columns")
	}
	e.fields.Load(o)
	return nil
}

// nestedBelow reports whether the JSON text b nests fewer than limit
// objects and arrays (brackets in strings not counted).
func nestedBelow(b []byte, limit int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			if depth++; depth >= limit {
				return false
			}
		case '}', ']':
			depth--
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		}
	}
	return true
}

// resolve gives each bound column the schema of the value its path
// reaches in root (nil where the schema describes none).
func (e *Envelope) resolve(root *connNode) []*connNode {
	out := make([]*connNode, len(e.paths))
	for i, p := range e.paths {
		n := root
		for _, step := range p {
			if n = n.child(step); n == nil {
				break
			}
		}
		if len(p) > 0 {
			out[i] = n
		}
	}
	return out
}

// Read converts column col's value, which the format's fields read from
// the payload, by the schema of that value.
func (e *Envelope) Read(col int, in *column.Value) error {
	if e.cur == nil || in.Proj != nil || col >= len(e.cur.cols) {
		return nil
	}
	n := e.cur.cols[col]
	if n == nil {
		return nil
	}
	c := &e.cols[col]
	if n.sem.Kind != SemPlain && (in.Kind == column.String || in.Kind == column.Number || in.Kind == column.Object) {
		e.sem.Dec.ForColumn(c.IntDigits, c.DecType)
		return e.sem.Convert(c, n.sem, in)
	}
	if n.rewrite && (in.Kind == column.Object || in.Kind == column.Array) {
		return e.rw.rewrite(n, in)
	}
	return nil
}

// FieldDefault is the default the record's schema declares for the
// payload's top-level field name (nil: none).
func (e *Envelope) FieldDefault(name string) *column.FieldDefault {
	if e.cur == nil {
		return nil
	}
	return e.cur.defaults[name]
}

// connSchema is one compiled schema text and what the Plan's columns read
// of it.
type connSchema struct {
	text     string
	root     *connNode
	err      error                           // the text is no schema Connect reads: every record with it is bad
	cols     []*connNode                     // per Plan column: the schema of its value (Envelope.resolve)
	defaults map[string]*column.FieldDefault // the top-level fields' declared defaults
}

// connectSchemas caches compiled schemas by their exact text: a topic's
// records carry one (or a few) schemas, byte for byte the same, so a
// record costs a comparison with the last one.
type connectSchemas struct {
	last   *connSchema
	byText map[string]*connSchema
	bytes  int // the texts' bytes in byText
	parser fastjson.Parser
}

// The cache holds at most maxConnSchemas schemas of at most
// maxConnSchemaBytes of text (a record carries its schema, so whoever
// produces records chooses its size); when the next one would not fit it
// starts over. A topic's few schemas of a few KB stay in it.
const (
	maxConnSchemas     = 256
	maxConnSchemaBytes = 4 << 20
)

// get returns the compiled schema of text, compiling it (and resolving the
// columns with resolve) on first sight.
func (c *connectSchemas) get(text []byte, resolve func(*connNode) []*connNode) *connSchema {
	if c.last != nil && string(text) == c.last.text {
		return c.last
	}
	if s, ok := c.byText[string(text)]; ok {
		c.last = s
		return s
	}
	s := &connSchema{text: string(text)}
	if v, err := c.parser.ParseBytes(text); err != nil {
		s.err = err
	} else if s.root, s.err = compileConnect(v, 0); s.err == nil {
		s.cols = resolve(s.root)
		s.defaults = StructDefaults(v)
	}
	if c.byText == nil || len(c.byText) >= maxConnSchemas || c.bytes+len(text) > maxConnSchemaBytes {
		c.byText, c.bytes = map[string]*connSchema{}, 0
	}
	c.byText[s.text] = s
	c.bytes += len(text)
	c.last = s
	return s
}

// Package avrofmt reads the avro route format (route.Avro): each record
// value is a registry-framed Avro datum (magic byte 0, the 4-byte schema
// id, the binary encoding of one record of the registered schema).
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
//
// The reader is four files: avro.go (binding columns, framing, the
// per-record entry points), avro_compile.go (schema → program),
// avro_run.go (the program's interpreter) and avro_json.go (nested values
// as JSON); avro_limits.go bounds what a hostile schema or record may
// make it do. The debezium-avro format (internal/decode/debezium) reads
// its envelopes and keys with two of these readers.
//
// Concurrency: a Reader belongs to one Plan and is used from one
// goroutine.
package avrofmt

import (
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/decode/format"
	"sink/internal/route"
)

// Reader is the avro format's reader (format.Reader): the package
// comment says what it reads and how. A Plan's columns are its first
// slots (by column index); a reader that reads for another (the
// debezium-avro envelope's) adds slots of its own (AddSlot).
type Reader struct {
	env     format.Env // what the reader was made with: a key reader is made alike
	st      *column.State
	policy  *format.Policy
	binds   []Slot // per slot (first the Plan's columns); Path nil for slots not read here
	readers *format.Schemas[*avroProgram]
	// whole: the schema's value as a whole fills the slots (a record key,
	// which may be of any type), rather than fields of a record.
	whole bool
	// image names the top-level field whose record's fields are the row
	// (a Debezium envelope's "after"), for schema drift; "" for the
	// top-level record's own fields.
	image string
	// key reads the record key for $key columns (keyCols), nil if none.
	key     *Reader
	keys    bool // this reader reads record keys (their subjects are TOPIC-key)
	keyCols []bool

	rd   *avro.Reader
	prog *avroProgram // the current record's schema's program

	// per record
	vals  []column.Value    // per slot: the value Begin read
	jv    []*fastjson.Value // per slot read as JSON: its value (converted in Read)
	arena []byte            // the record's strings and number texts
	items int               // array and map items read, bounded by maxAvroItems
	free  format.FreeCount  // values that took no bytes (format's limits)
	size  int               // the payload's length, which bounds any length in it
	dec   format.Unscaled
}

// Slot is what a slot reads: a path into the record, for a column.
type Slot struct {
	Path []string
	Name string // the column, for errors
	Type *chtype.Type
	// Present: the slot only says whether the record at Path is there
	// (column.True) or null (column.Null), e.g. a Debezium event's after
	// image.
	Present bool
}

// New returns the avro format's reader, made with env.
func New(env format.Env) *Reader {
	f := &Reader{env: env, st: env.State, policy: env.Policy, rd: avro.NewReader(nil, 0)}
	f.readers = format.NewSchemas(env.Registry, f.compileSchema)
	return f
}

// newAvroKey returns the reader of registry-framed keys for env.
func newAvroKey(env format.Env) *Reader {
	k := New(env)
	k.whole, k.keys = true, true
	return k
}

// BindKey makes $key column col read the key: a registry-framed key is
// decoded with its schema (a record key becomes a JSON object), any other
// key is its bytes as text.
func (f *Reader) BindKey(col int, c chschema.ColumnSchema, t *chtype.Type) {
	if f.key == nil {
		f.key = newAvroKey(f.env)
	}
	f.key.setSlot(col, Slot{Path: []string{}, Name: c.Name, Type: t})
	for len(f.keyCols) <= col {
		f.keyCols = append(f.keyCols, false)
	}
	f.keyCols[col] = true
}

// newAvroKeyFields returns a reader of the fields of registry-framed
// record keys (a Debezium key record): its slots read the key record's
// fields, checked against the topic's key subjects.
func NewKeyFields(env format.Env) *Reader {
	k := New(env)
	k.keys = true
	return k
}

// SetImage names the top-level field whose record's fields are the row
// (a Debezium envelope's "after"), for schema drift.
func (f *Reader) SetImage(field string) { f.image = field }

// AddSlot adds a slot that reads b, after the Plan's columns and the slots
// added before, and returns its index.
func (f *Reader) AddSlot(b Slot) int {
	i := len(f.binds)
	f.setSlot(i, b)
	return i
}

// IsKey reports that Plan column col reads the record key ($key: BindKey).
func (f *Reader) IsKey(col int) bool { return col < len(f.keyCols) && f.keyCols[col] }

// Value is slot i's scalar value in the record decoded last.
func (f *Reader) Value(i int) *column.Value { return &f.vals[i] }

// setSlot sets what slot i reads.
func (f *Reader) setSlot(i int, b Slot) {
	for len(f.binds) <= i {
		f.binds = append(f.binds, Slot{})
	}
	f.binds[i] = b
}

// Role, Want, Bind, Done, Lenient, Begin and Read are the reader's
// format.Reader methods.

// Role is "": a source has no special meaning in this format.
func (*Reader) Role(string) string { return "" }

// Want lists the sources a column may read.
func (*Reader) Want() string {
	return "a field path such as a.b or " + strings.Join(route.RecordSources(), ", ") + ", " + route.HeaderPrefix + "NAME"
}

// Bind makes slot col read src's path (or the column's name, split at
// its dots: Avro names have none).
func (f *Reader) Bind(col int, c chschema.ColumnSchema, t *chtype.Type, src route.Source, byName bool) error {
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
	f.setSlot(col, Slot{Path: path, Name: c.Name, Type: t})
	return nil
}

// Done sizes the per-record values of the slots bound.
func (f *Reader) Done() error {
	f.sized()
	if f.key != nil {
		f.key.sized()
	}
	return nil
}

// sized allocates the per-record values; call it after the last slot is set.
func (f *Reader) sized() {
	f.vals = make([]column.Value, len(f.binds))
	f.jv = make([]*fastjson.Value, len(f.binds))
}

// Lenient is false: an Avro record's missing values are data.
func (*Reader) Lenient() bool { return false }

// Begin decodes r's framed value (and its key, for $key columns) into the
// slots.
func (f *Reader) Begin(r format.Record) error {
	if r.Value == nil {
		return f.policy.Tombstone()
	}
	if err := f.decodeFramed(r.Value, r.Topic); err != nil {
		return err
	}
	if f.key != nil {
		return f.key.DecodeKey(r.Key, r.Topic)
	}
	return nil
}

// decodeFramed decodes a registry-framed value (a key, with f.keys) of a
// record of topic into the slots.
func (f *Reader) decodeFramed(value []byte, topic string) error {
	id, payload, err := format.Frame(value)
	if err != nil {
		return err
	}
	prog, err := f.readers.Get(id, topic, f.keys)
	if err != nil {
		return err
	}
	return f.decode(prog, payload)
}

// DecodeKey decodes a record key into the slots: registry-framed (magic
// byte 0 and a schema id) with its schema, otherwise its bytes as text, and
// a missing key as missing.
func (f *Reader) DecodeKey(key []byte, topic string) error {
	if len(key) < 5 || key[0] != 0 {
		for i, b := range f.binds {
			if b.Path == nil {
				continue
			}
			f.jv[i] = nil
			f.vals[i] = column.Value{Kind: column.Missing}
			if key != nil {
				f.vals[i] = column.Value{Kind: column.String, Bytes: key}
			}
		}
		return nil
	}
	err := f.decodeFramed(key, topic)
	if br, ok := err.(*format.BadRecord); ok {
		br.Reason = "record key: " + br.Reason
	}
	return err
}

// decode runs prog over payload into f.vals.
func (f *Reader) decode(prog *avroProgram, payload []byte) error {
	f.prog = prog
	for i := range f.binds {
		f.vals[i].Kind = column.Missing
		f.jv[i] = nil
	}
	f.arena = f.arena[:0]
	f.items, f.free = 0, 0
	f.size = len(payload)
	rd := f.rd.Reset(payload)
	rd.Error = nil
	if err := f.run(prog, prog.root, 0); err != nil {
		return format.Bad("", "invalid Avro for schema id "+strconv.Itoa(prog.id)+": "+err.Error())
	}
	if rd.Error != nil {
		return format.Bad("", "invalid Avro for schema id "+strconv.Itoa(prog.id)+": "+avroErr(rd.Error))
	}
	if rd.Peek(); rd.Error == nil {
		return format.Bad("", "invalid Avro for schema id "+strconv.Itoa(prog.id)+": bytes left after the record (is it written with another schema?)")
	}
	return nil
}

func avroErr(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "the record ends early"
	}
	return err.Error()
}

// Read sets in to column col's value in the record Begin decoded.
func (f *Reader) Read(col int, in *column.Value) error {
	if f.IsKey(col) {
		return f.key.ReadSlot(col, in)
	}
	return f.ReadSlot(col, in)
}

// ReadSlot sets in to slot i's value in the record decoded last.
func (f *Reader) ReadSlot(i int, in *column.Value) error {
	if v := f.jv[i]; v != nil {
		f.st.FromJSON(v, in)
		return nil
	}
	*in = f.vals[i]
	return nil
}

// Package protofmt reads the protobuf route format: each record value is
// a Protobuf message framed in the Confluent wire format (magic byte 0, the
// 4-byte schema id, the message indexes, then the payload), described by a
// schema registry.
//
// The first record of each (schema id, message indexes) pair fetches the
// schema (registry.Client caches it), compiles its .proto text with its
// references (protobuf_schema.go) and builds a protoReader: for each column
// the field path it reads, resolved against that message's descriptor.
// Records of that pair then cost one pass over the top-level fields with
// protowire (the Protobuf module's own wire functions), which notes where
// each field the columns need sits, and one conversion per column. A new
// schema id (a producer that added a field) builds a new reader on its
// first record; nothing restarts.
//
// A column reads, by name (or through a columns mapping, dotted paths
// descending into nested messages), a field of the message or a oneof
// (the member that is set). How values reach column types:
//
//	scalars              as the same number, bool or text in JSON would
//	                     (64-bit integers exactly; float and double by their
//	                     shortest text, NaN and ±Inf as Float strings)
//	bytes                the raw bytes (String, FixedString)
//	enum                 its name for String and Enum columns (a number the
//	                     schema does not name: the number), its number otherwise
//	repeated, map,       Array, Map, Tuple and JSON columns: the value as
//	nested message       JSON (field names as in the .proto, enums by name,
//	                     bytes in base64), read by the JSON rules; String
//	                     columns get that JSON text
//	Timestamp            an instant: Date, DateTime, DateTime64, or RFC 3339
//	                     text for String, unix milliseconds for integers
//	Duration             seconds as an exact decimal number ("1.5")
//	wrappers             the wrapped value; an absent wrapper is missing
//	                     (NULL in a Nullable column)
//	Struct, Value,       JSON (JSON columns, String as text)
//	ListValue
//
// A field without presence (a proto3 scalar not marked optional) that is
// absent has its default value, as Protobuf defines; a field with presence
// (a message, a oneof member, an optional field) that is absent is missing,
// which the errors.on_missing policy handles. An absent repeated field or
// map is empty. Groups are not read (a column naming one is missing).
//
// The reader is five files: protobuf.go (binding columns, framing, the
// per-(schema id, message) reader cache), protobuf_reader.go (the compiled
// reader and its field scan), protobuf_read.go (a column's value),
// protobuf_wkt.go (Timestamp, Duration, wrappers) and protobuf_json.go
// (composite values as JSON); protobuf_schema.go compiles the .proto text.
//
// Concurrency: a Reader belongs to one Plan and is used from one
// goroutine; compiled schemas are shared between Plans behind a mutex
// (descriptors are immutable).
package protofmt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/decode/format"
	"sink/internal/registry"
	"sink/internal/route"
)

// Reader is the protobuf format's reader (format.Reader): the package
// comment says what it reads and how.
type Reader struct {
	st      *column.State
	policy  *format.Policy
	msgType string                      // the route's message type (full name); "" reads every type
	schemas *format.Schemas[*protoFile] // compiled schemas by id

	binds   []protoBind             // per Plan column; path nil for record attributes
	readers map[string]*protoReader // by frame key (schema id and message indexes)
	cur     *protoReader            // the reader of the current record
	lastKey []byte                  // the key of cur
	key     []byte                  // frame key scratch
	idx     []int                   // message index scratch
	payload []byte                  // the current record's payload
	occ     []protoOcc              // occurrences found below the top level
	num     []byte                  // number text scratch
	js      pbJSON                  // JSON transcoding (protobuf_json.go)
	jp      fastjson.Parser         // parses js's output for composite columns
	empty   [2]*fastjson.Value      // "[]" and "{}" for absent repeated fields and maps
	emptyP  fastjson.Parser         // owns empty

	// $key columns (bindKey): the record key, registry-framed or not.
	keyCols []bool
	keyIn   column.Value // the current record's key as the $key columns read it
	keyText []byte       // a framed key's message as JSON
	keyIdx  []int        // message index scratch for keys
}

// protoBind is what the plan bound to one column.
type protoBind struct {
	path []string
	t    *chtype.Type
	cls  chtype.Class
	text bool // the column keeps JSON as text (String, FixedString, JSON)
	enum bool // the column takes enum names (String, Enum8, Enum16)
}

// maxProtoDepth bounds message nesting in Protobuf records (a recursive
// schema and a hostile payload could otherwise nest until the stack runs
// out; protobuf-go's own limit is 10000, real data nests a handful deep).
const maxProtoDepth = 100

// New returns the protobuf format's reader, made with env (env.Message:
// the one message type it reads).
func New(env format.Env) *Reader {
	f := &Reader{st: env.State, policy: env.Policy, msgType: env.Message, readers: map[string]*protoReader{}}
	f.schemas = format.NewSchemas(env.Registry, buildProtoFile)
	f.empty[0], _ = f.emptyP.Parse("[]")
	f.empty[1], _ = f.emptyP.Parse("{}")
	// emptyP's values stay valid: the parser is never used again.
	return f
}

// Role, Want, Bind, Done, Lenient, Begin and Read are the reader's
// format.Reader methods.

// Role is "": a source has no special meaning in this format.
func (*Reader) Role(string) string { return "" }

// Want lists the sources a column may read.
func (*Reader) Want() string {
	return "a field path such as a.b or " + strings.Join(route.RecordSources(), ", ") + ", " + route.HeaderPrefix + "NAME"
}

// Bind makes column col read src's field path.
func (f *Reader) Bind(col int, c chschema.ColumnSchema, t *chtype.Type, src route.Source, byName bool) error {
	for len(f.binds) <= col {
		f.binds = append(f.binds, protoBind{})
	}
	b := protoBind{path: src.Path, t: t, cls: t.Class()}
	base := t.Base()
	b.text = b.cls == chtype.ClassString || base.Kind == chtype.JSON
	b.enum = b.cls == chtype.ClassString || base.Kind == chtype.Enum8 || base.Kind == chtype.Enum16
	f.binds[col] = b
	return nil
}

// Done accepts every plan.
func (f *Reader) Done() error { return nil }

// BindKey makes $key column col read the record key: a registry-framed
// Protobuf key (as Confluent's Protobuf key serializer writes it) is
// decoded with its schema and read as the JSON of its message (String
// columns keep the text); any other key is its bytes as text.
func (f *Reader) BindKey(col int, c chschema.ColumnSchema, t *chtype.Type) {
	for len(f.keyCols) <= col {
		f.keyCols = append(f.keyCols, false)
	}
	f.keyCols[col] = true
	_ = f.Bind(col, c, t, route.Source{Kind: route.Key}, false)
}

// decodeKey sets f.keyIn to the record key (of a record of topic) as the
// $key columns read it.
func (f *Reader) decodeKey(key []byte, topic string) error {
	if key == nil {
		f.keyIn = column.Value{Kind: column.Missing}
		return nil
	}
	if len(key) < 6 || key[0] != 0 {
		f.keyIn = column.Value{Kind: column.String, Bytes: key}
		return nil
	}
	id, idx, payload, err := registry.ParseProtobufFrame(key, f.keyIdx[:0])
	if err != nil {
		return format.Bad("", "record key: "+err.Error())
	}
	f.keyIdx = idx
	pf, err := f.schemas.Get(id, topic, true)
	if err != nil {
		if br, ok := err.(*format.BadRecord); ok {
			br.Reason = "record key: " + br.Reason
		}
		return err
	}
	md, err := messageAt(pf.fd, idx)
	if err != nil {
		return format.Bad("", fmt.Sprintf("record key: schema id %d: %v", id, err))
	}
	out, err := f.js.message(f.keyText[:0], md, payload, 0)
	if err != nil {
		return format.Bad("", "record key: "+err.Error())
	}
	f.keyText = out
	f.keyIn = column.Value{Kind: column.Object}
	return nil
}

// Lenient is false: a Protobuf record's missing values are data.
func (*Reader) Lenient() bool { return false }

// maxProtoReaders bounds the per-plan readers (one per schema id and
// message type); past it the cache starts over.
const maxProtoReaders = 256

// Begin reads r's frame, picks the reader of its schema id and message
// (building it on first sight) and notes where the columns' fields are.
func (f *Reader) Begin(r format.Record) error {
	if r.Value == nil {
		return f.policy.Tombstone()
	}
	id, idx, payload, err := registry.ParseProtobufFrame(r.Value, f.idx[:0])
	if err != nil {
		return format.Bad("", err.Error())
	}
	f.idx = idx
	// The schema, checked against the topic (cached: the readers below
	// are per schema id and message, not per topic).
	if _, err := f.schemas.Get(id, r.Topic, false); err != nil {
		return err
	}
	f.key = binary.AppendUvarint(f.key[:0], uint64(id))
	for _, i := range idx {
		f.key = binary.AppendUvarint(f.key, uint64(i))
	}
	rd := f.cur
	if rd == nil || !bytes.Equal(f.key, f.lastKey) {
		rd = f.readers[string(f.key)]
		if rd == nil {
			if rd, err = f.newReader(id, idx, r.Topic); err != nil {
				return err
			}
			if len(f.readers) >= maxProtoReaders {
				clear(f.readers)
			}
			f.readers[string(f.key)] = rd
		}
		f.cur = rd
		f.lastKey = append(f.lastKey[:0], f.key...)
	}
	if rd.skip != nil {
		return rd.skip
	}
	f.js.start(f.policy.RowBytes())
	f.payload = payload
	if err := rd.scan(payload); err != nil {
		return err
	}
	if f.keyCols != nil {
		return f.decodeKey(r.Key, r.Topic)
	}
	return nil
}

// newReader builds the reader of schema id's message at indexes, for a
// record of topic. A schema
// the registry cannot serve now is an error matching ErrUnavailable (retry;
// the record is fine); anything the record's frame is to blame for is a
// *format.BadRecord.
func (f *Reader) newReader(id int, idx []int, topic string) (*protoReader, error) {
	pf, err := f.schemas.Get(id, topic, false)
	if err != nil {
		return nil, err
	}
	md, err := messageAt(pf.fd, idx)
	if err != nil {
		return nil, format.Bad("", fmt.Sprintf("schema id %d: %v", id, err))
	}
	return f.compileReader(md), nil
}

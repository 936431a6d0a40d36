package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"sink/internal/registry"
	"sink/internal/route"
)

// protoFormat is the protobuf route format: each record value is a
// Protobuf message framed in the Confluent wire format (magic byte 0, the
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
type protoFormat struct {
	st      *appendState
	policy  *Policy
	msgType string                     // the route's message type (full name); "" reads every type
	schemas *schemaReaders[*protoFile] // compiled schemas by id (registry.go)

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
	keyIn   input  // the current record's key as the $key columns read it
	keyText []byte // a framed key's message as JSON
	keyIdx  []int  // message index scratch for keys
}

// protoBind is what the plan bound to one column.
type protoBind struct {
	path []string
	t    *chType
	cls  colClass
	text bool // the column keeps JSON as text (String, FixedString, JSON)
	enum bool // the column takes enum names (String, Enum8, Enum16)
}

// protoFile is a compiled schema.
type protoFile struct {
	fd protoreflect.FileDescriptor
}

// buildProtoFile compiles a registry schema for schemaReaders; its error
// makes every record of the schema bad.
func buildProtoFile(s *registry.Schema) (*protoFile, error) {
	if s.Type != sr.TypeProtobuf {
		return nil, fmt.Errorf("schema id %d is a %s schema, not Protobuf", s.ID, s.Type)
	}
	fd, err := compileProtoSchema(s)
	if err != nil {
		return nil, err
	}
	return &protoFile{fd: fd}, nil
}

// protoReader reads one message type of one schema id.
type protoReader struct {
	md     protoreflect.MessageDescriptor
	skip   error                      // set when the route reads another message type (matches ErrSkip)
	dense  []int32                    // field number -> slot+1, for numbers below len(dense)
	sparse map[protowire.Number]int32 // the same for larger numbers
	slots  []protoSlot
	cols   []protoCol // per Plan column
	// unmapped: the message's top-level fields no column reads (schema drift).
	unmapped knownUnmapped
}

// protoSlot is one top-level field some column reads: where it occurs in
// the current record.
type protoSlot struct {
	info *pbInfo
	occ  []protoOcc
}

// pbInfo is what reading a field needs of its descriptor, taken from it
// once per reader (descriptor methods are too slow for every record).
type pbInfo struct {
	fd       protoreflect.FieldDescriptor
	kind     protoreflect.Kind
	wt       protowire.Type // the wire type of one element
	list     bool
	isMap    bool
	presence bool
	packable bool // a repeated scalar: may come packed
	msg      protoreflect.MessageDescriptor
	wkt      wkt
	enum     protoreflect.EnumValueDescriptors
	inner    *pbInfo // a wrapper's value field
	defV     uint64  // the default value, as scalarAt decodes it
	defP     []byte
}

func newInfo(fd protoreflect.FieldDescriptor) *pbInfo {
	i := &pbInfo{fd: fd, kind: fd.Kind(), list: fd.IsList(), isMap: fd.IsMap(), presence: fd.HasPresence()}
	i.wt = wireOf(i.kind)
	i.packable = i.list && i.wt != protowire.BytesType
	if !i.list && !i.isMap {
		if i.msg = fd.Message(); i.msg != nil {
			i.wkt = wellKnown(i.msg)
			if i.wkt == wktWrapper {
				i.inner = newInfo(i.msg.Fields().ByNumber(1))
			}
		} else {
			i.defV, i.defP = defaultScalar(fd)
		}
	}
	if e := fd.Enum(); e != nil {
		i.enum = e.Values()
	}
	return i
}

// fits reports whether an occurrence with wire type wt is this field's
// (a repeated scalar may also come packed). Protobuf parsers treat any
// other occurrence as an unknown field, and so does this format.
func (i *pbInfo) fits(wt protowire.Type) bool {
	return wt == i.wt || (i.packable && wt == protowire.BytesType)
}

// protoOcc is one occurrence of a field: the offset of its value (after the
// tag) in the message bytes, and its wire type.
type protoOcc struct {
	off int32
	wt  protowire.Type
}

// protoStep is one element of a column's path: a field, or a oneof (any of
// its members).
type protoStep struct {
	nums  []protowire.Number
	infos []*pbInfo
}

// protoCol is one column's path through a message type.
type protoCol struct {
	bound bool    // the format reads this column
	never bool    // the path names nothing in this message type: always missing
	slots []int32 // the first step's slots
	rest  []protoStep
	first protoStep // the first step (for absent-field defaults)
}

func newProtoFormat(env formatEnv) *protoFormat {
	f := &protoFormat{st: env.st, policy: env.pol, msgType: env.message, readers: map[string]*protoReader{}}
	f.schemas = newSchemaReaders(env.reg, buildProtoFile)
	f.empty[0], _ = f.emptyP.Parse("[]")
	f.empty[1], _ = f.emptyP.Parse("{}")
	// emptyP's values stay valid: the parser is never used again.
	return f
}

func (*protoFormat) role(string) string { return "" }

func (*protoFormat) want() string {
	return "a field path such as a.b or " + strings.Join(route.RecordSources(), ", ") + ", " + route.HeaderPrefix + "NAME"
}

func (f *protoFormat) bind(col int, c ColumnSchema, t *chType, src route.Source, byName bool) error {
	for len(f.binds) <= col {
		f.binds = append(f.binds, protoBind{})
	}
	b := protoBind{path: src.Path, t: t, cls: classOf(t)}
	base := t.base()
	b.text = b.cls == clsString || base.kind == kJSON
	b.enum = b.cls == clsString || base.kind == kEnum8 || base.kind == kEnum16
	f.binds[col] = b
	return nil
}

func (f *protoFormat) done() error { return nil }

// bindKey makes $key column col read the record key: a registry-framed
// Protobuf key (as Confluent's Protobuf key serializer writes it) is
// decoded with its schema and read as the JSON of its message (String
// columns keep the text); any other key is its bytes as text.
func (f *protoFormat) bindKey(col int, c ColumnSchema, t *chType) {
	for len(f.keyCols) <= col {
		f.keyCols = append(f.keyCols, false)
	}
	f.keyCols[col] = true
	_ = f.bind(col, c, t, route.Source{Kind: route.Key}, false)
}

// decodeKey sets f.keyIn to the record key as the $key columns read it.
func (f *protoFormat) decodeKey(key []byte) error {
	if key == nil {
		f.keyIn = input{kind: inMissing}
		return nil
	}
	if len(key) < 6 || key[0] != 0 {
		f.keyIn = input{kind: inStr, b: key}
		return nil
	}
	id, idx, payload, err := registry.ParseProtobufFrame(key, f.keyIdx[:0])
	if err != nil {
		return bad("", "record key: "+err.Error())
	}
	f.keyIdx = idx
	pf, err := f.schemas.get(id)
	if err != nil {
		if br, ok := err.(*badRecord); ok {
			br.reason = "record key: " + br.reason
		}
		return err
	}
	md, err := messageAt(pf.fd, idx)
	if err != nil {
		return bad("", fmt.Sprintf("record key: schema id %d: %v", id, err))
	}
	out, err := f.js.message(f.keyText[:0], md, payload, 0)
	if err != nil {
		return bad("", "record key: "+err.Error())
	}
	f.keyText = out
	f.keyIn = input{kind: inObject}
	return nil
}

func (*protoFormat) lenient() bool { return false }

// maxProtoReaders bounds the per-plan readers (one per schema id and
// message type); past it the cache starts over.
const maxProtoReaders = 256

func (f *protoFormat) begin(r recordData) error {
	if r.value == nil {
		if f.policy.TombstoneBad {
			return bad("", "tombstone (null value) and errors.on_tombstone is bad_record")
		}
		return errTombstone
	}
	id, idx, payload, err := registry.ParseProtobufFrame(r.value, f.idx[:0])
	if err != nil {
		return bad("", err.Error())
	}
	f.idx = idx
	f.key = binary.AppendUvarint(f.key[:0], uint64(id))
	for _, i := range idx {
		f.key = binary.AppendUvarint(f.key, uint64(i))
	}
	rd := f.cur
	if rd == nil || !bytes.Equal(f.key, f.lastKey) {
		rd = f.readers[string(f.key)]
		if rd == nil {
			if rd, err = f.newReader(id, idx); err != nil {
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
	f.payload = payload
	if err := rd.scan(payload); err != nil {
		return err
	}
	if f.keyCols != nil {
		return f.decodeKey(r.key)
	}
	return nil
}

// newReader builds the reader of schema id's message at indexes. A schema
// the registry cannot serve now is an error matching ErrUnavailable (retry;
// the record is fine); anything the record's frame is to blame for is a
// *badRecord.
func (f *protoFormat) newReader(id int, idx []int) (*protoReader, error) {
	pf, err := f.schemas.get(id)
	if err != nil {
		return nil, err
	}
	md, err := messageAt(pf.fd, idx)
	if err != nil {
		return nil, bad("", fmt.Sprintf("schema id %d: %v", id, err))
	}
	return f.compileReader(md), nil
}

// compileReader resolves every bound column's path in md.
func (f *protoFormat) compileReader(md protoreflect.MessageDescriptor) *protoReader {
	rd := &protoReader{md: md, cols: make([]protoCol, len(f.binds))}
	if f.msgType != "" && string(md.FullName()) != f.msgType {
		rd.skip = fmt.Errorf("%w: message type %s (the route reads %s)", ErrSkip, md.FullName(), f.msgType)
		return rd
	}
	for i, b := range f.binds {
		if b.path == nil {
			continue
		}
		c := &rd.cols[i]
		c.bound = true
		cur := md
		for depth, name := range b.path {
			st, ok := resolveStep(cur, name)
			if !ok {
				c.never = true
				break
			}
			if depth == 0 {
				c.first = st
				for _, fi := range st.infos {
					c.slots = append(c.slots, rd.slot(fi))
				}
			} else {
				c.rest = append(c.rest, st)
			}
			if depth < len(b.path)-1 {
				// Descend: only through one singular message field.
				if len(st.infos) != 1 || st.infos[0].msg == nil {
					c.never = true
					break
				}
				cur = st.infos[0].msg
			}
		}
	}
	rd.findUnmapped()
	return rd
}

// findUnmapped lists the message's top-level fields that no column's path
// starts at (groups, which are not read, excepted).
func (rd *protoReader) findUnmapped() {
	fields := rd.md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.Kind() == protoreflect.GroupKind || rd.reads(fd.Number()) {
			continue
		}
		rd.unmapped.fields = append(rd.unmapped.fields, schemaField{name: string(fd.Name()), typ: protoSchemaType(fd)})
	}
}

// reads reports whether some column's path starts at field n.
func (rd *protoReader) reads(n protowire.Number) bool {
	for i := range rd.cols {
		if slices.Contains(rd.cols[i].first.nums, n) {
			return true
		}
	}
	return false
}

// unmappedFields returns the unmapped fields of the message type of the
// record decoded last (drift.go).
func (f *protoFormat) unmappedFields() *knownUnmapped {
	if f.cur == nil || f.cur.skip != nil {
		return nil
	}
	return &f.cur.unmapped
}

// resolveStep finds name in md: a field (groups excepted) or a oneof.
func resolveStep(md protoreflect.MessageDescriptor, name string) (protoStep, bool) {
	if fd := md.Fields().ByName(protoreflect.Name(name)); fd != nil {
		if fd.Kind() == protoreflect.GroupKind {
			return protoStep{}, false
		}
		return protoStep{nums: []protowire.Number{fd.Number()}, infos: []*pbInfo{newInfo(fd)}}, true
	}
	od := md.Oneofs().ByName(protoreflect.Name(name))
	if od == nil {
		return protoStep{}, false
	}
	var st protoStep
	for i := 0; i < od.Fields().Len(); i++ {
		fd := od.Fields().Get(i)
		if fd.Kind() == protoreflect.GroupKind {
			continue
		}
		st.nums = append(st.nums, fd.Number())
		st.infos = append(st.infos, newInfo(fd))
	}
	return st, len(st.infos) > 0
}

// maxDense bounds the field numbers looked up by slice; larger ones (rare)
// go through a map.
const maxDense = 1024

// slot returns the field's slot, adding one.
func (rd *protoReader) slot(fi *pbInfo) int32 {
	n := fi.fd.Number()
	if n < maxDense {
		for int(n) >= len(rd.dense) {
			rd.dense = append(rd.dense, 0)
		}
		if s := rd.dense[n]; s > 0 {
			return s - 1
		}
	} else if s, ok := rd.sparse[n]; ok {
		return s
	}
	s := int32(len(rd.slots))
	rd.slots = append(rd.slots, protoSlot{info: fi})
	if n < maxDense {
		rd.dense[n] = s + 1
	} else {
		if rd.sparse == nil {
			rd.sparse = map[protowire.Number]int32{}
		}
		rd.sparse[n] = s
	}
	return s
}

func (rd *protoReader) lookup(n protowire.Number) (int32, bool) {
	if n < protowire.Number(len(rd.dense)) {
		s := rd.dense[n]
		return s - 1, s > 0
	}
	if rd.sparse == nil {
		return 0, false
	}
	s, ok := rd.sparse[n]
	return s, ok
}

// scan notes where each field a column reads occurs in payload. Every
// top-level field's framing is checked (a truncated or malformed payload
// is a bad record); fields no column reads are skipped.
func (rd *protoReader) scan(b []byte) error {
	for i := range rd.slots {
		rd.slots[i].occ = rd.slots[i].occ[:0]
	}
	if len(b) > math.MaxInt32 {
		return bad("", "Protobuf payload larger than 2 GiB")
	}
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return bad("", "invalid Protobuf payload at byte "+strconv.Itoa(off)+": "+protowire.ParseError(n).Error())
		}
		val := off + n
		m := protowire.ConsumeFieldValue(num, wt, b[val:])
		if m < 0 {
			return bad("", "invalid Protobuf payload: field "+strconv.Itoa(int(num))+": "+protowire.ParseError(m).Error())
		}
		if s, ok := rd.lookup(num); ok && rd.slots[s].info.fits(wt) {
			rd.slots[s].occ = append(rd.slots[s].occ, protoOcc{off: int32(val), wt: wt})
		}
		off = val + m
	}
	return nil
}

// wireOf is the wire type a field of kind k is written with (one element,
// not packed).
func wireOf(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
		protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.BytesType
}

// wireFits reports whether an occurrence of fd with wire type wt is fd's
// (a repeated scalar may also come packed). Protobuf parsers treat any
// other occurrence as an unknown field, and so does this format.
func wireFits(fd protoreflect.FieldDescriptor, wt protowire.Type) bool {
	w := wireOf(fd.Kind())
	return wt == w || (fd.IsList() && wt == protowire.BytesType && w != protowire.BytesType)
}

// scalarAt decodes the scalar of wire type wt at the start of b: the number
// in v (float and double as their bits), or the bytes of a length-delimited
// value in p. ok is false when b is malformed.
func scalarAt(wt protowire.Type, b []byte) (v uint64, p []byte, n int) {
	switch wt {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(b)
	case protowire.Fixed32Type:
		var u uint32
		u, n = protowire.ConsumeFixed32(b)
		v = uint64(u)
	case protowire.Fixed64Type:
		v, n = protowire.ConsumeFixed64(b)
	case protowire.BytesType:
		p, n = protowire.ConsumeBytes(b)
	default:
		n = -1
	}
	return v, p, n
}

func (f *protoFormat) read(col int, in *input) error {
	if col < len(f.keyCols) && f.keyCols[col] {
		if f.keyIn.kind == inObject { // a framed key: its message as JSON
			return f.composite(f.keyText, &f.binds[col], in)
		}
		*in = f.keyIn
		return nil
	}
	c := &f.cur.cols[col]
	if c.never {
		in.kind = inMissing
		return nil
	}
	rd := f.cur
	// The first step: the slot with the latest occurrence (a oneof's set
	// member is the one written last).
	var fi *pbInfo
	var occ []protoOcc
	best := int32(-1)
	for _, s := range c.slots {
		sl := &rd.slots[s]
		if n := len(sl.occ); n > 0 && sl.occ[n-1].off > best {
			best, fi, occ = sl.occ[n-1].off, sl.info, sl.occ
		}
	}
	buf := f.payload
	if fi == nil {
		return f.absent(c.first, col, in)
	}
	for _, st := range c.rest {
		// fi is a singular message field (compileReader checked): descend
		// into its last occurrence.
		sub, n := protowire.ConsumeBytes(buf[occ[len(occ)-1].off:])
		if n < 0 {
			return badWire(fi.fd, n)
		}
		var err error
		if fi, err = f.find(sub, st); err != nil {
			return err
		}
		if fi == nil {
			return f.absent(st, col, in)
		}
		buf, occ = sub, f.occ
	}
	return f.value(fi, buf, occ, col, in)
}

// find collects into f.occ the occurrences in message b of step st's field
// (for a oneof, of the member written last) and returns that field, or nil
// when none occurs.
func (f *protoFormat) find(b []byte, st protoStep) (*pbInfo, error) {
	f.occ = f.occ[:0]
	var found *pbInfo
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return nil, reasonf("invalid Protobuf message: %v", protowire.ParseError(n))
		}
		val := off + n
		m := protowire.ConsumeFieldValue(num, wt, b[val:])
		if m < 0 {
			return nil, reasonf("invalid Protobuf message: field %d: %v", num, protowire.ParseError(m))
		}
		for i, sn := range st.nums {
			if sn == num && st.infos[i].fits(wt) {
				if found != st.infos[i] {
					f.occ = f.occ[:0] // another oneof member replaces the one before
					found = st.infos[i]
				}
				f.occ = append(f.occ, protoOcc{off: int32(val), wt: wt})
			}
		}
		off = val + m
	}
	return found, nil
}

// absent sets in for a step whose field does not occur: missing for a
// field with presence or a oneof, empty for a repeated field or map, the
// default value otherwise.
func (f *protoFormat) absent(st protoStep, col int, in *input) error {
	if len(st.infos) != 1 {
		in.kind = inMissing
		return nil
	}
	fi := st.infos[0]
	text := f.binds[col].text
	switch {
	case fi.list && text:
		in.kind, in.b = inStr, emptyArrayText
	case fi.list:
		in.kind, in.v = inArray, f.empty[0]
	case fi.isMap && text:
		in.kind, in.b = inStr, emptyObjectText
	case fi.isMap:
		in.kind, in.v = inObject, f.empty[1]
	case fi.presence:
		in.kind = inMissing
	default:
		f.scalar(fi, fi.defV, fi.defP, &f.binds[col], in)
	}
	return nil
}

var (
	emptyArrayText  = []byte("[]")
	emptyObjectText = []byte("{}")
)

// defaultScalar is fd's default value as scalarAt would decode it.
func defaultScalar(fd protoreflect.FieldDescriptor) (uint64, []byte) {
	d := fd.Default()
	switch fd.Kind() {
	case protoreflect.BoolKind:
		if d.Bool() {
			return 1, nil
		}
		return 0, nil
	case protoreflect.EnumKind:
		return uint64(d.Enum()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return uint64(d.Int()), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return d.Uint(), nil
	case protoreflect.FloatKind:
		return uint64(math.Float32bits(float32(d.Float()))), nil
	case protoreflect.DoubleKind:
		return math.Float64bits(d.Float()), nil
	case protoreflect.StringKind:
		return 0, s2b(d.String())
	case protoreflect.BytesKind:
		return 0, d.Bytes()
	}
	return 0, nil
}

// value sets in to field fd's value, given its occurrences in buf.
func (f *protoFormat) value(fi *pbInfo, buf []byte, occ []protoOcc, col int, in *input) error {
	b := &f.binds[col]
	if fi.list || fi.isMap {
		out, err := f.js.field(f.js.out[:0], fi.fd, buf, occ)
		if err != nil {
			return err
		}
		f.js.out = out
		return f.composite(out, b, in)
	}
	last := occ[len(occ)-1]
	if fi.msg != nil {
		sub, n := protowire.ConsumeBytes(buf[last.off:])
		if n < 0 {
			return badWire(fi.fd, n)
		}
		return f.message(fi, sub, b, in)
	}
	v, p, n := scalarAt(last.wt, buf[last.off:])
	if n < 0 {
		return badWire(fi.fd, n)
	}
	f.scalar(fi, v, p, b, in)
	return nil
}

// scalar sets in to a scalar field's value.
func (f *protoFormat) scalar(fi *pbInfo, v uint64, p []byte, b *protoBind, in *input) {
	switch fi.kind {
	case protoreflect.BoolKind:
		if v != 0 {
			in.kind = inTrue
		} else {
			in.kind = inFalse
		}
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		in.kind, in.n = inInt, int64(int32(v))
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		in.kind, in.n = inInt, int64(v)
	case protoreflect.Sint32Kind:
		in.kind, in.n = inInt, int64(int32(protowire.DecodeZigZag(v&math.MaxUint32)))
	case protoreflect.Sint64Kind:
		in.kind, in.n = inInt, protowire.DecodeZigZag(v)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		in.kind, in.n = inInt, int64(uint32(v))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if v <= math.MaxInt64 {
			in.kind, in.n = inInt, int64(v)
		} else {
			f.num = strconv.AppendUint(f.num[:0], v, 10)
			in.kind, in.b = inNum, f.num
		}
	case protoreflect.FloatKind:
		f.float(float64(math.Float32frombits(uint32(v))), 32, in)
	case protoreflect.DoubleKind:
		f.float(math.Float64frombits(v), 64, in)
	case protoreflect.EnumKind:
		n := int32(v)
		if b.enum {
			if ev := fi.enum.ByNumber(protoreflect.EnumNumber(n)); ev != nil {
				in.kind, in.b = inStr, s2b(string(ev.Name()))
				return
			}
		}
		in.kind, in.n = inInt, int64(n)
	default: // string, bytes
		in.kind, in.b = inStr, p
	}
}

func (f *protoFormat) float(x float64, bits int, in *input) {
	switch {
	case math.IsNaN(x):
		in.kind, in.b = inStr, nanText
	case math.IsInf(x, 1):
		in.kind, in.b = inStr, posInfText
	case math.IsInf(x, -1):
		in.kind, in.b = inStr, negInfText
	default:
		f.num = strconv.AppendFloat(f.num[:0], x, 'g', -1, bits)
		in.kind, in.b = inNum, f.num
	}
}

var (
	nanText    = []byte("NaN")
	posInfText = []byte("+Inf")
	negInfText = []byte("-Inf")
)

// message sets in to a message field's value: the well-known types that
// are one value (Timestamp, Duration, wrappers) as that value, any other
// message as JSON.
func (f *protoFormat) message(fi *pbInfo, sub []byte, b *protoBind, in *input) error {
	md := fi.msg
	switch fi.wkt {
	case wktTimestamp:
		t, err := timestampOf(sub)
		if err != nil {
			return err
		}
		in.kind, in.t, in.n = inTime, t, t.UnixMilli()
		return nil
	case wktDuration:
		out, err := durationText(f.num[:0], sub)
		if err != nil {
			return err
		}
		f.num = out
		in.kind, in.b = inNum, out
		return nil
	case wktWrapper:
		inner := fi.inner
		var v uint64
		var p []byte
		found := false
		for off := 0; off < len(sub); {
			num, wt, n := protowire.ConsumeTag(sub[off:])
			if n < 0 {
				return reasonf("invalid Protobuf %s: %v", md.FullName(), protowire.ParseError(n))
			}
			m := protowire.ConsumeFieldValue(num, wt, sub[off+n:])
			if m < 0 {
				return reasonf("invalid Protobuf %s: %v", md.FullName(), protowire.ParseError(m))
			}
			if num == 1 && wt == inner.wt {
				v, p, _ = scalarAt(wt, sub[off+n:])
				found = true
			}
			off += n + m
		}
		if !found {
			v, p = inner.defV, inner.defP
		}
		f.scalar(inner, v, p, b, in)
		return nil
	}
	out, err := f.js.message(f.js.out[:0], md, sub, 0)
	if err != nil {
		return err
	}
	f.js.out = out
	return f.composite(out, b, in)
}

// composite sets in to a JSON value made from a Protobuf value: the text
// itself for columns that keep text, else the parsed value.
func (f *protoFormat) composite(text []byte, b *protoBind, in *input) error {
	if b.text {
		in.kind, in.b = inStr, text
		return nil
	}
	v, err := f.jp.ParseBytes(text)
	if err != nil { // the transcoder writes valid JSON; this is a bug guard
		return reasonf("internal error: Protobuf value as JSON: %v", err)
	}
	f.st.fromJSON(v, in)
	return nil
}

// The well-known types that get a mapping of their own.
type wkt uint8

const (
	wktNone wkt = iota
	wktTimestamp
	wktDuration
	wktWrapper
	wktStruct
	wktValue
	wktList
)

func wellKnown(md protoreflect.MessageDescriptor) wkt {
	name := md.FullName()
	if !strings.HasPrefix(string(name), "google.protobuf.") {
		return wktNone
	}
	switch name {
	case "google.protobuf.Timestamp":
		return wktTimestamp
	case "google.protobuf.Duration":
		return wktDuration
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return wktWrapper
	case "google.protobuf.Struct":
		return wktStruct
	case "google.protobuf.Value":
		return wktValue
	case "google.protobuf.ListValue":
		return wktList
	}
	return wktNone
}

// secondsAndNanos reads a Timestamp or Duration: seconds (field 1), nanos
// (field 2).
func secondsAndNanos(b []byte) (sec int64, nanos int32, err error) {
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return 0, 0, reasonf("invalid Protobuf seconds/nanos message: %v", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, wt, b[off+n:])
		if m < 0 {
			return 0, 0, reasonf("invalid Protobuf seconds/nanos message: %v", protowire.ParseError(m))
		}
		if wt == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b[off+n:])
			switch num {
			case 1:
				sec = int64(v)
			case 2:
				nanos = int32(v)
			}
		}
		off += n + m
	}
	return sec, nanos, nil
}

// Timestamp's valid range (google/protobuf/timestamp.proto): 0001-01-01 to
// 9999-12-31 UTC.
const (
	minTimestamp = -62135596800
	maxTimestamp = 253402300799
)

func timestampOf(b []byte) (time.Time, error) {
	sec, nanos, err := secondsAndNanos(b)
	if err != nil {
		return time.Time{}, err
	}
	if sec < minTimestamp || sec > maxTimestamp || nanos < 0 || nanos > 999_999_999 {
		return time.Time{}, reasonf("invalid google.protobuf.Timestamp (seconds %d, nanos %d)", sec, nanos)
	}
	return time.Unix(sec, int64(nanos)).UTC(), nil
}

// durationText appends a Duration as exact decimal seconds ("-1.5").
func durationText(dst, b []byte) ([]byte, error) {
	sec, nanos, err := secondsAndNanos(b)
	if err != nil {
		return nil, err
	}
	if nanos <= -1_000_000_000 || nanos >= 1_000_000_000 || (sec > 0 && nanos < 0) || (sec < 0 && nanos > 0) {
		return nil, reasonf("invalid google.protobuf.Duration (seconds %d, nanos %d)", sec, nanos)
	}
	if sec < 0 || nanos < 0 {
		dst = append(dst, '-')
	}
	dst = strconv.AppendUint(dst, absU(sec), 10)
	if nanos != 0 {
		if nanos < 0 {
			nanos = -nanos
		}
		start := len(dst)
		dst = append(dst, '.')
		dst = strconv.AppendInt(dst, int64(nanos)+1_000_000_000, 10)
		dst = append(dst[:start+1], dst[start+2:]...) // drop the leading 1
		for dst[len(dst)-1] == '0' {
			dst = dst[:len(dst)-1]
		}
	}
	return dst, nil
}

func absU(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

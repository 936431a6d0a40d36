package protofmt

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"sink/internal/decode/drift"
	"sink/internal/decode/format"
	"sink/internal/registry"
)

// The protobuf format's compiled reader: a message descriptor and the bound
// columns become a protoReader (each column's field path, resolved once),
// and scan notes in one pass over the top-level fields where each field
// the columns need sits.

// protoFile is a compiled schema.
type protoFile struct {
	fd protoreflect.FileDescriptor
}

// buildProtoFile compiles a registry schema for format.Schemas; its error
// makes every record of the schema bad.
func buildProtoFile(s *registry.Schema) (*protoFile, error) {
	if s.Type != sr.TypeProtobuf {
		return nil, fmt.Errorf("schema id %d is a %s schema, not Protobuf", s.ID, s.Type)
	}
	fd, err := CompileSchema(s)
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
	unmapped drift.Known
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

// compileReader resolves every bound column's path in md.
func (f *Reader) compileReader(md protoreflect.MessageDescriptor) *protoReader {
	rd := &protoReader{md: md, cols: make([]protoCol, len(f.binds))}
	if f.msgType != "" && string(md.FullName()) != f.msgType {
		rd.skip = fmt.Errorf("%w: message type %s (the route reads %s)", format.ErrSkip, md.FullName(), f.msgType)
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
		rd.unmapped.Fields = append(rd.unmapped.Fields, drift.Field{Name: string(fd.Name()), Type: protoSchemaType(fd)})
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

// UnmappedFields returns the unmapped fields of the message type of the
// record decoded last (drift.KnownReader).
func (f *Reader) UnmappedFields() *drift.Known {
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
		return format.Bad("", "Protobuf payload larger than 2 GiB")
	}
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return format.Bad("", "invalid Protobuf payload at byte "+strconv.Itoa(off)+": "+protowire.ParseError(n).Error())
		}
		val := off + n
		m := protowire.ConsumeFieldValue(num, wt, b[val:])
		if m < 0 {
			return format.Bad("", "invalid Protobuf payload: field "+strconv.Itoa(int(num))+": "+protowire.ParseError(m).Error())
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

// protoSchemaType is the column type of Protobuf field fd.
func protoSchemaType(fd protoreflect.FieldDescriptor) *drift.SchemaType {
	switch {
	case fd.IsMap():
		return drift.MapType(protoKindType(fd.MapValue()), "map<"+protoLabel(fd.MapKey())+", "+protoLabel(fd.MapValue())+">")
	case fd.IsList():
		return drift.ArrayType(protoKindType(fd), "repeated "+protoLabel(fd))
	}
	return protoKindType(fd)
}

// protoKindType is the column type of one value of fd (an element, for a
// repeated field).
func protoKindType(fd protoreflect.FieldDescriptor) *drift.SchemaType {
	label := protoLabel(fd)
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return drift.BoolType(label)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return drift.PlainType("Int32", label)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return drift.PlainType("Int64", label)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return drift.PlainType("UInt32", label)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return drift.PlainType("UInt64", label)
	case protoreflect.FloatKind:
		return drift.PlainType("Float32", label)
	case protoreflect.DoubleKind:
		return drift.PlainType("Float64", label)
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.EnumKind:
		return drift.PlainType("String", label)
	case protoreflect.MessageKind:
		md := fd.Message()
		switch wellKnown(md) {
		case wktTimestamp:
			return drift.TimeType(9, label)
		case wktDuration, wktValue, wktList:
			return drift.PlainType("String", label)
		case wktWrapper:
			return protoKindType(md.Fields().ByNumber(1)).Null(true, label)
		}
		return drift.ObjectType(label)
	}
	return drift.NoColumn("groups are not read", label)
}

func protoLabel(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return string(fd.Message().FullName())
	case protoreflect.EnumKind:
		return string(fd.Enum().FullName())
	}
	return fd.Kind().String()
}

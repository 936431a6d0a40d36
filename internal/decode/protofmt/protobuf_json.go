package protofmt

import (
	"encoding/base64"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"sink/internal/decode/column"
	"sink/internal/decode/format"
)

// Protobuf values as JSON, for the columns that take a composite value
// (Array, Map, Tuple, JSON) and for String columns that keep one as text.
// The wire is read with protowire; the JSON follows protojson's conventions
// except where a column wants something else: field names as declared in
// the .proto (not lowerCamelCase), 64-bit integers as bare numbers (the
// JSON rules read them exactly), fields without presence written with
// their default value, enums by name, bytes in base64, Timestamp as RFC
// 3339 text, Duration as decimal seconds, wrappers as their value, Struct,
// Value and ListValue as the JSON they stand for.

// pbJSON writes Protobuf values as JSON. out is the caller's reused
// buffer; fields is scratch for one message level's fields, shared by the
// levels below (each truncates back to where it started).
type pbJSON struct {
	out    []byte
	fields []pbField
	occs   []protoOcc // one field's occurrences, per level (as fields)
	// Per record (start): the most bytes a value's text may take (the
	// row's bound), and the absent fields written at their defaults,
	// which take no bytes of the record (limits.go).
	max  int
	free format.FreeCount
}

// start readies j for a record whose rows hold at most max bytes.
func (j *pbJSON) start(max int) {
	j.max, j.free = max, 0
}

// fits checks the text being written against the row's bound.
func (j *pbJSON) fits(dst []byte) error {
	if len(dst) > j.max {
		return format.TextTooLong(j.max)
	}
	return nil
}

// pbField is one field occurrence of a message being written.
type pbField struct {
	num protowire.Number
	wt  protowire.Type
	off int32
}

// field appends the JSON of repeated field or map fd from its occurrences in buf.
func (j *pbJSON) field(dst []byte, fd protoreflect.FieldDescriptor, buf []byte, occ []protoOcc) ([]byte, error) {
	return j.fieldAt(dst, fd, buf, occ, 0)
}

// fieldAt writes field fd (its occurrences occ in buf): a
// map as an object, a repeated field as an array (packed runs expanded),
// a singular field as its last occurrence.
func (j *pbJSON) fieldAt(dst []byte, fd protoreflect.FieldDescriptor, buf []byte, occ []protoOcc, depth int) ([]byte, error) {
	switch {
	case fd.IsMap():
		return j.mapField(dst, fd, buf, occ, depth)
	case fd.IsList():
		return j.listField(dst, fd, buf, occ, depth)
	}
	last := occ[len(occ)-1]
	return j.one(dst, fd, last.wt, buf[last.off:], depth)
}

// mapField writes map field fd's entries as a JSON object.
func (j *pbJSON) mapField(dst []byte, fd protoreflect.FieldDescriptor, buf []byte, occ []protoOcc, depth int) ([]byte, error) {
	kfd, vfd := fd.MapKey(), fd.MapValue()
	dst = append(dst, '{')
	for i, o := range occ {
		entry, m := protowire.ConsumeBytes(buf[o.off:])
		if m < 0 {
			return nil, badWire(fd, m)
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = j.mapEntry(dst, kfd, vfd, entry, depth); err != nil {
			return nil, err
		}
		if err := j.fits(dst); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// listField writes repeated field fd's values as a JSON array.
func (j *pbJSON) listField(dst []byte, fd protoreflect.FieldDescriptor, buf []byte, occ []protoOcc, depth int) ([]byte, error) {
	dst = append(dst, '[')
	first := true
	for _, o := range occ {
		var err error
		if o.wt == protowire.BytesType && wireOf(fd.Kind()) != protowire.BytesType {
			dst, first, err = j.packed(dst, fd, buf[o.off:], first)
		} else {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst, err = j.one(dst, fd, o.wt, buf[o.off:], depth)
		}
		if err == nil {
			err = j.fits(dst)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// packed writes a packed run of scalars (one length-delimited value at
// the start of b) as array elements, after a comma unless first, and
// returns whether the array is still empty.
func (j *pbJSON) packed(dst []byte, fd protoreflect.FieldDescriptor, b []byte, first bool) ([]byte, bool, error) {
	run, m := protowire.ConsumeBytes(b)
	if m < 0 {
		return nil, first, badWire(fd, m)
	}
	ewt := wireOf(fd.Kind())
	for len(run) > 0 {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		v, _, k := scalarAt(ewt, run)
		if k < 0 {
			return nil, first, badWire(fd, k)
		}
		var err error
		if dst, err = j.scalar(dst, fd, v, nil); err != nil {
			return nil, first, err
		}
		run = run[k:]
	}
	return dst, first, nil
}

// mapEntry writes "key":value for one map entry message.
func (j *pbJSON) mapEntry(dst []byte, kfd, vfd protoreflect.FieldDescriptor, b []byte, depth int) ([]byte, error) {
	var kOff, vOff int32 = -1, -1
	var vwt protowire.Type
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return nil, badWire(kfd, n)
		}
		m := protowire.ConsumeFieldValue(num, wt, b[off+n:])
		if m < 0 {
			return nil, badWire(kfd, m)
		}
		switch {
		case num == 1 && wt == wireOf(kfd.Kind()):
			kOff = int32(off + n)
		case num == 2 && wireFits(vfd, wt):
			vOff, vwt = int32(off+n), wt
		}
		off += n + m
	}
	// The key, always a JSON string.
	var err error
	if kOff < 0 {
		v, p := defaultScalar(kfd)
		dst = j.key(dst, kfd, v, p)
	} else {
		v, p, n := scalarAt(wireOf(kfd.Kind()), b[kOff:])
		if n < 0 {
			return nil, badWire(kfd, n)
		}
		if kfd.Kind() == protoreflect.StringKind && !utf8.Valid(p) {
			return nil, column.Reasonf("map key of %s is not valid UTF-8", kfd.Parent().FullName())
		}
		dst = j.key(dst, kfd, v, p)
	}
	dst = append(dst, ':')
	if vOff < 0 {
		return j.absent(dst, vfd)
	}
	dst, err = j.one(dst, vfd, vwt, b[vOff:], depth)
	return dst, err
}

// key writes a map key as a JSON string.
func (j *pbJSON) key(dst []byte, fd protoreflect.FieldDescriptor, v uint64, p []byte) []byte {
	if fd.Kind() == protoreflect.StringKind {
		return column.AppendJSONString(dst, p)
	}
	dst = append(dst, '"')
	dst, _ = j.scalar(dst, fd, v, nil)
	return append(dst, '"')
}

// absent writes the value of a field that does not occur: its default
// (null for a message), a free value.
func (j *pbJSON) absent(dst []byte, fd protoreflect.FieldDescriptor) ([]byte, error) {
	if err := j.free.Add(1); err != nil {
		return nil, err
	}
	if fd.Message() != nil {
		return append(dst, "null"...), nil
	}
	v, p := defaultScalar(fd)
	return j.scalar(dst, fd, v, p)
}

// one writes one (non-packed) value of fd of wire type wt at the start of b.
func (j *pbJSON) one(dst []byte, fd protoreflect.FieldDescriptor, wt protowire.Type, b []byte, depth int) ([]byte, error) {
	v, p, n := scalarAt(wt, b)
	if n < 0 {
		return nil, badWire(fd, n)
	}
	if md := fd.Message(); md != nil {
		return j.message(dst, md, p, depth+1)
	}
	return j.scalar(dst, fd, v, p)
}

func badWire(fd protoreflect.FieldDescriptor, n int) error {
	return column.Reasonf("invalid Protobuf field %s: %v", fd.FullName(), protowire.ParseError(n))
}

// scalar writes a scalar value as JSON.
func (j *pbJSON) scalar(dst []byte, fd protoreflect.FieldDescriptor, v uint64, p []byte) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		if v != 0 {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(dst, int64(int32(v)), 10), nil
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case protoreflect.Sint32Kind:
		return strconv.AppendInt(dst, int64(int32(protowire.DecodeZigZag(v&math.MaxUint32))), 10), nil
	case protoreflect.Sint64Kind:
		return strconv.AppendInt(dst, protowire.DecodeZigZag(v), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(dst, uint64(uint32(v)), 10), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(dst, v, 10), nil
	case protoreflect.FloatKind:
		return appendJSONFloat(dst, float64(math.Float32frombits(uint32(v))), 32), nil
	case protoreflect.DoubleKind:
		return appendJSONFloat(dst, math.Float64frombits(v), 64), nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(protoreflect.EnumNumber(int32(v))); ev != nil {
			return column.AppendJSONString(dst, column.S2B(string(ev.Name()))), nil
		}
		return strconv.AppendInt(dst, int64(int32(v)), 10), nil
	case protoreflect.StringKind:
		if !utf8.Valid(p) {
			return nil, column.Reasonf("field %s is not valid UTF-8", fd.FullName())
		}
		return column.AppendJSONString(dst, p), nil
	case protoreflect.BytesKind:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, p)
		return append(dst, '"'), nil
	}
	return append(dst, "null"...), nil
}

// appendJSONFloat writes a float as a JSON number, NaN and ±Inf as the
// strings the Float columns read.
func appendJSONFloat(dst []byte, x float64, bits int) []byte {
	switch {
	case math.IsNaN(x):
		return append(dst, `"NaN"`...)
	case math.IsInf(x, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(x, -1):
		return append(dst, `"-Inf"`...)
	}
	return strconv.AppendFloat(dst, x, 'g', -1, bits)
}

// message writes message md (its bytes b) as JSON.
func (j *pbJSON) message(dst []byte, md protoreflect.MessageDescriptor, b []byte, depth int) ([]byte, error) {
	if depth > maxProtoDepth {
		return nil, column.Reasonf("Protobuf messages nest deeper than %d", maxProtoDepth)
	}
	if wk := wellKnown(md); wk != wktNone {
		return j.wellKnownValue(dst, wk, md, b, depth)
	}
	base := len(j.fields)
	defer func() { j.fields = j.fields[:base] }()
	if err := j.collect(b); err != nil {
		return nil, err
	}
	dst = append(dst, '{')
	first := true
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.Kind() == protoreflect.GroupKind {
			continue
		}
		var err error
		if dst, first, err = j.member(dst, fd, b, base, first, depth); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// member writes field fd of the message being written (its fields
// collected from base on) as "name":value, after a comma unless first;
// an absent field with presence, an absent repeated field or map is left
// out. It returns whether the object is still empty.
func (j *pbJSON) member(dst []byte, fd protoreflect.FieldDescriptor, b []byte, base int, first bool, depth int) ([]byte, bool, error) {
	ob := len(j.occs)
	defer func() { j.occs = j.occs[:ob] }()
	occ := j.gather(base, fd)
	if len(occ) == 0 && (fd.HasPresence() || fd.IsList() || fd.IsMap()) {
		return dst, first, nil
	}
	if !first {
		dst = append(dst, ',')
	}
	dst = column.AppendJSONString(dst, column.S2B(string(fd.Name())))
	dst = append(dst, ':')
	var err error
	if len(occ) == 0 {
		dst, err = j.absent(dst, fd)
	} else {
		dst, err = j.fieldAt(dst, fd, b, occ, depth)
	}
	if err == nil {
		err = j.fits(dst)
	}
	return dst, false, err
}

// wellKnownValue writes a well-known type's message (kind wk) as the
// JSON it stands for.
func (j *pbJSON) wellKnownValue(dst []byte, wk wkt, md protoreflect.MessageDescriptor, b []byte, depth int) ([]byte, error) {
	switch wk {
	case wktTimestamp:
		t, err := timestampOf(b)
		if err != nil {
			return nil, err
		}
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, time.RFC3339Nano)
		return append(dst, '"'), nil
	case wktDuration:
		return durationText(dst, b)
	case wktStruct, wktList:
		// A Struct is its map<string, Value> fields written as the
		// object, a ListValue its repeated Value values as the array.
		base := len(j.fields)
		defer func() { j.fields = j.fields[:base] }()
		if err := j.collect(b); err != nil {
			return nil, err
		}
		fd := md.Fields().ByNumber(1)
		ob := len(j.occs)
		defer func() { j.occs = j.occs[:ob] }()
		return j.fieldAt(dst, fd, b, j.gather(base, fd), depth)
	}
	// A wrapper or Value: one field set (a wrapper's value, a Value's
	// kind): that field's value; none: the default (a wrapper) or null
	// (a Value).
	return j.single(dst, md, b, depth)
}

// single writes the one field of a wrapper or Value that is set.
func (j *pbJSON) single(dst []byte, md protoreflect.MessageDescriptor, b []byte, depth int) ([]byte, error) {
	base := len(j.fields)
	defer func() { j.fields = j.fields[:base] }()
	if err := j.collect(b); err != nil {
		return nil, err
	}
	var fd protoreflect.FieldDescriptor
	last := -1
	fields := md.Fields()
	for i := base; i < len(j.fields); i++ {
		if f := fields.ByNumber(j.fields[i].num); f != nil && wireFits(f, j.fields[i].wt) {
			fd, last = f, i
		}
	}
	if fd == nil {
		if wellKnown(md) == wktValue {
			return append(dst, "null"...), nil
		}
		return j.absent(dst, fields.ByNumber(1))
	}
	if fd.Enum() != nil { // Value's null_value
		return append(dst, "null"...), nil
	}
	return j.one(dst, fd, j.fields[last].wt, b[j.fields[last].off:], depth)
}

// collect appends the fields of message b to j.fields.
func (j *pbJSON) collect(b []byte) error {
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return column.Reasonf("invalid Protobuf message: %v", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, wt, b[off+n:])
		if m < 0 {
			return column.Reasonf("invalid Protobuf message: field %d: %v", num, protowire.ParseError(m))
		}
		j.fields = append(j.fields, pbField{num: num, wt: wt, off: int32(off + n)})
		off += n + m
	}
	return nil
}

// gather appends to j.occs the occurrences of field fd collected from
// base on and returns them; the caller truncates j.occs when done.
func (j *pbJSON) gather(base int, fd protoreflect.FieldDescriptor) []protoOcc {
	start := len(j.occs)
	num := fd.Number()
	for _, f := range j.fields[base:] {
		if f.num == num && wireFits(fd, f.wt) {
			j.occs = append(j.occs, protoOcc{off: f.off, wt: f.wt})
		}
	}
	return j.occs[start:]
}

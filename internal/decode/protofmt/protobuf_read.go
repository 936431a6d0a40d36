package protofmt

import (
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"sink/internal/decode/column"
)

// The protobuf format's column values: the field a column's path names
// (nested messages, oneofs, defaults of absent fields) converted into the
// column's value: scalars, enums, bytes, well-known types, or JSON.

// Read sets in to column col's value in the record Begin read.
func (f *Reader) Read(col int, in *column.Value) error {
	if col < len(f.keyCols) && f.keyCols[col] {
		if f.keyIn.Kind == column.Object { // a framed key: its message as JSON
			return f.composite(f.keyText, &f.binds[col], in)
		}
		*in = f.keyIn
		return nil
	}
	c := &f.cur.cols[col]
	if c.never {
		in.Kind = column.Missing
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
func (f *Reader) find(b []byte, st protoStep) (*pbInfo, error) {
	f.occ = f.occ[:0]
	var found *pbInfo
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return nil, column.Reasonf("invalid Protobuf message: %v", protowire.ParseError(n))
		}
		val := off + n
		m := protowire.ConsumeFieldValue(num, wt, b[val:])
		if m < 0 {
			return nil, column.Reasonf("invalid Protobuf message: field %d: %v", num, protowire.ParseError(m))
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
func (f *Reader) absent(st protoStep, col int, in *column.Value) error {
	if len(st.infos) != 1 {
		in.Kind = column.Missing
		return nil
	}
	fi := st.infos[0]
	text := f.binds[col].text
	switch {
	case fi.list && text:
		in.Kind, in.Bytes = column.String, emptyArrayText
	case fi.list:
		in.Kind, in.Tree = column.Array, f.empty[0]
	case fi.isMap && text:
		in.Kind, in.Bytes = column.String, emptyObjectText
	case fi.isMap:
		in.Kind, in.Tree = column.Object, f.empty[1]
	case fi.presence:
		in.Kind = column.Missing
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
		return 0, column.S2B(d.String())
	case protoreflect.BytesKind:
		return 0, d.Bytes()
	}
	return 0, nil
}

// value sets in to field fd's value, given its occurrences in buf.
func (f *Reader) value(fi *pbInfo, buf []byte, occ []protoOcc, col int, in *column.Value) error {
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
func (f *Reader) scalar(fi *pbInfo, v uint64, p []byte, b *protoBind, in *column.Value) {
	switch fi.kind {
	case protoreflect.BoolKind:
		if v != 0 {
			in.Kind = column.True
		} else {
			in.Kind = column.False
		}
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		in.Kind, in.Int = column.Integer, int64(int32(v))
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		in.Kind, in.Int = column.Integer, int64(v)
	case protoreflect.Sint32Kind:
		in.Kind, in.Int = column.Integer, int64(int32(protowire.DecodeZigZag(v&math.MaxUint32)))
	case protoreflect.Sint64Kind:
		in.Kind, in.Int = column.Integer, protowire.DecodeZigZag(v)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		in.Kind, in.Int = column.Integer, int64(uint32(v))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if v <= math.MaxInt64 {
			in.Kind, in.Int = column.Integer, int64(v)
		} else {
			f.num = strconv.AppendUint(f.num[:0], v, 10)
			in.Kind, in.Bytes = column.Number, f.num
		}
	case protoreflect.FloatKind:
		f.float(float64(math.Float32frombits(uint32(v))), 32, in)
	case protoreflect.DoubleKind:
		f.float(math.Float64frombits(v), 64, in)
	case protoreflect.EnumKind:
		n := int32(v)
		if b.enum {
			if ev := fi.enum.ByNumber(protoreflect.EnumNumber(n)); ev != nil {
				in.Kind, in.Bytes = column.String, column.S2B(string(ev.Name()))
				return
			}
		}
		in.Kind, in.Int = column.Integer, int64(n)
	default: // string, bytes
		in.Kind, in.Bytes = column.String, p
	}
}

func (f *Reader) float(x float64, bits int, in *column.Value) {
	switch {
	case math.IsNaN(x):
		in.Kind, in.Bytes = column.String, nanText
	case math.IsInf(x, 1):
		in.Kind, in.Bytes = column.String, posInfText
	case math.IsInf(x, -1):
		in.Kind, in.Bytes = column.String, negInfText
	default:
		f.num = strconv.AppendFloat(f.num[:0], x, 'g', -1, bits)
		in.Kind, in.Bytes = column.Number, f.num
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
func (f *Reader) message(fi *pbInfo, sub []byte, b *protoBind, in *column.Value) error {
	md := fi.msg
	switch fi.wkt {
	case wktTimestamp:
		t, err := timestampOf(sub)
		if err != nil {
			return err
		}
		in.Kind, in.Time, in.Int = column.Instant, t, t.UnixMilli()
		return nil
	case wktDuration:
		out, err := durationText(f.num[:0], sub)
		if err != nil {
			return err
		}
		f.num = out
		in.Kind, in.Bytes = column.Number, out
		return nil
	case wktWrapper:
		inner := fi.inner
		var v uint64
		var p []byte
		found := false
		for off := 0; off < len(sub); {
			num, wt, n := protowire.ConsumeTag(sub[off:])
			if n < 0 {
				return column.Reasonf("invalid Protobuf %s: %v", md.FullName(), protowire.ParseError(n))
			}
			m := protowire.ConsumeFieldValue(num, wt, sub[off+n:])
			if m < 0 {
				return column.Reasonf("invalid Protobuf %s: %v", md.FullName(), protowire.ParseError(m))
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
func (f *Reader) composite(text []byte, b *protoBind, in *column.Value) error {
	if b.text {
		in.Kind, in.Bytes = column.String, text
		return nil
	}
	v, err := f.jp.ParseBytes(text)
	if err != nil { // the transcoder writes valid JSON; this is a bug guard
		return column.Reasonf("internal error: Protobuf value as JSON: %v", err)
	}
	f.st.FromJSON(v, in)
	return nil
}

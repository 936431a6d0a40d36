package decode

import (
	"math"
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// jsonCol buffers a JSON column as the compact text of one JSON object per
// row; clickhouse-go sends []string in the JSON type's string
// serialization and the server parses it, typing the typed paths. So that
// the server never applies its own (different) text rules to a typed path,
// every typed path value is converted here by this package's rules first
// (a value that does not convert makes the record bad) and written back as
// a canonical literal the server reads exactly (see appendLiteral).
type jsonCol struct {
	t        *chType
	vals     []string
	typed    map[string]int  // dotted path -> index in t.elems
	prefixes map[string]bool // proper prefixes of typed paths ("a" for "a.b")
	parser   fastjson.Parser // for objects that arrive as JSON text in a string
	path     []byte
	out      []byte
	err      error
	c        *ctx
	in       input
}

func newJSONCol(t *chType) *jsonCol {
	j := &jsonCol{t: t, typed: map[string]int{}, prefixes: map[string]bool{}}
	for i, p := range t.names {
		j.typed[p] = i
		for k := 0; k < len(p); k++ {
			if p[k] == '.' {
				j.prefixes[p[:k]] = true
			}
		}
	}
	return j
}

// add takes a JSON object, or a string holding one (as producers often
// nest JSON); null or missing is the empty object.
func (j *jsonCol) add(c *ctx, in *input) error {
	var o *fastjson.Object
	switch in.kind {
	case inMissing, inNull:
	case inObject:
		o, _ = in.v.Object()
	case inStr:
		v, err := j.parser.ParseBytes(in.b)
		if err != nil || v.Type() != fastjson.TypeObject {
			return cannotConvert(in, j.t, "want a JSON object, or a string holding one")
		}
		o, _ = v.Object()
	default:
		return cannotConvert(in, j.t, "want a JSON object")
	}
	if o == nil || len(j.typed) == 0 && in.kind == inObject {
		// Nothing to rewrite: the object's own compact text.
		if o == nil {
			j.out = append(j.out[:0], "{}"...)
		} else {
			j.out = in.v.MarshalTo(j.out[:0])
		}
	} else {
		j.c, j.err, j.path = c, nil, j.path[:0]
		j.out = j.object(j.out[:0], o)
		j.c = nil
		if j.err != nil {
			return j.err
		}
	}
	j.vals = append(j.vals, c.b.str(j.out))
	c.b.bytes += 16
	return nil
}

// object writes o, replacing every typed path's value by its literal.
func (j *jsonCol) object(dst []byte, o *fastjson.Object) []byte {
	dst = append(dst, '{')
	first := true
	base := len(j.path)
	o.Visit(func(k []byte, v *fastjson.Value) {
		if j.err != nil {
			return
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		j.path = j.path[:base]
		if base > 0 {
			j.path = append(j.path, '.')
		}
		j.path = append(j.path, k...)
		if i, ok := j.typed[string(j.path)]; ok {
			t := j.t.elems[i]
			j.c.fromJSON(v, &j.in)
			var err error
			if dst, err = j.c.appendLiteral(dst, t, &j.in); err != nil {
				j.err = &reason{msg: "path " + strconv.Quote(string(j.path)) + ": " + err.Error()}
			}
			return
		}
		if v.Type() == fastjson.TypeObject && j.prefixes[string(j.path)] {
			vo, _ := v.Object()
			dst = j.object(dst, vo)
			return
		}
		dst = v.MarshalTo(dst)
	})
	j.path = j.path[:base]
	return append(dst, '}')
}

func (j *jsonCol) rows() int { return len(j.vals) }

func (j *jsonCol) truncate(n int) {
	if n < len(j.vals) {
		clear(j.vals[n:])
		j.vals = j.vals[:n]
	}
}

func (j *jsonCol) reset()               { j.truncate(0) }
func (j *jsonCol) data() any            { return j.vals }
func (j *jsonCol) split(ends []int) any { return splitSlice(j.vals, ends) }

// appendLiteral converts in to t by this package's rules and appends it as
// the JSON literal ClickHouse parses back to exactly that value: numbers in
// plain decimal, dates and times as text with an explicit UTC zone, UUIDs
// and IPs in canonical text, Enums by value, NaN and infinities as the
// strings "nan", "inf", "-inf". Null or missing is null (the server then
// stores the type's default, or NULL in a Nullable type).
func (c *ctx) appendLiteral(dst []byte, t *chType, in *input) ([]byte, error) {
	for t.kind == kLowCardinality {
		t = t.elem
	}
	if in.kind <= inNull {
		if t.kind == kArray {
			return append(dst, "[]"...), nil
		}
		return append(dst, "null"...), nil
	}
	var err error
	switch t.kind {
	case kNullable:
		return c.appendLiteral(dst, t.elem, in)
	case kArray:
		if in.kind != inArray {
			return dst, cannotConvert(in, t, "want a JSON array")
		}
		items, _ := in.v.Array()
		var ein input
		dst = append(dst, '[')
		for i, it := range items {
			if i > 0 {
				dst = append(dst, ',')
			}
			c.fromJSON(it, &ein)
			if dst, err = c.appendLiteral(dst, t.elem, &ein); err != nil {
				return dst, &reason{msg: "element " + strconv.Itoa(i) + ": " + err.Error()}
			}
		}
		return append(dst, ']'), nil
	case kInt8, kInt16, kInt32, kInt64:
		lo, hi := intRange(t.kind)
		v, err := c.signed(in, t, lo, hi)
		return strconv.AppendInt(dst, v, 10), err
	case kUInt8, kUInt16, kUInt32, kUInt64:
		_, hi := intRange(t.kind)
		v, err := c.unsigned(in, t, uint64(hi)|uintTop(t.kind))
		return strconv.AppendUint(dst, v, 10), err
	case kInt128, kInt256, kUInt128, kUInt256:
		v, err := c.wide(in, t)
		if err != nil {
			return dst, err
		}
		_, signed := wideBits(t.kind)
		b := v.bigInt(signed)
		return b.Append(dst, 10), nil
	case kFloat32, kFloat64:
		bits := 64
		if t.kind == kFloat32 {
			bits = 32
		}
		f, err := c.float(in, t, bits)
		switch {
		case err != nil:
			return dst, err
		case math.IsNaN(f):
			return append(dst, `"nan"`...), nil
		case math.IsInf(f, 1):
			return append(dst, `"inf"`...), nil
		case math.IsInf(f, -1):
			return append(dst, `"-inf"`...), nil
		}
		return strconv.AppendFloat(dst, f, 'g', -1, bits), nil
	case kDecimal:
		n, err := c.decimalNumber(in, t)
		if err != nil {
			return dst, err
		}
		return n.appendPlain(dst), nil
	case kString, kFixedString:
		b := c.stringText(in)
		if t.kind == kFixedString && len(b) > t.n {
			return dst, reasonf("string of %d bytes is too long for %s", len(b), t.str)
		}
		return appendJSONString(dst, b), nil
	case kDate, kDate32:
		d, err := c.date(in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		return append(d.AppendFormat(dst, "2006-01-02"), '"'), nil
	case kDateTime:
		sec, err := c.dateTime(in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		return append(time.Unix(sec, 0).UTC().AppendFormat(dst, time.RFC3339), '"'), nil
	case kDateTime64:
		ts, err := c.dateTime64(in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		return append(ts.UTC().AppendFormat(dst, "2006-01-02T15:04:05.999999999Z07:00"), '"'), nil
	case kUUID:
		u, err := c.uuidValue(in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		return append(append(dst, u.String()...), '"'), nil
	case kEnum8, kEnum16:
		v, err := c.enum(in, t)
		return strconv.AppendInt(dst, int64(v), 10), err
	case kBool:
		v, err := c.boolean(in, t)
		return strconv.AppendBool(dst, v), err
	case kIPv4:
		v, err := c.ipv4(in, t)
		if err != nil {
			return dst, err
		}
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		return append(a.AppendTo(append(dst, '"')), '"'), nil
	case kIPv6:
		v, err := c.ipv6(in, t)
		if err != nil {
			return dst, err
		}
		return append(netip.AddrFrom16(v).AppendTo(append(dst, '"')), '"'), nil
	}
	return dst, cannotConvert(in, t, "not supported in a JSON typed path")
}

// intRange is the range of the 8- to 64-bit integer kinds (for UInt64 the
// upper bound is completed by uintTop).
func intRange(k kind) (lo, hi int64) {
	switch k {
	case kInt8:
		return math.MinInt8, math.MaxInt8
	case kInt16:
		return math.MinInt16, math.MaxInt16
	case kInt32:
		return math.MinInt32, math.MaxInt32
	case kInt64:
		return math.MinInt64, math.MaxInt64
	case kUInt8:
		return 0, math.MaxUint8
	case kUInt16:
		return 0, math.MaxUint16
	case kUInt32:
		return 0, math.MaxUint32
	}
	return 0, math.MaxInt64
}

func uintTop(k kind) uint64 {
	if k == kUInt64 {
		return math.MaxUint64
	}
	return 0
}

// appendPlain writes n in plain decimal notation (no exponent).
func (n number) appendPlain(dst []byte) []byte {
	if len(n.digits) == 0 {
		return append(dst, '0')
	}
	if n.neg {
		dst = append(dst, '-')
	}
	switch id := n.intDigits(); {
	case n.exp >= 0:
		dst = append(dst, n.digits...)
		for i := 0; i < n.exp; i++ {
			dst = append(dst, '0')
		}
	case id > 0:
		dst = append(dst, n.digits[:id]...)
		dst = append(dst, '.')
		dst = append(dst, n.digits[id:]...)
	default:
		dst = append(dst, '0', '.')
		for i := id; i < 0; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, n.digits...)
	}
	return dst
}

// appendJSONString writes s as a JSON string literal (invalid UTF-8 is
// replaced by U+FFFD, as encoding/json does).
func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			case b < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			default:
				dst = append(dst, b)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

package column

import (
	"bytes"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"sink/internal/chtype"
)

// jsonCol buffers a JSON column as the compact text of one JSON object per
// row; clickhouse-go sends []string in the JSON type's string
// serialization and the server parses it, typing the typed paths. So that
// the server never applies its own (different) text rules to a typed path,
// every typed path value is converted here by this package's rules first
// (a value that does not convert makes the record bad) and written back as
// a canonical literal the server reads exactly (see appendLiteral). A path
// written twice ({"a":1,"a":2}, or {"a.b":1,"a":{"b":2}}) makes the server
// refuse the whole INSERT, so such a record is bad here.
type jsonCol struct {
	t        *chtype.Type
	vals     []string
	typed    map[string]int  // dotted path -> index in t.elems
	prefixes map[string]bool // proper prefixes of typed paths ("a" for "a.b")
	parser   fastjson.Parser // for objects that arrive as JSON text in a string

	// walk state, reused per record
	path  []byte // dotted path of the current key; the current object's root starts at root
	root  int
	seen  []byte     // every key's path in this record, back to back
	spans []pathSpan // where each path is in seen
	out   []byte
	err   error
	c     *State
	in    Value
}

type pathSpan struct{ start, end int }

func newJSONCol(t *chtype.Type) *jsonCol {
	j := &jsonCol{t: t, typed: map[string]int{}, prefixes: map[string]bool{}}
	for i, p := range t.Names {
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
func (j *jsonCol) add(c *State, in *Value) error {
	var o *fastjson.Object
	switch in.Kind {
	case Missing, Null:
	case Object:
		o, _ = in.Tree.Object()
	case String:
		v, err := j.parser.ParseBytes(in.Bytes)
		if err != nil || v.Type() != fastjson.TypeObject {
			return cannotConvert(in, j.t, "want a JSON object, or a string holding one")
		}
		o, _ = v.Object()
	default:
		return cannotConvert(in, j.t, "want a JSON object")
	}
	if o == nil {
		j.out = append(j.out[:0], "{}"...)
	} else {
		j.c, j.err = c, nil
		j.path, j.root, j.seen, j.spans = j.path[:0], 0, j.seen[:0], j.spans[:0]
		j.out = j.object(j.out[:0], o, true)
		j.c = nil
		if j.err != nil {
			return j.err
		}
	}
	j.vals = append(j.vals, c.b.str(j.out))
	c.b.bytes += 16
	return nil
}

// object writes o, replacing every typed path's value by its literal when
// typed (o is part of the row's own object, not inside an array), and
// refuses a path written twice. An object that starts a new root (the row,
// or an object in an array, which ClickHouse stores as its own JSON) checks
// its paths when done.
func (j *jsonCol) object(dst []byte, o *fastjson.Object, typed bool) []byte {
	first := len(j.spans)
	dst = j.members(append(dst, '{'), o, typed)
	if j.err == nil {
		j.checkDuplicates(first)
	}
	j.spans, j.seen = j.spans[:first], j.seen[:j.spansEnd(first)]
	return append(dst, '}')
}

func (j *jsonCol) spansEnd(first int) int {
	if first == 0 {
		return 0
	}
	return j.spans[first-1].end
}

// members writes the members of o (the braces are the caller's), and
// records each key's path.
func (j *jsonCol) members(dst []byte, o *fastjson.Object, typed bool) []byte {
	base := len(j.path)
	n := 0
	o.Visit(func(k []byte, v *fastjson.Value) {
		if j.err != nil {
			return
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		if !utf8.Valid(k) {
			j.err = &reason{msg: "key " + strconv.Quote(Cut(k)) + " is not valid UTF-8 (ClickHouse refuses such JSON)"}
			return
		}
		dst = AppendJSONString(dst, k)
		dst = append(dst, ':')
		j.path = j.path[:base]
		if base > j.root {
			j.path = append(j.path, '.')
		}
		j.path = append(j.path, k...)
		start := len(j.seen)
		j.seen = append(j.seen, j.path[j.root:]...)
		j.spans = append(j.spans, pathSpan{start, len(j.seen)})
		if typed {
			if i, ok := j.typed[string(j.path)]; ok {
				j.c.FromJSON(v, &j.in)
				var err error
				if dst, err = j.c.appendLiteral(dst, j.t.Elems[i], &j.in); err != nil {
					j.err = &reason{msg: "path " + strconv.Quote(string(j.path)) + ": " + err.Error()}
				}
				return
			}
		}
		dst = j.value(dst, v, typed)
	})
	j.path = j.path[:base]
	return dst
}

// value writes v: objects continue the current path, objects inside arrays
// start a new root, anything else is copied as compact JSON.
func (j *jsonCol) value(dst []byte, v *fastjson.Value, typed bool) []byte {
	switch v.Type() {
	case fastjson.TypeObject:
		vo, _ := v.Object()
		// Paths continue below this key: members, not a new root.
		return append(j.members(append(dst, '{'), vo, typed), '}')
	case fastjson.TypeArray:
		items, _ := v.Array()
		dst = append(dst, '[')
		for i, it := range items {
			if i > 0 {
				dst = append(dst, ',')
			}
			if it.Type() == fastjson.TypeObject || it.Type() == fastjson.TypeArray {
				root := j.root
				j.root = len(j.path)
				if it.Type() == fastjson.TypeObject {
					io, _ := it.Object()
					dst = j.object(dst, io, false)
				} else {
					dst = j.value(dst, it, false)
				}
				j.root = root
			} else {
				dst = j.scalar(dst, it)
			}
			if j.err != nil {
				return dst
			}
		}
		return append(dst, ']')
	}
	return j.scalar(dst, v)
}

// scalar writes a string, number, true, false or null, refusing what the
// server's JSON parser refuses (and would fail the whole INSERT for):
// strings that are not valid UTF-8 and numbers beyond Float64's range.
func (j *jsonCol) scalar(dst []byte, v *fastjson.Value) []byte {
	switch v.Type() {
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		if !utf8.Valid(b) {
			j.err = &reason{msg: "path " + strconv.Quote(string(j.path[j.root:])) + ": string is not valid UTF-8 (ClickHouse refuses such JSON)"}
			return dst
		}
		return AppendJSONString(dst, b)
	case fastjson.TypeNumber:
		dst0 := len(dst)
		dst = v.MarshalTo(dst)
		if num := dst[dst0:]; bytes.IndexAny(num, ".eE") >= 0 {
			if f, err := strconv.ParseFloat(B2S(num), 64); err != nil && math.IsInf(f, 0) {
				j.err = &reason{msg: "path " + strconv.Quote(string(j.path[j.root:])) + ": number " + Cut(num) + " is beyond Float64's range (ClickHouse refuses such JSON)"}
			}
		}
		return dst
	}
	return v.MarshalTo(dst)
}

// checkDuplicates refuses the record when two of the paths recorded since
// span first are equal. ClickHouse refuses an INSERT whose JSON writes a
// path twice ({"a":1,"a":2}, {"a.b":1,"a":{"b":2}}, and a key repeated in
// one object even with object values), and one record must not fail its
// batch. (It is stricter than the server in one corner: {"a":{},"a":1}.)
func (j *jsonCol) checkDuplicates(first int) {
	spans := j.spans[first:]
	if len(spans) < 2 {
		return
	}
	seen := j.seen
	slices.SortFunc(spans, func(a, b pathSpan) int {
		return bytes.Compare(seen[a.start:a.end], seen[b.start:b.end])
	})
	for i := 1; i < len(spans); i++ {
		if p := seen[spans[i].start:spans[i].end]; bytes.Equal(p, seen[spans[i-1].start:spans[i-1].end]) {
			j.err = &reason{msg: "path " + strconv.Quote(string(p)) + " is written twice (ClickHouse refuses such JSON)"}
			return
		}
	}
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
func (c *State) appendLiteral(dst []byte, t *chtype.Type, in *Value) ([]byte, error) {
	for t.Kind == chtype.LowCardinality {
		t = t.Elem
	}
	if in.Kind <= Null {
		if t.Kind == chtype.Array {
			return append(dst, "[]"...), nil
		}
		return append(dst, "null"...), nil
	}
	switch t.Kind {
	case chtype.Nullable:
		return c.appendLiteral(dst, t.Elem, in)
	case chtype.Array:
		return c.appendArrayLiteral(dst, t, in)
	case chtype.Int8, chtype.Int16, chtype.Int32, chtype.Int64, chtype.UInt8, chtype.UInt16, chtype.UInt32, chtype.UInt64,
		chtype.Int128, chtype.Int256, chtype.UInt128, chtype.UInt256, chtype.Float32, chtype.Float64, chtype.Decimal,
		chtype.Enum8, chtype.Enum16, chtype.Bool:
		return c.appendNumberLiteral(dst, t, in)
	case chtype.Date, chtype.Date32, chtype.DateTime, chtype.DateTime64:
		return c.appendTimeLiteral(dst, t, in)
	case chtype.String, chtype.FixedString, chtype.UUID, chtype.IPv4, chtype.IPv6:
		return c.appendTextLiteral(dst, t, in)
	}
	return dst, cannotConvert(in, t, "not supported in a JSON typed path")
}

// appendArrayLiteral appends in, a JSON array, as an array of t.Elem.
func (c *State) appendArrayLiteral(dst []byte, t *chtype.Type, in *Value) ([]byte, error) {
	var err error
	if in.Kind != Array {
		return dst, cannotConvert(in, t, "want a JSON array")
	}
	items, _ := in.Tree.Array()
	var ein Value
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		c.FromJSON(it, &ein)
		if dst, err = c.appendLiteral(dst, t.Elem, &ein); err != nil {
			return dst, &reason{msg: "element " + strconv.Itoa(i) + ": " + err.Error()}
		}
	}
	return append(dst, ']'), nil
}

// appendNumberLiteral appends a number, Enum or Bool column's literal:
// numbers in plain decimal, non-finite floats as "nan", "inf", "-inf".
func (c *State) appendNumberLiteral(dst []byte, t *chtype.Type, in *Value) ([]byte, error) {
	switch t.Kind {
	case chtype.Int8, chtype.Int16, chtype.Int32, chtype.Int64:
		lo, hi := intRange(t.Kind)
		v, err := c.signed(in, t, lo, hi)
		return strconv.AppendInt(dst, v, 10), err
	case chtype.UInt8, chtype.UInt16, chtype.UInt32, chtype.UInt64:
		_, hi := intRange(t.Kind)
		v, err := c.unsigned(in, t, uint64(hi)|uintTop(t.Kind))
		return strconv.AppendUint(dst, v, 10), err
	case chtype.Int128, chtype.Int256, chtype.UInt128, chtype.UInt256:
		v, err := c.wide(in, t)
		if err != nil {
			return dst, err
		}
		_, signed := wideBits(t.Kind)
		b := v.bigInt(signed)
		return b.Append(dst, 10), nil
	case chtype.Float32, chtype.Float64:
		bits := 64
		if t.Kind == chtype.Float32 {
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
	case chtype.Decimal:
		n, err := c.decimalNumber(in, t)
		if err != nil {
			return dst, err
		}
		return n.appendPlain(dst), nil
	case chtype.Enum8, chtype.Enum16:
		v, err := c.enum(in, t)
		return strconv.AppendInt(dst, int64(v), 10), err
	case chtype.Bool:
		v, err := c.boolean(in, t)
		return strconv.AppendBool(dst, v), err
	}
	return dst, cannotConvert(in, t, "not supported in a JSON typed path")
}

// appendTimeLiteral appends a date or time as text with an explicit UTC
// zone.
func (c *State) appendTimeLiteral(dst []byte, t *chtype.Type, in *Value) ([]byte, error) {
	switch t.Kind {
	case chtype.Date, chtype.Date32:
		d, err := c.date(in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		return append(d.AppendFormat(dst, "2006-01-02"), '"'), nil
	case chtype.DateTime:
		sec, err := c.dateTime(in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		return append(time.Unix(sec, 0).UTC().AppendFormat(dst, time.RFC3339), '"'), nil
	case chtype.DateTime64:
		ts, err := c.dateTime64(in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		return append(ts.UTC().AppendFormat(dst, "2006-01-02T15:04:05.999999999Z07:00"), '"'), nil
	}
	return dst, cannotConvert(in, t, "not supported in a JSON typed path")
}

// appendTextLiteral appends a string (valid UTF-8 only), UUID or IP as a
// JSON string.
func (c *State) appendTextLiteral(dst []byte, t *chtype.Type, in *Value) ([]byte, error) {
	switch t.Kind {
	case chtype.String, chtype.FixedString:
		b := c.stringText(in)
		if t.Kind == chtype.FixedString && len(b) > t.Size {
			return dst, Reasonf("string of %d bytes is too long for %s", len(b), t.Text)
		}
		if !utf8.Valid(b) {
			return dst, cannotConvert(in, t, "not valid UTF-8 (ClickHouse's JSON type refuses it)")
		}
		return AppendJSONString(dst, b), nil
	case chtype.UUID:
		u, err := c.uuidValue(in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		return append(append(dst, u.String()...), '"'), nil
	case chtype.IPv4:
		v, err := c.ipv4(in, t)
		if err != nil {
			return dst, err
		}
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		return append(a.AppendTo(append(dst, '"')), '"'), nil
	case chtype.IPv6:
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
func intRange(k chtype.Kind) (lo, hi int64) {
	switch k {
	case chtype.Int8:
		return math.MinInt8, math.MaxInt8
	case chtype.Int16:
		return math.MinInt16, math.MaxInt16
	case chtype.Int32:
		return math.MinInt32, math.MaxInt32
	case chtype.Int64:
		return math.MinInt64, math.MaxInt64
	case chtype.UInt8:
		return 0, math.MaxUint8
	case chtype.UInt16:
		return 0, math.MaxUint16
	case chtype.UInt32:
		return 0, math.MaxUint32
	}
	return 0, math.MaxInt64
}

func uintTop(k chtype.Kind) uint64 {
	if k == chtype.UInt64 {
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

// AppendJSONString writes s, which must be valid UTF-8, as a JSON string
// literal.
func AppendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, b := range s {
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
	}
	return append(dst, '"')
}

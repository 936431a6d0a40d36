package decode

import (
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/valyala/fastjson"

	"sink/internal/chtype"
	"sink/internal/errtext"
)

// inKind is the shape of one source value before conversion.
type inKind uint8

const (
	inMissing inKind = iota // field absent, no key, no such header
	inNull                  // JSON null
	inStr                   // JSON string or text meta source ($topic, $key, $header.X); b holds the bytes
	inNum                   // JSON number; b holds its text
	inTrue
	inFalse
	inObject // v holds it
	inArray  // v holds it
	inInt    // $partition, $offset; n holds it
	inTime   // $timestamp; t holds it, n holds its unix milliseconds
)

// input is one source value. It borrows: b and v are valid only until the
// next parse or the next number read into the appendState's scratch.
type input struct {
	kind inKind
	b    []byte
	v    *fastjson.Value
	n    int64
	t    time.Time
	// proj, set only on an inArray for an Array column, says each element
	// is an object and the column's value is proj's path in each.
	proj    []string
	projPos string // with proj: an element that is an array is indexed by this instead
}

// appendState carries per-Append state: the block being filled and scratch space.
type appendState struct {
	b      *Block
	in     input  // the current column's source value (a field so it need not escape per record)
	num    []byte // number text of the current JSON value
	tmp    []byte // formatting scratch
	pad    []byte // FixedString padding scratch
	digits []byte // parseNumber scratch
	// unavailable: the format read Debezium's placeholder for a value the
	// record does not carry (unavailable.go); appendRow lists the cell.
	unavailable bool
}

func (c *appendState) fromJSON(v *fastjson.Value, in *input) {
	if v == nil {
		in.kind = inMissing
		return
	}
	switch v.Type() {
	case fastjson.TypeString:
		in.kind = inStr
		in.b, _ = v.StringBytes()
	case fastjson.TypeNumber:
		in.kind = inNum
		c.num = v.MarshalTo(c.num[:0])
		in.b = c.num
	case fastjson.TypeTrue:
		in.kind = inTrue
	case fastjson.TypeFalse:
		in.kind = inFalse
	case fastjson.TypeObject:
		in.kind, in.v = inObject, v
	case fastjson.TypeArray:
		in.kind, in.v = inArray, v
	default:
		in.kind = inNull
	}
}

// text returns the textual form of a scalar input (for string-typed parsing
// of numbers, strings and integers); ok is false for other kinds.
func (c *appendState) text(in *input) ([]byte, bool) {
	switch in.kind {
	case inStr, inNum:
		return in.b, true
	case inInt:
		c.tmp = strconv.AppendInt(c.tmp[:0], in.n, 10)
		return c.tmp, true
	}
	return nil, false
}

// show renders an input for an error message: strings quoted, numbers raw,
// long values cut.
func show(in *input) string {
	switch in.kind {
	case inStr:
		return strconv.Quote(cut(in.b))
	case inNum:
		return cut(in.b)
	case inTrue:
		return "true"
	case inFalse:
		return "false"
	case inObject:
		return "JSON object"
	case inArray:
		return "JSON array"
	case inInt:
		return strconv.FormatInt(in.n, 10)
	case inTime:
		return in.t.UTC().Format(time.RFC3339Nano)
	case inNull:
		return "null"
	}
	return "missing value"
}

const maxShown = 64

func cut(b []byte) string { return errtext.Head(b, maxShown) }

// reason is a conversion failure; RecordError wraps it with the column.
type reason struct{ msg string }

func (r *reason) Error() string { return r.msg }

func reasonf(format string, args ...any) error {
	return &reason{msg: fmt.Sprintf(format, args...)}
}

func cannotParse(in *input, t *chtype.Type) error {
	return reasonf("cannot parse %s as %s", show(in), t.Text)
}

func cannotConvert(in *input, t *chtype.Type, why string) error {
	if why == "" {
		return reasonf("cannot convert %s to %s", show(in), t.Text)
	}
	return reasonf("cannot convert %s to %s: %s", show(in), t.Text, why)
}

// b2s views bytes as a string without copying; the string must not outlive
// the bytes' next mutation.
func b2s(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// s2b views a string as bytes; the bytes must not be written.
func s2b(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

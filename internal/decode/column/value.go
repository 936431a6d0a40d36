package column

import (
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/valyala/fastjson"

	"sink/internal/chtype"
	"sink/internal/errtext"
)

// Kind is the shape of a Value: what a reader found, before any
// conversion to a column type.
type Kind uint8

const (
	Missing Kind = iota // field absent, no key, no such header
	Null                // JSON null
	String              // JSON string or text ($topic, $key, $header.X); Bytes holds it
	Number              // a number's text (JSON, or a reader's exact decimal); Bytes holds it
	True
	False
	Object  // a JSON object; Tree holds it
	Array   // a JSON array; Tree holds it
	Integer // an integer ($partition, $offset, a schema's int); Int holds it
	Instant // a point in time ($timestamp, a schema's timestamp); Time holds it, Int its unix milliseconds
)

// Value is one value a reader hands the column builders: a scalar as
// JSON would write it (text, number text, true, false, null), a JSON tree
// for a composite, or an integer or an instant that a reader knows as
// such. It borrows: Bytes and Tree are valid only until the reader's next
// parse, or the next number FromJSON writes into the State's scratch.
type Value struct {
	Kind  Kind
	Bytes []byte
	Tree  *fastjson.Value
	Int   int64
	Time  time.Time
	// Proj, set only on an Array for an Array column, says each element
	// is an object and the column's value is Proj's path in each (a
	// Nested column's part read from an array of objects).
	Proj    []string
	ProjPos string // with Proj: an element that is an array is indexed by this instead
}

// State is the scratch of one appender (a Plan): the block being filled
// and buffers that conversions reuse, so that appending a row allocates
// nothing. A reader shares it for FromJSON. It is used by one goroutine.
type State struct {
	b      *Block
	num    []byte // number text of the current JSON value
	tmp    []byte // formatting scratch
	pad    []byte // FixedString padding scratch
	digits []byte // parseNumber scratch
	days   dayCache
}

// Begin makes b the block the next values are appended to.
func (c *State) Begin(b *Block) { c.b = b }

// End lets go of the block: the row is appended.
func (c *State) End() { c.b = nil }

// FromJSON sets in to the JSON value v (nil: Missing). A number's text
// goes into c's scratch, valid until the next number.
func (c *State) FromJSON(v *fastjson.Value, in *Value) {
	if v == nil {
		in.Kind = Missing
		return
	}
	switch v.Type() {
	case fastjson.TypeString:
		in.Kind = String
		in.Bytes, _ = v.StringBytes()
	case fastjson.TypeNumber:
		in.Kind = Number
		c.num = v.MarshalTo(c.num[:0])
		in.Bytes = c.num
	case fastjson.TypeTrue:
		in.Kind = True
	case fastjson.TypeFalse:
		in.Kind = False
	case fastjson.TypeObject:
		in.Kind, in.Tree = Object, v
	case fastjson.TypeArray:
		in.Kind, in.Tree = Array, v
	default:
		in.Kind = Null
	}
}

// text returns the textual form of a scalar value (for string-typed parsing
// of numbers, strings and integers); ok is false for other kinds.
func (c *State) text(in *Value) ([]byte, bool) {
	switch in.Kind {
	case String, Number:
		return in.Bytes, true
	case Integer:
		c.tmp = strconv.AppendInt(c.tmp[:0], in.Int, 10)
		return c.tmp, true
	}
	return nil, false
}

// Show renders a value for an error message: strings quoted, numbers raw,
// long values cut.
func Show(in *Value) string {
	switch in.Kind {
	case String:
		return strconv.Quote(Cut(in.Bytes))
	case Number:
		return Cut(in.Bytes)
	case True:
		return "true"
	case False:
		return "false"
	case Object:
		return "JSON object"
	case Array:
		return "JSON array"
	case Integer:
		return strconv.FormatInt(in.Int, 10)
	case Instant:
		return in.Time.UTC().Format(time.RFC3339Nano)
	case Null:
		return "null"
	}
	return "missing value"
}

const maxShown = 64

// Cut is b for an error message: its first 64 bytes, marked as cut.
func Cut(b []byte) string { return errtext.Head(b, maxShown) }

// reason is a conversion failure; the Plan's RecordError wraps it with the
// column.
type reason struct{ msg string }

func (r *reason) Error() string { return r.msg }

// Reasonf is a conversion failure (a reader's too): why a value is bad.
func Reasonf(format string, args ...any) error {
	return &reason{msg: fmt.Sprintf(format, args...)}
}

func cannotParse(in *Value, t *chtype.Type) error {
	return Reasonf("cannot parse %s as %s", Show(in), t.Text)
}

func cannotConvert(in *Value, t *chtype.Type, why string) error {
	if why == "" {
		return Reasonf("cannot convert %s to %s", Show(in), t.Text)
	}
	return Reasonf("cannot convert %s to %s: %s", Show(in), t.Text, why)
}

// B2S views bytes as a string without copying; the string must not outlive
// the bytes' next mutation.
func B2S(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// S2B views a string as bytes; the bytes must not be written.
func S2B(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

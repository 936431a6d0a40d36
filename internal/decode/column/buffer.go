package column

import (
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

// col is one column buffer of a Block.
type col interface {
	// add appends one value, or returns the reason it cannot. On error the
	// buffer may hold a partial row; the caller truncates.
	add(c *State, in *Value) error
	rows() int
	truncate(n int)
	reset()
	// data returns one value per row in the slice type clickhouse-go's
	// column Append takes.
	data() any
	// split returns the rows grouped into sub-slices ending at ends (for an
	// enclosing Array).
	split(ends []int) any
}

// ---- scalar columns ----

// leaf buffers a scalar type: values in vals, NULL flags in nulls when the
// column is Nullable. T is the storage type; exp turns it into the slice
// clickhouse-go takes.
type leaf[T any] struct {
	vals     []T
	nulls    []bool
	nullable bool
	zero     T
	width    int // approximate bytes per row
	conv     func(c *State, in *Value) (T, error)
	exp      exporter[T]
	// nat, when set, views the values as the ch-go column clickhouse-go
	// keeps for this type (see native.go); only for a column that is
	// neither Nullable nor LowCardinality.
	nat func(vals []T) proto.ColInput
	// rowsHint, for a top-level column, sizes a new block's first fill
	// (see capHint); nil otherwise.
	rowsHint *capHint
}

func (l *leaf[T]) useHints(rows, _ *capHint) { l.rowsHint = rows }

func (l *leaf[T]) add(c *State, in *Value) error {
	v, null := l.zero, true
	if in.Kind > Null {
		var err error
		if v, err = l.conv(c, in); err != nil {
			return err
		}
		null = false
	}
	if l.vals == nil && l.rowsHint != nil {
		// A new block (reset keeps vals): as many rows as blocks before it.
		if n := l.rowsHint.get(); n > 0 {
			l.vals = make([]T, 0, n)
			if l.nullable {
				l.nulls = make([]bool, 0, n)
			}
		}
	}
	n := cap(l.vals)
	l.vals = append(l.vals, v)
	if cap(l.vals) != n {
		l.rowsHint.note(cap(l.vals))
	}
	if l.nullable {
		l.nulls = append(l.nulls, null)
	}
	c.b.bytes += l.width
	return nil
}

func (l *leaf[T]) rows() int { return len(l.vals) }

func (l *leaf[T]) truncate(n int) {
	if n < len(l.vals) {
		clear(l.vals[n:])
		l.vals = l.vals[:n]
		if l.nullable {
			l.nulls = l.nulls[:n]
		}
	}
}

func (l *leaf[T]) reset() { l.truncate(0) }

func (l *leaf[T]) data() any {
	if l.nullable {
		return l.exp.ptrs(l.vals, l.nulls)
	}
	return l.exp.plain(l.vals)
}

func (l *leaf[T]) split(ends []int) any {
	return l.exp.split(l.vals, l.nulls, l.nullable, ends)
}

type exporter[T any] interface {
	plain(vals []T) any
	ptrs(vals []T, nulls []bool) any
	split(vals []T, nulls []bool, nullable bool, ends []int) any // [][]E, or [][]*E if nullable
}

// same exports the storage slice itself.
type same[T any] struct{}

func (same[T]) plain(v []T) any              { return v }
func (same[T]) ptrs(v []T, nulls []bool) any { return ptrSlice(v, nulls) }
func (same[T]) split(v []T, nulls []bool, nullable bool, ends []int) any {
	if !nullable {
		return splitSlice(v, ends)
	}
	return splitSlice(ptrSlice(v, nulls), ends)
}

// mapped converts each stored value to the exported type first.
type mapped[T, E any] struct{ f func(T) E }

func (m mapped[T, E]) conv(v []T) []E {
	out := make([]E, len(v))
	for i := range v {
		out[i] = m.f(v[i])
	}
	return out
}
func (m mapped[T, E]) plain(v []T) any              { return m.conv(v) }
func (m mapped[T, E]) ptrs(v []T, nulls []bool) any { return ptrSlice(m.conv(v), nulls) }
func (m mapped[T, E]) split(v []T, nulls []bool, nullable bool, ends []int) any {
	if !nullable {
		return splitSlice(m.conv(v), ends)
	}
	return splitSlice(ptrSlice(m.conv(v), nulls), ends)
}

// ptrSlice points at each non-NULL value; one allocation for the whole slice.
func ptrSlice[E any](vals []E, nulls []bool) []*E {
	out := make([]*E, len(vals))
	for i := range vals {
		if !nulls[i] {
			out[i] = &vals[i]
		}
	}
	return out
}

func splitSlice[E any](vals []E, ends []int) [][]E {
	out := make([][]E, len(ends))
	start := 0
	for i, e := range ends {
		out[i] = vals[start:e:e]
		start = e
	}
	return out
}

func newLeaf[T any](nullable bool, width int, zero T, exp exporter[T], conv func(*State, *Value) (T, error)) *leaf[T] {
	if nullable {
		width++
	}
	return &leaf[T]{nullable: nullable, width: width, zero: zero, exp: exp, conv: conv}
}

var epoch = time.Unix(0, 0).UTC()

// newCol builds the buffer for a type that passed unsupported().
func newCol(t *chtype.Type) col {
	nullable := false
	for t.Kind == chtype.Nullable || t.Kind == chtype.LowCardinality {
		nullable = nullable || t.Kind == chtype.Nullable
		t = t.Elem
	}
	switch t.Kind {
	case chtype.Array:
		return &arrayCol{t: t, elem: newTopCol(t.Elem)}
	case chtype.Map:
		m := &mapCol{t: t, keys: newTopCol(t.Key), vals: newTopCol(t.Elem)}
		m.visitFn = m.visit
		return m
	case chtype.Tuple:
		return newTupleCol(t)
	case chtype.Dynamic:
		return &dynamicCol{}
	case chtype.Variant:
		return newVariantCol(t)
	case chtype.JSON:
		return newJSONCol(t)
	}
	for _, build := range [...]func(*chtype.Type, bool) col{newNumberCol, newTimeCol, newScalarCol} {
		if c := build(t, nullable); c != nil {
			return c
		}
	}
	panic("decode: no buffer for type " + t.Text) // Compile rejects these
}

// newNumberCol builds the buffer of an integer, float or decimal type (nil
// for another type): each value range-checked against the column.
func newNumberCol(t *chtype.Type, nullable bool) col {
	switch t.Kind {
	case chtype.Int8:
		return newLeaf(nullable, 1, int8(0), same[int8]{}, func(c *State, in *Value) (int8, error) {
			v, err := c.signed(in, t, math.MinInt8, math.MaxInt8)
			return int8(v), err
		})
	case chtype.Int16:
		return newLeaf(nullable, 2, int16(0), same[int16]{}, func(c *State, in *Value) (int16, error) {
			v, err := c.signed(in, t, math.MinInt16, math.MaxInt16)
			return int16(v), err
		})
	case chtype.Int32:
		return newLeaf(nullable, 4, int32(0), same[int32]{}, func(c *State, in *Value) (int32, error) {
			v, err := c.signed(in, t, math.MinInt32, math.MaxInt32)
			return int32(v), err
		})
	case chtype.Int64:
		return newLeaf(nullable, 8, int64(0), same[int64]{}, func(c *State, in *Value) (int64, error) {
			return c.signed(in, t, math.MinInt64, math.MaxInt64)
		})
	case chtype.UInt8:
		return newLeaf(nullable, 1, uint8(0), same[uint8]{}, func(c *State, in *Value) (uint8, error) {
			v, err := c.unsigned(in, t, math.MaxUint8)
			return uint8(v), err
		})
	case chtype.UInt16:
		return newLeaf(nullable, 2, uint16(0), same[uint16]{}, func(c *State, in *Value) (uint16, error) {
			v, err := c.unsigned(in, t, math.MaxUint16)
			return uint16(v), err
		})
	case chtype.UInt32:
		return newLeaf(nullable, 4, uint32(0), same[uint32]{}, func(c *State, in *Value) (uint32, error) {
			v, err := c.unsigned(in, t, math.MaxUint32)
			return uint32(v), err
		})
	case chtype.UInt64:
		return newLeaf(nullable, 8, uint64(0), same[uint64]{}, func(c *State, in *Value) (uint64, error) {
			return c.unsigned(in, t, math.MaxUint64)
		})
	case chtype.Float32:
		return newLeaf(nullable, 4, float32(0), same[float32]{}, func(c *State, in *Value) (float32, error) {
			v, err := c.float(in, t, 32)
			return float32(v), err
		})
	case chtype.Float64:
		return newLeaf(nullable, 8, float64(0), same[float64]{}, func(c *State, in *Value) (float64, error) {
			return c.float(in, t, 64)
		})
	case chtype.Decimal:
		if t.Precision <= 18 {
			exp := int32(-t.Scale)
			return newLeaf(nullable, 8, int64(0), mapped[int64, decimal.Decimal]{func(v int64) decimal.Decimal {
				return decimal.New(v, exp)
			}}, func(c *State, in *Value) (int64, error) { return c.decimal64(in, t) })
		}
		return newLeaf(nullable, 48, decimal.New(0, int32(-t.Scale)), same[decimal.Decimal]{},
			func(c *State, in *Value) (decimal.Decimal, error) { return c.decimalBig(in, t) })
	case chtype.Int128, chtype.Int256, chtype.UInt128, chtype.UInt256:
		_, signed := wideBits(t.Kind)
		return newLeaf(nullable, 32, u256{}, mapped[u256, big.Int]{func(v u256) big.Int { return v.bigInt(signed) }},
			func(c *State, in *Value) (u256, error) { return c.wide(in, t) })
	}
	return nil
}

// newTimeCol builds the buffer of a Date, Date32, DateTime or DateTime64
// (nil for another type).
func newTimeCol(t *chtype.Type, nullable bool) col {
	switch t.Kind {
	case chtype.Date, chtype.Date32:
		return newLeaf(nullable, 24, epoch, same[time.Time]{}, func(c *State, in *Value) (time.Time, error) {
			return c.date(in, t)
		})
	case chtype.DateTime:
		return newLeaf(nullable, 8, int64(0), same[int64]{}, func(c *State, in *Value) (int64, error) {
			return c.dateTime(in, t)
		})
	case chtype.DateTime64:
		// Stored as ClickHouse stores it: ticks of 10^-precision seconds
		// since the epoch; ColumnData turns them back into time.Time.
		p := t.Precision
		return newLeaf(nullable, 8, int64(0), mapped[int64, time.Time]{func(v int64) time.Time { return fromTicks(v, p) }},
			func(c *State, in *Value) (int64, error) {
				tm, err := c.dateTime64(in, t)
				return toTicks(tm, p), err
			})
	}
	return nil
}

// newScalarCol builds the buffer of a String, FixedString, UUID, Enum,
// Bool or IP type (nil for another type).
func newScalarCol(t *chtype.Type, nullable bool) col {
	switch t.Kind {
	case chtype.String:
		return newLeaf(nullable, 16, "", same[string]{}, stringConv(t, 0))
	case chtype.FixedString:
		return newLeaf(nullable, 16, string(make([]byte, t.Size)), same[string]{}, stringConv(t, t.Size))
	case chtype.UUID:
		return newLeaf(nullable, 16, uuid.Nil, same[uuid.UUID]{}, func(c *State, in *Value) (uuid.UUID, error) {
			return c.uuidValue(in, t)
		})
	case chtype.Enum8:
		return newLeaf(nullable, 1, int8(t.EnumMin), same[int8]{}, func(c *State, in *Value) (int8, error) {
			v, err := c.enum(in, t)
			return int8(v), err
		})
	case chtype.Enum16:
		return newLeaf(nullable, 2, t.EnumMin, same[int16]{}, func(c *State, in *Value) (int16, error) {
			return c.enum(in, t)
		})
	case chtype.Bool:
		return newLeaf(nullable, 1, false, same[bool]{}, func(c *State, in *Value) (bool, error) {
			return c.boolean(in, t)
		})
	case chtype.IPv4:
		return newLeaf(nullable, 4, uint32(0), same[uint32]{}, func(c *State, in *Value) (uint32, error) {
			return c.ipv4(in, t)
		})
	case chtype.IPv6:
		return newLeaf(nullable, 16, [16]byte{}, same[[16]byte]{}, func(c *State, in *Value) ([16]byte, error) {
			return c.ipv6(in, t)
		})
	}
	return nil
}

var (
	trueText  = []byte("true")
	falseText = []byte("false")
)

// stringConv fills String (fixed == 0) and FixedString(fixed): strings as
// is, numbers as their JSON text, booleans as true/false, objects and arrays
// as compact JSON, $partition/$offset in decimal, $timestamp in RFC 3339 UTC.
// FixedString values longer than N are rejected, shorter ones zero-padded.
// A value equal to the previous one in this column shares its memory.
func stringConv(t *chtype.Type, fixed int) func(c *State, in *Value) (string, error) {
	var last string
	return func(c *State, in *Value) (string, error) {
		b, err := c.stringValue(in, t, fixed)
		if err != nil {
			return "", err
		}
		if string(b) == last {
			return last, nil
		}
		last = c.b.str(b)
		return last, nil
	}
}

// stringValue is the bytes a String (fixed == 0) or FixedString(fixed)
// column stores for in (see stringConv); it may borrow the State's
// scratch, so it is valid until the next value.
func (c *State) stringValue(in *Value, t *chtype.Type, fixed int) ([]byte, error) {
	b := c.stringText(in)
	if fixed > 0 && len(b) != fixed {
		if len(b) > fixed {
			return nil, Reasonf("string of %d bytes is too long for %s", len(b), t.Text)
		}
		c.pad = append(c.pad[:0], b...)
		for len(c.pad) < fixed {
			c.pad = append(c.pad, 0)
		}
		b = c.pad
	}
	return b, nil
}

// stringText is the text a String column stores for in (see stringConv);
// it may borrow the State's scratch.
func (c *State) stringText(in *Value) []byte {
	switch in.Kind {
	case String, Number:
		return in.Bytes
	case True:
		return trueText
	case False:
		return falseText
	case Object, Array:
		c.tmp = in.Tree.MarshalTo(c.tmp[:0])
		return c.tmp
	case Integer:
		c.tmp = strconv.AppendInt(c.tmp[:0], in.Int, 10)
		return c.tmp
	case Instant:
		c.tmp = in.Time.UTC().AppendFormat(c.tmp[:0], time.RFC3339Nano)
		return c.tmp
	}
	return nil
}

// ---- Array ----

type arrayCol struct {
	t    *chtype.Type
	ends []int // end offset in elem of each row
	elem col
	in   Value // element scratch
}

func (a *arrayCol) add(c *State, in *Value) error {
	switch in.Kind {
	case Missing, Null:
	case Array:
		items, _ := in.Tree.Array()
		ein := &a.in
		for i, it := range items {
			if in.Proj != nil {
				switch {
				case it.Type() == fastjson.TypeObject:
					it = it.Get(in.Proj...)
				case it.Type() == fastjson.TypeArray && in.ProjPos != "":
					it = it.Get(in.ProjPos)
				default:
					return &reason{msg: "element " + strconv.Itoa(i) + ": want a JSON object with field " + strconv.Quote(strings.Join(in.Proj, "."))}
				}
			}
			c.FromJSON(it, ein)
			if err := a.elem.add(c, ein); err != nil {
				return &reason{msg: "element " + strconv.Itoa(i) + ": " + err.Error()}
			}
		}
	default:
		return cannotConvert(in, a.t, "want a JSON array")
	}
	a.ends = append(a.ends, a.elem.rows())
	c.b.bytes += 8
	return nil
}

func (a *arrayCol) rows() int { return len(a.ends) }

func (a *arrayCol) truncate(n int) {
	if n > len(a.ends) {
		return
	}
	a.ends = a.ends[:n]
	e := 0
	if n > 0 {
		e = a.ends[n-1]
	}
	a.elem.truncate(e)
}

// reset empties the elements with their own reset, which may release
// memory truncate keeps (a String's bytes, a LowCardinality's dictionary).
func (a *arrayCol) reset() {
	a.ends = a.ends[:0]
	a.elem.reset()
}

func (a *arrayCol) data() any            { return a.elem.split(a.ends) }
func (a *arrayCol) split(ends []int) any { return reflectSplit(a.data(), ends) }

// reflectSplit groups the rows of a slice (for Array(Array(...)) and
// Array(Map(...)), built once per block, not per record).
func reflectSplit(data any, ends []int) any {
	d := reflect.ValueOf(data)
	out := reflect.MakeSlice(reflect.SliceOf(d.Type()), len(ends), len(ends))
	start := 0
	for i, e := range ends {
		out.Index(i).Set(d.Slice3(start, e, e))
		start = e
	}
	return out.Interface()
}

// ---- Map ----

type mapCol struct {
	t          *chtype.Type
	ends       []int
	keys, vals col

	visitFn func(k []byte, v *fastjson.Value) // m.visit, bound once
	c       *State
	err     error
	kin     Value
	vin     Value
}

func (m *mapCol) add(c *State, in *Value) error {
	switch in.Kind {
	case Missing, Null:
	case Object:
		o, _ := in.Tree.Object()
		m.c, m.err = c, nil
		o.Visit(m.visitFn)
		m.c = nil
		if m.err != nil {
			return m.err
		}
	default:
		return cannotConvert(in, m.t, "want a JSON object")
	}
	m.ends = append(m.ends, m.keys.rows())
	c.b.bytes += 8
	return nil
}

func (m *mapCol) visit(k []byte, v *fastjson.Value) {
	if m.err != nil {
		return
	}
	kin := &m.kin
	kin.Kind, kin.Bytes = String, k
	if err := m.keys.add(m.c, kin); err != nil {
		m.err = &reason{msg: "key " + strconv.Quote(Cut(k)) + ": " + err.Error()}
		return
	}
	vin := &m.vin
	m.c.FromJSON(v, vin)
	if err := m.vals.add(m.c, vin); err != nil {
		m.err = &reason{msg: "key " + strconv.Quote(Cut(k)) + ": " + err.Error()}
	}
}

func (m *mapCol) rows() int { return len(m.ends) }

func (m *mapCol) truncate(n int) {
	if n > len(m.ends) {
		return
	}
	m.ends = m.ends[:n]
	e := 0
	if n > 0 {
		e = m.ends[n-1]
	}
	m.keys.truncate(e)
	m.vals.truncate(e)
}

// reset empties keys and values with their own reset (see arrayCol.reset).
func (m *mapCol) reset() {
	m.ends = m.ends[:0]
	m.keys.reset()
	m.vals.reset()
}

// data returns []*chschema.MapRow: clickhouse-go's Map column takes any slice whose
// elements implement column.IterableOrderedMap, which keeps the JSON key
// order (and duplicate keys) without building a Go map per row.
func (m *mapCol) data() any {
	kd, vd := reflect.ValueOf(m.keys.data()), reflect.ValueOf(m.vals.data())
	rows := make([]chschema.MapRow, len(m.ends))
	out := make([]*chschema.MapRow, len(m.ends))
	start := 0
	for i, e := range m.ends {
		rows[i] = chschema.NewMapRow(kd, vd, start, e)
		out[i] = &rows[i]
		start = e
	}
	return out
}

func (m *mapCol) split(ends []int) any { return reflectSplit(m.data(), ends) }

// ---- string arena ----

package column

import (
	"time"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

// The zero-copy hand-off to the driver. clickhouse-go keeps each column of
// an INSERT in a ch-go proto column (String in a proto.ColStr, UInt64 in a
// proto.ColUInt64, Decimal(18, s) in a *proto.ColDecimal64, ...). Appending
// ColumnData's slices copies every value into those, growing them from
// empty on every insert. For the top-level columns below, the block keeps
// its values in exactly that layout already, and Block.Native hands the
// proto column over as is (internal/writer installs it in the driver's
// column). Everything else (Nullable, LowCardinality, Array, Map, dates,
// the modern types) goes through ColumnData.
//
// Native forms: String, the integer and float types, Bool, Decimal(P ≤ 18),
// DateTime and DateTime64 (ch-go's column types); Nullable of those
// (chschema.NullableNative); LowCardinality(String), interned as the block fills
// (chschema.LowCardinalityNative); Array(T) and Map(K, V) whose elements have a
// native form (chschema.ArrayNative, chschema.MapNative), built from the same constructor,
// so an Array(String)'s strings sit back to back in one buffer too.

// nativeCol is a column buffer that can present itself as a ch-go column.
type nativeCol interface {
	// native returns the buffer as a ch-go column aliasing it, or nil.
	native() proto.ColInput
}

// Native returns column i as the ch-go proto column clickhouse-go v2 keeps
// for its type, aliasing the block's buffers (valid until the next Append
// or Reset; do not modify), or nil when the column has no such form and
// ColumnData is the way to send it (see the list above).
func (b *Block) Native(i int) proto.ColInput {
	if b.shard != nil || len(b.unavail.patch[i]) > 0 {
		return nil // filled cells live beside the buffer (Block.Fill)
	}
	if n, ok := b.bufs[i].(nativeCol); ok {
		return n.native()
	}
	return nil
}

// newTopCol builds the buffer of a top-level column: the native form when
// the type (or, for Nullable(T), T) has one, newCol's otherwise.
func newTopCol(t *chtype.Type) col {
	base, nullable := t, false
	if t.Kind == chtype.Nullable {
		base, nullable = t.Elem, true
	}
	if t.Kind == chtype.LowCardinality && t.Elem.Kind == chtype.String {
		return newLCStrCol(t.Elem)
	}
	switch base.Kind {
	case chtype.DateTime:
		return withNative(newCol(t), func(v []int64) proto.ColInput {
			// DateTime is a uint32: one conversion pass (the values are
			// range-checked by dateTime).
			out := proto.ColDateTime{Data: make([]proto.DateTime, len(v))}
			for i, x := range v {
				out.Data[i] = proto.DateTime(x)
			}
			return &out
		})
	case chtype.DateTime64:
		return withNative(newCol(t), func(v []int64) proto.ColInput {
			return &proto.ColDateTime64{Data: unsafe.Slice((*proto.DateTime64)(unsafe.SliceData(v)), len(v)),
				Precision: proto.Precision(base.Precision), PrecisionSet: true}
		})
	case chtype.String:
		return &strCol{t: base, nullable: nullable}
	case chtype.Int8:
		return withNative(newCol(t), func(v []int8) proto.ColInput { return proto.ColInt8(v) })
	case chtype.Int16:
		return withNative(newCol(t), func(v []int16) proto.ColInput { return proto.ColInt16(v) })
	case chtype.Int32:
		return withNative(newCol(t), func(v []int32) proto.ColInput { return proto.ColInt32(v) })
	case chtype.Int64:
		return withNative(newCol(t), func(v []int64) proto.ColInput { return proto.ColInt64(v) })
	case chtype.UInt8:
		return withNative(newCol(t), func(v []uint8) proto.ColInput { return proto.ColUInt8(v) })
	case chtype.UInt16:
		return withNative(newCol(t), func(v []uint16) proto.ColInput { return proto.ColUInt16(v) })
	case chtype.UInt32:
		return withNative(newCol(t), func(v []uint32) proto.ColInput { return proto.ColUInt32(v) })
	case chtype.UInt64:
		return withNative(newCol(t), func(v []uint64) proto.ColInput { return proto.ColUInt64(v) })
	case chtype.Float32:
		return withNative(newCol(t), func(v []float32) proto.ColInput { return proto.ColFloat32(v) })
	case chtype.Float64:
		return withNative(newCol(t), func(v []float64) proto.ColInput { return proto.ColFloat64(v) })
	case chtype.Bool:
		return withNative(newCol(t), func(v []bool) proto.ColInput { return proto.ColBool(v) })
	case chtype.Decimal:
		switch {
		case base.Precision <= 9:
			// clickhouse-go keeps Decimal(P ≤ 9) as Decimal32: one
			// conversion pass, no per-value decimal.Decimal.
			return withNative(newCol(t), func(v []int64) proto.ColInput {
				out := make(proto.ColDecimal32, len(v))
				for i, x := range v {
					out[i] = proto.Decimal32(x) // in range: decimal64 checks the precision
				}
				return &out
			})
		case base.Precision <= 18:
			return withNative(newCol(t), func(v []int64) proto.ColInput {
				out := proto.ColDecimal64(unsafe.Slice((*proto.Decimal64)(unsafe.SliceData(v)), len(v)))
				return &out
			})
		}
	}
	return newCol(t)
}

// nullFlags views NULL flags as the bytes ClickHouse expects: a Go bool is
// one byte, 0 or 1.
func nullFlags(nulls []bool) proto.ColUInt8 {
	return unsafe.Slice((*uint8)(unsafe.Pointer(unsafe.SliceData(nulls))), len(nulls))
}

// withNative sets the native view of a leaf built by newCol.
func withNative[T any](c col, nat func([]T) proto.ColInput) col {
	c.(*leaf[T]).nat = nat
	return c
}

func (l *leaf[T]) native() proto.ColInput {
	switch {
	case l.nat == nil:
		return nil
	case l.nullable:
		return chschema.NullableNative{Nulls: nullFlags(l.nulls), Values: l.nat(l.vals)}
	}
	return l.nat(l.vals)
}

// strCol is a top-level String column stored as clickhouse-go stores it:
// all values back to back in one buffer, with each value's bounds. Native
// aliases the buffer; ColumnData copies it once, so that the strings it
// returns never share memory with the buffer being filled.
type strCol struct {
	t        *chtype.Type
	col      proto.ColStr
	hint     int      // the buffer's capacity before the last Reset
	size     *capHint // the layout's largest buffer of this column, or nil
	rowsHint *capHint // the layout's largest row capacity, or nil
	nullable bool
	nulls    []bool // Nullable(String): NULL flags; a NULL row holds ""
}

func (s *strCol) useHints(rows, bytes *capHint) { s.rowsHint, s.size = rows, bytes }

func (s *strCol) add(c *State, in *Value) error {
	if s.col.Buf == nil {
		if s.hint == 0 {
			s.hint = s.size.get()
		}
		if s.hint > 0 {
			if s.col.Buf = spares.get(s.hint); s.col.Buf == nil {
				s.col.Buf = make([]byte, 0, s.hint)
			}
		}
	}
	if s.col.Pos == nil {
		// A new block (reset keeps Pos): as many rows as blocks before it.
		if n := s.rowsHint.get(); n > 0 {
			s.col.Pos = make([]proto.Position, 0, n)
			if s.nullable {
				s.nulls = make([]bool, 0, n)
			}
		}
	}
	var b []byte
	if in.Kind > Null {
		var err error
		if b, err = c.stringValue(in, s.t, 0); err != nil {
			return err
		}
	}
	bufCap, posCap := cap(s.col.Buf), cap(s.col.Pos)
	s.col.AppendBytes(b)
	if cap(s.col.Buf) != bufCap {
		s.size.note(cap(s.col.Buf))
	}
	if cap(s.col.Pos) != posCap {
		s.rowsHint.note(cap(s.col.Pos))
	}
	c.b.bytes += 16 + len(b)
	if s.nullable {
		s.nulls = append(s.nulls, in.Kind <= Null)
		c.b.bytes++
	}
	return nil
}

func (s *strCol) rows() int { return len(s.col.Pos) }

func (s *strCol) truncate(n int) {
	if n >= len(s.col.Pos) {
		return
	}
	end := 0
	if n > 0 {
		end = s.col.Pos[n-1].End
	}
	s.col.Buf = s.col.Buf[:end]
	s.col.Pos = s.col.Pos[:n]
	if s.nullable {
		s.nulls = s.nulls[:n]
	}
}

// reset gives the byte buffer up rather than keeping it: a block waiting
// on the free list then holds no string memory outside batch.buffer_memory.
// The buffer goes to the spares (spare.go), bounded in all, and the next
// fill takes one of the size the last one reached from there, or allocates
// it once.
func (s *strCol) reset() {
	s.truncate(0)
	s.hint = cap(s.col.Buf)
	s.size.note(s.hint)
	spares.put(s.col.Buf)
	s.col.Buf = nil
}

// data copies the values once into an immutable string and returns
// substrings of it ([]*string, nil for NULL, when Nullable).
func (s *strCol) data() any {
	all := string(s.col.Buf)
	out := make([]string, len(s.col.Pos))
	for i, p := range s.col.Pos {
		out[i] = all[p.Start:p.End]
	}
	if s.nullable {
		return ptrSlice(out, s.nulls)
	}
	return out
}

func (s *strCol) split(ends []int) any { return reflectSplit(s.data(), ends) }

func (s *strCol) native() proto.ColInput {
	if s.nullable {
		return chschema.NullableNative{Nulls: nullFlags(s.nulls), Values: s.col}
	}
	return s.col
}

// toTicks is t in units of 10^-p seconds since the epoch, as a
// DateTime64(p) stores it (exact over DateTime64's whole range, which
// t.UnixNano is not).
func toTicks(t time.Time, p int) int64 {
	scale := pow10[p]
	return t.Unix()*scale + int64(t.Nanosecond())/pow10[9-p]
}

// fromTicks is toTicks backwards, in UTC.
func fromTicks(v int64, p int) time.Time {
	scale := pow10[p]
	sec := floorDiv(v, scale)
	return time.Unix(sec, (v-sec*scale)*pow10[9-p]).UTC()
}

// ---- Array and Map ----

// ends views row end offsets (ints, 64 bits wide where Go runs this) as
// the uint64 / int64 column clickhouse-go keeps them in.
func endsU64(ends []int) proto.ColUInt64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(ends))), len(ends))
}

func endsI64(ends []int) proto.ColInt64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(ends))), len(ends))
}

func (a *arrayCol) native() proto.ColInput {
	n, ok := a.elem.(nativeCol)
	if !ok || unsafe.Sizeof(int(0)) != 8 {
		return nil
	}
	v := n.native()
	if v == nil {
		return nil
	}
	return chschema.ArrayNative{Offsets: endsU64(a.ends), Values: v}
}

func (m *mapCol) native() proto.ColInput {
	kn, ok1 := m.keys.(nativeCol)
	vn, ok2 := m.vals.(nativeCol)
	if !ok1 || !ok2 || unsafe.Sizeof(int(0)) != 8 {
		return nil
	}
	k, v := kn.native(), vn.native()
	if k == nil || v == nil {
		return nil
	}
	return chschema.MapNative{Offsets: endsI64(m.ends), Keys: k, Values: v}
}

// ---- LowCardinality(String) ----

// lcStrCol interns a LowCardinality(String) column while the block fills:
// each distinct value is stored once, in dict, and every row keeps its
// position. The driver would instead box every row's string into a
// map[any]int when the block is sent.
type lcStrCol struct {
	t     *chtype.Type
	dict  proto.ColStr
	pos   map[string]int // value → its position in dict, once dict is larger than lcLinear
	first []int          // per dict entry, the row that added it (-1: the default)
	keys  []int
}

// lcLinear is how many dictionary values an lcStrCol looks a value up
// among by comparing them in turn, before it keeps a map: a few values
// (the common low-cardinality column) are found faster by comparing
// lengths and then bytes than by hashing.
const lcLinear = 8

// find is the position of b in the dictionary (never the default's, 0).
func (l *lcStrCol) find(b []byte) (int, bool) {
	if len(l.dict.Pos) > lcLinear+1 {
		k, ok := l.pos[string(b)] // no allocation for the lookup
		return k, ok
	}
	for k := 1; k < len(l.dict.Pos); k++ {
		if p := l.dict.Pos[k]; p.End-p.Start == len(b) && string(l.dict.Buf[p.Start:p.End]) == string(b) {
			return k, true
		}
	}
	return 0, false
}

func newLCStrCol(t *chtype.Type) *lcStrCol {
	c := &lcStrCol{t: t, pos: map[string]int{}}
	c.reset()
	return c
}

func (l *lcStrCol) add(c *State, in *Value) error {
	var b []byte
	if in.Kind > Null {
		var err error
		if b, err = c.stringValue(in, l.t, 0); err != nil {
			return err
		}
	}
	k, ok := l.find(b)
	if !ok {
		k = len(l.dict.Pos)
		l.dict.AppendBytes(b)
		switch {
		case k > lcLinear+1:
			l.pos[string(b)] = k
		case k == lcLinear+1:
			// The dictionary outgrew comparing: from now on the map
			// holds every value.
			for j := 1; j <= k; j++ {
				l.pos[l.dict.Row(j)] = j
			}
		}
		l.first = append(l.first, len(l.keys))
		c.b.bytes += 16 + 2*len(b) // the value in dict and as the map's key
	}
	l.keys = append(l.keys, k)
	c.b.bytes += 8
	return nil
}

func (l *lcStrCol) rows() int { return len(l.keys) }

// truncate drops rows n.. and the dictionary values they added (the
// last ones: values are added in row order), so the dictionary is what n
// rows alone would have built.
func (l *lcStrCol) truncate(n int) {
	if n >= len(l.keys) {
		return
	}
	l.keys = l.keys[:n]
	k := len(l.first)
	for k > 1 && l.first[k-1] >= n {
		k--
		delete(l.pos, l.dict.Row(k))
	}
	if k <= lcLinear+1 {
		clear(l.pos) // back to comparing
	}
	l.first = l.first[:k]
	l.dict.Buf = l.dict.Buf[:l.dict.Pos[k-1].End]
	l.dict.Pos = l.dict.Pos[:k]
}

// reset starts a new dictionary holding only the default value. As in
// the driver's own dictionary, the default is not a value rows point to:
// an empty string gets an entry of its own when it first appears, so the
// block encodes byte for byte as the driver would encode it.
func (l *lcStrCol) reset() {
	l.keys = l.keys[:0]
	l.dict.Reset()
	clear(l.pos)
	l.dict.Append("")
	l.first = append(l.first[:0], -1)
}

func (l *lcStrCol) data() any {
	out := make([]string, len(l.keys))
	for i, k := range l.keys {
		out[i] = l.dict.Row(k)
	}
	return out
}

func (l *lcStrCol) split(ends []int) any { return reflectSplit(l.data(), ends) }

func (l *lcStrCol) native() proto.ColInput {
	return chschema.LowCardinalityNative{Dict: l.dict, Keys: l.keys}
}

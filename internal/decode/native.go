package decode

import (
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
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

// nativeCol is a column buffer that can present itself as a ch-go column.
type nativeCol interface {
	// native returns the buffer as a ch-go column aliasing it, or nil.
	native() proto.ColInput
}

// Native returns column i as the ch-go proto column clickhouse-go v2 keeps
// for its type, aliasing the block's buffers (valid until the next Append
// or Reset; do not modify), or nil when the column has no such form and
// ColumnData is the way to send it. Columns that have one: String, the
// integer and float types, Bool, Decimal with precision up to 18, and
// Nullable of those (a NullableNative); not LowCardinality.
func (b *Block) Native(i int) proto.ColInput {
	if n, ok := b.bufs[i].(nativeCol); ok {
		return n.native()
	}
	return nil
}

// newTopCol builds the buffer of a top-level column: the native form when
// the type (or, for Nullable(T), T) has one, newCol's otherwise.
func newTopCol(t *chType) col {
	base, nullable := t, false
	if t.kind == kNullable {
		base, nullable = t.elem, true
	}
	switch base.kind {
	case kString:
		return &strCol{t: base, nullable: nullable}
	case kInt8:
		return withNative(newCol(t), func(v []int8) proto.ColInput { return proto.ColInt8(v) })
	case kInt16:
		return withNative(newCol(t), func(v []int16) proto.ColInput { return proto.ColInt16(v) })
	case kInt32:
		return withNative(newCol(t), func(v []int32) proto.ColInput { return proto.ColInt32(v) })
	case kInt64:
		return withNative(newCol(t), func(v []int64) proto.ColInput { return proto.ColInt64(v) })
	case kUInt8:
		return withNative(newCol(t), func(v []uint8) proto.ColInput { return proto.ColUInt8(v) })
	case kUInt16:
		return withNative(newCol(t), func(v []uint16) proto.ColInput { return proto.ColUInt16(v) })
	case kUInt32:
		return withNative(newCol(t), func(v []uint32) proto.ColInput { return proto.ColUInt32(v) })
	case kUInt64:
		return withNative(newCol(t), func(v []uint64) proto.ColInput { return proto.ColUInt64(v) })
	case kFloat32:
		return withNative(newCol(t), func(v []float32) proto.ColInput { return proto.ColFloat32(v) })
	case kFloat64:
		return withNative(newCol(t), func(v []float64) proto.ColInput { return proto.ColFloat64(v) })
	case kBool:
		return withNative(newCol(t), func(v []bool) proto.ColInput { return proto.ColBool(v) })
	case kDecimal:
		switch {
		case base.n <= 9:
			// clickhouse-go keeps Decimal(P ≤ 9) as Decimal32: one
			// conversion pass, no per-value decimal.Decimal.
			return withNative(newCol(t), func(v []int64) proto.ColInput {
				out := make(proto.ColDecimal32, len(v))
				for i, x := range v {
					out[i] = proto.Decimal32(x) // in range: decimal64 checks the precision
				}
				return &out
			})
		case base.n <= 18:
			return withNative(newCol(t), func(v []int64) proto.ColInput {
				out := proto.ColDecimal64(unsafe.Slice((*proto.Decimal64)(unsafe.SliceData(v)), len(v)))
				return &out
			})
		}
	}
	return newCol(t)
}

// NullableNative is the native form of a Nullable(T) column: one NULL flag
// per row (1 = NULL) and T's native column, which holds T's zero value on
// NULL rows. It encodes as ClickHouse's Native format encodes Nullable(T):
// the flags, then the values.
type NullableNative struct {
	Nulls  proto.ColUInt8
	Values proto.ColInput
}

// Type is Nullable(T).
func (n NullableNative) Type() proto.ColumnType {
	return proto.ColumnTypeNullable.Sub(n.Values.Type())
}

// Rows is the number of rows.
func (n NullableNative) Rows() int { return len(n.Nulls) }

// EncodeColumn appends the flags and the values to b.
func (n NullableNative) EncodeColumn(b *proto.Buffer) {
	n.Nulls.EncodeColumn(b)
	n.Values.EncodeColumn(b)
}

// WriteColumn writes the flags and the values to w.
func (n NullableNative) WriteColumn(w *proto.Writer) {
	n.Nulls.WriteColumn(w)
	n.Values.WriteColumn(w)
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
		return NullableNative{Nulls: nullFlags(l.nulls), Values: l.nat(l.vals)}
	}
	return l.nat(l.vals)
}

// strCol is a top-level String column stored as clickhouse-go stores it:
// all values back to back in one buffer, with each value's bounds. Native
// aliases the buffer; ColumnData copies it once, so that the strings it
// returns never share memory with the buffer being filled.
type strCol struct {
	t        *chType
	col      proto.ColStr
	hint     int // the buffer's capacity before the last Reset
	nullable bool
	nulls    []bool // Nullable(String): NULL flags; a NULL row holds ""
}

func (s *strCol) add(c *appendState, in *input) error {
	if s.col.Buf == nil && s.hint > 0 {
		s.col.Buf = make([]byte, 0, s.hint)
	}
	var b []byte
	if in.kind > inNull {
		var err error
		if b, err = c.stringValue(in, s.t, 0); err != nil {
			return err
		}
	}
	s.col.AppendBytes(b)
	c.b.bytes += 16 + len(b)
	if s.nullable {
		s.nulls = append(s.nulls, in.kind <= inNull)
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

// reset drops the byte buffer rather than keeping it: a block waiting on
// the free list then holds no string memory outside batch.buffer_memory,
// and the next fill allocates it once at the size the last one reached.
func (s *strCol) reset() {
	s.truncate(0)
	s.hint, s.col.Buf = cap(s.col.Buf), nil
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
		return NullableNative{Nulls: nullFlags(s.nulls), Values: s.col}
	}
	return s.col
}

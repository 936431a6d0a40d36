package chschema

import (
	"math"
	"reflect"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// The native forms of composite columns: how a block hands a Nullable,
// Array, Map or LowCardinality(String) column to clickhouse-go as a ch-go
// proto column that aliases the block's buffers (decode.Block.Native), and
// the row type of a Map column's values (MapRow). internal/writer installs
// them in the driver's columns.

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
func (n NullableNative) EncodeColumn(b *proto.Buffer) { encodeAll(b, n.Nulls, n.Values) }

// WriteColumn writes the flags and the values to w.
func (n NullableNative) WriteColumn(w *proto.Writer) { writeAll(w, n.Nulls, n.Values) }

// encodeAll and writeAll put the parts of a composite column one after
// the other, as the Native format lays them out.
func encodeAll(b *proto.Buffer, parts ...proto.ColInput) {
	for _, p := range parts {
		p.EncodeColumn(b)
	}
}

func writeAll(w *proto.Writer, parts ...proto.ColInput) {
	for _, p := range parts {
		p.WriteColumn(w)
	}
}

// ArrayNative is the native form of an Array(T) column: the end offset of
// each row in Values (cumulative, as ClickHouse's Native format sends
// them) and T's native column holding every row's elements back to back.
type ArrayNative struct {
	Offsets proto.ColUInt64
	Values  proto.ColInput
}

// Type is Array(T).
func (a ArrayNative) Type() proto.ColumnType { return proto.ColumnTypeArray.Sub(a.Values.Type()) }

// Rows is the number of rows (arrays).
func (a ArrayNative) Rows() int { return len(a.Offsets) }

// EncodeColumn appends the offsets and the elements to b.
func (a ArrayNative) EncodeColumn(b *proto.Buffer) { encodeAll(b, a.Offsets, a.Values) }

// WriteColumn writes the offsets and the elements to w.
func (a ArrayNative) WriteColumn(w *proto.Writer) { writeAll(w, a.Offsets, a.Values) }

// MapNative is the native form of a Map(K, V) column: each row's end
// offset in Keys and Values, then every row's keys and values back to
// back. clickhouse-go keeps the offsets as Int64.
type MapNative struct {
	Offsets      proto.ColInt64
	Keys, Values proto.ColInput
}

// Type is Map(K, V).
func (m MapNative) Type() proto.ColumnType {
	return proto.ColumnType("Map(" + string(m.Keys.Type()) + ", " + string(m.Values.Type()) + ")")
}

// Rows is the number of rows (maps).
func (m MapNative) Rows() int { return len(m.Offsets) }

// EncodeColumn appends the offsets, keys and values to b.
func (m MapNative) EncodeColumn(b *proto.Buffer) { encodeAll(b, m.Offsets, m.Keys, m.Values) }

// WriteColumn writes the offsets, keys and values to w.
func (m MapNative) WriteColumn(w *proto.Writer) { writeAll(w, m.Offsets, m.Keys, m.Values) }

// LowCardinalityNative is the native form of a LowCardinality(String)
// column: the distinct values in order of first appearance (Dict) and,
// per row, the position of its value in Dict. Dict[0] is "", ClickHouse's
// default value, which the driver's own dictionary starts with and no row
// points to.
type LowCardinalityNative struct {
	Dict proto.ColStr
	Keys []int
}

// Rows is the number of rows.
func (l LowCardinalityNative) Rows() int { return len(l.Keys) }

// Type is LowCardinality(String).
func (l LowCardinalityNative) Type() proto.ColumnType {
	return proto.ColumnTypeLowCardinality.Sub(proto.ColumnTypeString)
}

// EncodeColumn appends the column as ClickHouse's Native format sends
// LowCardinality (the state prefix, version 1, goes before it, separately):
// the flags with the key width (the narrowest of UInt8..UInt64 that holds
// every position), the dictionary, then one key per row.
func (l LowCardinalityNative) EncodeColumn(b *proto.Buffer) {
	if len(l.Keys) == 0 {
		return
	}
	const hasAdditionalKeys, needUpdateDictionary = 1 << 9, 1 << 10
	n := len(l.Dict.Pos)
	width := 0 // 0..3: UInt8, UInt16, UInt32, UInt64
	switch {
	case n <= math.MaxUint8+1:
	case n <= math.MaxUint16+1:
		width = 1
	case n <= math.MaxUint32+1:
		width = 2
	default:
		width = 3
	}
	b.PutUInt64(uint64(hasAdditionalKeys | needUpdateDictionary | width))
	b.PutInt64(int64(n))
	l.Dict.EncodeColumn(b)
	b.PutInt64(int64(len(l.Keys)))
	for _, k := range l.Keys {
		switch width {
		case 0:
			b.PutUInt8(uint8(k))
		case 1:
			b.PutUInt16(uint16(k))
		case 2:
			b.PutUInt32(uint32(k))
		default:
			b.PutUInt64(uint64(k))
		}
	}
}

// WriteColumn writes what EncodeColumn appends.
func (l LowCardinalityNative) WriteColumn(w *proto.Writer) { w.ChainBuffer(l.EncodeColumn) }

// MapRow is one row of a Map column as ColumnData returns it. It implements
// clickhouse-go's column.IterableOrderedMap.
type MapRow struct {
	keys, vals reflect.Value
	start, end int
	pos        int
}

// NewMapRow is the row whose entries are keys[i], vals[i] for i in
// start..end-1 (keys and vals are slices).
func NewMapRow(keys, vals reflect.Value, start, end int) MapRow {
	return MapRow{keys: keys, vals: vals, start: start, end: end, pos: start - 1}
}

// Len returns the number of entries.
func (r *MapRow) Len() int { return r.end - r.start }

// Entry returns the i-th key and value.
func (r *MapRow) Entry(i int) (key, value any) {
	return r.keys.Index(r.start + i).Interface(), r.vals.Index(r.start + i).Interface()
}

// Put is part of column.IterableOrderedMap; a MapRow is read-only, so it does nothing.
func (r *MapRow) Put(key, value any) {}

// Iterator restarts iteration and returns r.
func (r *MapRow) Iterator() column.MapIterator { r.pos = r.start - 1; return r }

// Next advances to the next entry.
func (r *MapRow) Next() bool { r.pos++; return r.pos < r.end }

// Key returns the current key.
func (r *MapRow) Key() any { return r.keys.Index(r.pos).Interface() }

// Value returns the current value.
func (r *MapRow) Value() any { return r.vals.Index(r.pos).Interface() }

var _ column.IterableOrderedMap = (*MapRow)(nil)

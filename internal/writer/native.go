package writer

import (
	"reflect"
	"time"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"sink/internal/chschema"
)

// nativeBlock is a chschema.Block that can hand over some columns as ch-go proto
// columns without a copy (decode.Block.Native).
type nativeBlock interface {
	Native(i int) proto.ColInput
}

// install puts n into the driver's column c in place of its empty ch-go
// column, so that the driver encodes the block's buffer directly instead
// of a copy of every value. clickhouse-go keeps that column in an
// unexported field named col (String: proto.ColStr, UInt64:
// proto.ColUInt64, Decimal: a proto.Column holding *proto.ColDecimal64, ...);
// install checks by reflection that the field exists and has exactly n's
// type (for an interface field: holds a value of n's type), and that the
// column is empty, and otherwise returns false and changes nothing: the
// caller then appends ColumnData as before. A driver whose columns look
// different thus only loses the shortcut.
func install(c column.Interface, n proto.ColInput) bool {
	if n == nil || c.Rows() != 0 {
		return false
	}
	switch nn := n.(type) {
	case chschema.NullableNative:
		return installNullable(c, nn)
	case chschema.ArrayNative:
		return installArray(c, nn)
	case chschema.MapNative:
		return installMap(c, nn)
	case chschema.LowCardinalityNative:
		return installLowCardinality(c, nn)
	}
	return installLeaf(c, n)
}

// installLeaf is install for a column of plain values: n replaces the
// driver's ch-go column in its field col.
func installLeaf(c column.Interface, n proto.ColInput) bool {
	f, ok := field(c, "col")
	if !ok {
		return false
	}
	nv := reflect.ValueOf(n)
	switch {
	case f.Type() == nv.Type():
	case f.Kind() == reflect.Interface && !f.IsNil() && f.Elem().Type() == nv.Type():
	case nv.Kind() == reflect.Pointer && f.Kind() == reflect.Struct && nv.Elem().Type() == f.Type():
		// DateTime, DateTime64: the driver's column is a ch-go struct whose
		// other fields (time zone, precision) it has set; only the values
		// (Data) are ours.
		d := f.FieldByName("Data")
		if !d.IsValid() {
			return false
		}
		d.Set(nv.Elem().FieldByName("Data"))
		return c.Rows() == n.Rows()
	default:
		return false
	}
	f.Set(nv)
	return c.Rows() == n.Rows()
}

// field is the named field of the struct c points to, made settable
// (clickhouse-go's fields are unexported: written through their address).
func field(c any, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	return settable(v.Elem().FieldByName(name))
}

func settable(f reflect.Value) (reflect.Value, bool) {
	if !f.IsValid() || !f.CanAddr() {
		return reflect.Value{}, false
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), true
}

// subColumn is the column.Interface an interface-typed field of c holds.
func subColumn(c any, name string) (column.Interface, bool) {
	f, ok := field(c, name)
	if !ok || f.Kind() != reflect.Interface || f.IsNil() {
		return nil, false
	}
	sub, ok := f.Interface().(column.Interface)
	return sub, ok && sub != nil
}

// offsetsColumn is the driver's offsets column inside c's field name (a
// column.UInt64 or Int64 struct), checked to be an empty column of
// offsets' type before anything is installed.
func offsetsColumn(f reflect.Value, offsets proto.ColInput) (column.Interface, bool) {
	f, ok := settable(f)
	if !ok || f.Kind() != reflect.Struct {
		return nil, false
	}
	oc, ok := f.Addr().Interface().(column.Interface)
	if !ok || oc.Rows() != 0 {
		return nil, false
	}
	if col, ok := field(oc, "col"); !ok || col.Type() != reflect.TypeOf(offsets) {
		return nil, false
	}
	return oc, true
}

// installArray installs a one-level Array(T): the elements into the
// driver's values column (install), the row end offsets into its only
// offsets column. clickhouse-go flattens Array(Array(T)) into one values
// column with an offsets column per level; those, and elements that do
// not install, keep the general path.
func installArray(c column.Interface, n chschema.ArrayNative) bool {
	if _, nested := n.Values.(chschema.ArrayNative); nested {
		return false
	}
	offs, ok := field(c, "offsets")
	if !ok || offs.Kind() != reflect.Slice || offs.Len() != 1 || offs.Index(0).Kind() != reflect.Pointer || offs.Index(0).IsNil() {
		return false
	}
	oc, ok := offsetsColumn(offs.Index(0).Elem().FieldByName("values"), n.Offsets)
	values, ok2 := subColumn(c, "values")
	if !ok || !ok2 || !install(values, n.Values) {
		return false
	}
	return install(oc, n.Offsets) && c.Rows() == n.Rows()
}

// installMap installs a Map(K, V): keys and values into the driver's
// columns, the row end offsets into its Int64 offsets column.
func installMap(c column.Interface, n chschema.MapNative) bool {
	s := reflect.ValueOf(c)
	if s.Kind() != reflect.Pointer || s.IsNil() || s.Elem().Kind() != reflect.Struct {
		return false
	}
	oc, ok := offsetsColumn(s.Elem().FieldByName("offsets"), n.Offsets)
	keys, ok2 := subColumn(c, "keys")
	values, ok3 := subColumn(c, "values")
	if !ok || !ok2 || !ok3 || keys.Rows() != 0 || values.Rows() != 0 {
		return false
	}
	// Keys first: a key column that does not take the native form leaves
	// everything unchanged; values that do not (after the keys did) would
	// leave the column half filled, so their fit is checked on a scratch
	// copy of the driver's type first.
	if !fits(values, n.Values) || !install(keys, n.Keys) || !install(values, n.Values) {
		return false
	}
	return install(oc, n.Offsets) && c.Rows() == n.Rows()
}

// fits reports whether install would take n into a column of c's type,
// trying it on a fresh column of that type.
func fits(c column.Interface, n proto.ColInput) bool {
	scratch, err := column.Type(c.Type()).Column(c.Name(), &column.ServerContext{Timezone: time.UTC})
	return err == nil && install(scratch, n)
}

// installLowCardinality installs an interned LowCardinality(String): the
// dictionary into the driver's index column (a String, whose first value,
// "", is the default the driver's own dictionary starts with), the rows'
// positions and the distinct count as the driver's Encode reads them (its
// unexported append.keys and len(append.index), which pick the key width).
func installLowCardinality(c column.Interface, n chschema.LowCardinalityNative) bool {
	lc, ok := lowCardinalityFields(c, n)
	if !ok {
		return false
	}
	dict, ok := subColumn(c, "index")
	if !ok || !install(dict, n.Dict) {
		return false
	}
	distinct := make(map[any]int, len(n.Dict.Pos)-1)
	for i := 1; i < len(n.Dict.Pos); i++ {
		distinct[n.Dict.Row(i)] = i
	}
	lc.keys.Set(reflect.ValueOf(n.Keys))
	lc.index.Set(reflect.ValueOf(distinct))
	lc.rows.SetInt(int64(len(n.Keys)))
	return c.Rows() == n.Rows()
}

// lowCardinalityState is the driver's LowCardinality fields that
// installLowCardinality sets, made settable.
type lowCardinalityState struct{ rows, keys, index reflect.Value }

// lowCardinalityFields finds those fields in c, an empty LowCardinality
// column that is not Nullable; ok is false when c is not one or its fields
// are not of the types n fills.
func lowCardinalityFields(c column.Interface, n chschema.LowCardinalityNative) (lowCardinalityState, bool) {
	var lc lowCardinalityState
	if _, ok := c.(*column.LowCardinality); !ok || c.Rows() != 0 {
		return lc, false
	}
	nullable, ok1 := field(c, "nullable")
	rows, ok2 := field(c, "rows")
	app, ok3 := field(c, "append")
	if !ok1 || !ok2 || !ok3 || nullable.Kind() != reflect.Bool || nullable.Bool() || rows.Kind() != reflect.Int || app.Kind() != reflect.Struct {
		return lc, false
	}
	keys, ok4 := settable(app.FieldByName("keys"))
	index, ok5 := settable(app.FieldByName("index"))
	if !ok4 || !ok5 || keys.Type() != reflect.TypeOf(n.Keys) || index.Type() != reflect.TypeOf(map[any]int(nil)) {
		return lc, false
	}
	return lowCardinalityState{rows: rows, keys: keys, index: index}, true
}

// installNullable does install's work for a Nullable(T) column: the values
// go into its T column (Base) through install, the NULL flags into the
// proto.ColUInt8 clickhouse-go keeps in a field named nulls (encoded only
// when enable is set, as it is for a top-level Nullable). Nothing changes
// unless both fit.
func installNullable(c column.Interface, n chschema.NullableNative) bool {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	nc, ok := c.(*column.Nullable)
	if !ok {
		return false
	}
	s := v.Elem()
	nulls, enable := s.FieldByName("nulls"), s.FieldByName("enable")
	if !nulls.IsValid() || !enable.IsValid() ||
		nulls.Type() != reflect.TypeOf(n.Nulls) || enable.Kind() != reflect.Bool || !enable.Bool() {
		return false
	}
	if base := nc.Base(); base == nil || !install(base, n.Values) {
		return false
	}
	reflect.NewAt(nulls.Type(), unsafe.Pointer(nulls.UnsafeAddr())).Elem().Set(reflect.ValueOf(n.Nulls))
	return c.Rows() == n.Rows()
}

package writer

import (
	"reflect"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"sink/internal/decode"
)

// nativeBlock is a Block that can hand over some columns as ch-go proto
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
	if nn, ok := n.(decode.NullableNative); ok {
		return installNullable(c, nn)
	}
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	f := v.Elem().FieldByName("col")
	if !f.IsValid() {
		return false
	}
	nv := reflect.ValueOf(n)
	switch {
	case f.Type() == nv.Type():
	case f.Kind() == reflect.Interface && !f.IsNil() && f.Elem().Type() == nv.Type():
	default:
		return false
	}
	// The field is unexported: write it through its address.
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(nv)
	return c.Rows() == n.Rows()
}

// installNullable does install's work for a Nullable(T) column: the values
// go into its T column (Base) through install, the NULL flags into the
// proto.ColUInt8 clickhouse-go keeps in a field named nulls (encoded only
// when enable is set, as it is for a top-level Nullable). Nothing changes
// unless both fit.
func installNullable(c column.Interface, n decode.NullableNative) bool {
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

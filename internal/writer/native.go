package writer

import (
	"reflect"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
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

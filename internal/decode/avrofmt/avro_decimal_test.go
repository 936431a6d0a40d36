package avrofmt

import (
	"testing"

	"github.com/hamba/avro/v2"
)

// A decimal the library refuses (no precision, precision 0, a scale above
// the precision, a precision the fixed size cannot hold) leaves the schema
// without a logical type though its "logicalType" says decimal: it is read
// as its underlying bytes or fixed, and compiling it or naming its column
// type does not panic.
func TestInvalidDecimalIsItsUnderlyingType(t *testing.T) {
	f := func(js string, want leafKind) {
		t.Helper()
		s, err := avro.Parse(js)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if logicalType(s) != string(avro.Decimal) {
			t.Fatalf("%s: logicalType %q, want the schema's own \"decimal\"", js, logicalType(s))
		}
		op, err := scalarOp(s)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if op.leaf != want {
			t.Errorf("%s: leaf %v, want %v", js, op.leaf, want)
		}
		if st := avroSchemaType(s, 0); st == nil {
			t.Errorf("%s: no column type", js)
		}
	}
	f(`{"type":"bytes","logicalType":"decimal"}`, leafBytes)
	f(`{"type":"bytes","logicalType":"decimal","precision":0}`, leafBytes)
	f(`{"type":"bytes","logicalType":"decimal","precision":4,"scale":9}`, leafBytes)
	f(`{"type":"fixed","name":"f","size":4,"logicalType":"decimal","precision":40}`, leafFixed)
	// A valid one still is a decimal.
	f(`{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}`, leafDecimalBytes)
}

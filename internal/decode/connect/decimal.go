package connect

import (
	"encoding/base64"

	"sink/internal/decode/column"
	"sink/internal/decode/format"
)

// Decimals turns Kafka Connect's and Debezium's decimal encodings into
// exact decimal text, which
// then converts like a JSON number: org.apache.kafka.connect.data.Decimal
// (base64 of the big-endian two's-complement unscaled value, the scale in
// the schema or the column) and io.debezium.data.VariableScaleDecimal
// ({"scale": s, "value": base64}). It holds the scratch space that keeps
// the common sizes (up to 16 bytes, 38 digits) free of allocations.
type Decimals struct {
	format.Unscaled
	raw, dec []byte
	// The Decimal column being read (ForColumn): its integer digits and
	// type; "" for other columns and formats.
	intDigits int
	colType   string
}

// ForColumn sets the Decimal column the next values are read for: P - S of
// Decimal(P, S), and its type ("": not a Decimal column).
func (d *Decimals) ForColumn(intDigits int, colType string) {
	d.intDigits, d.colType = intDigits, colType
}

// base64 decodes standard base64 text into the scratch buffer.
func (d *Decimals) base64(s []byte) ([]byte, error) {
	need := base64.StdEncoding.DecodedLen(len(s))
	if cap(d.raw) < need {
		d.raw = make([]byte, need)
	}
	n, err := base64.StdEncoding.Decode(d.raw[:need], s)
	return d.raw[:n], err
}

// VarDecimal reads a VariableScaleDecimal {"scale": s, "value": base64}.
func (d *Decimals) VarDecimal(in *column.Value) error {
	sv, vv := in.Tree.Get("scale"), in.Tree.Get("value")
	if sv == nil || vv == nil {
		return column.Reasonf("cannot read %s as a Debezium VariableScaleDecimal (want scale and value)", column.Show(in))
	}
	scale, err := sv.Int()
	val, err2 := vv.StringBytes()
	if err != nil || err2 != nil {
		return column.Reasonf("cannot read %s as a Debezium VariableScaleDecimal (want an integer scale and base64 value)", column.Show(in))
	}
	return d.FromBase64(in, val, scale)
}

// MaxScale bounds a decimal scale read from a record (Debezium's come from
// column definitions, PostgreSQL allows up to 1000 for numeric).
const MaxScale = 1000

// FromBase64 turns base64 unscaled two's-complement bytes and a scale
// into decimal text, and makes in that number.
func (d *Decimals) FromBase64(in *column.Value, b64 []byte, scale int) error {
	if scale > MaxScale || scale < -MaxScale {
		return column.Reasonf("Debezium decimal scale %d is out of range", scale)
	}
	raw, err := d.base64(b64)
	if err != nil {
		return column.Reasonf("cannot decode %s as Debezium Decimal bytes (base64 of the unscaled value)", column.Show(in))
	}
	// A Decimal(P, S) column holds P - S integer digits, so an unscaled
	// value of scale s has at most P - S + s digits: bounded before any
	// digit is made.
	maxDigits := 0
	if d.colType != "" {
		maxDigits = max(d.intDigits+scale, 1)
	}
	if err := format.CheckDecimal(raw, maxDigits, d.colType); err != nil {
		return err
	}
	d.dec = d.Text(d.dec[:0], raw, scale)
	in.Kind, in.Bytes = column.Number, d.dec
	return nil
}

package decode

import (
	"encoding/base64"
	"math/big"
	"math/bits"
	"strconv"

	"sink/internal/decode/column"
	"sink/internal/decode/format"
)

// decimals turns Debezium's decimal encodings into exact decimal text, which
// then converts like a JSON number: org.apache.kafka.connect.data.Decimal
// (base64 of the big-endian two's-complement unscaled value, the scale in
// the schema or the column) and io.debezium.data.VariableScaleDecimal
// ({"scale": s, "value": base64}). It holds the scratch space that keeps
// the common sizes (up to 16 bytes, 38 digits) free of allocations.
type decimals struct {
	raw, mag, digits, dec []byte
	bi                    big.Int
	// The Decimal column being read (column): its integer digits and
	// type; "" for other columns and formats.
	intDigits int
	colType   string
}

// column sets the Decimal column the next values are read for: P - S of
// Decimal(P, S), and its type ("": not a Decimal column).
func (d *decimals) column(intDigits int, colType string) {
	d.intDigits, d.colType = intDigits, colType
}

// base64 decodes standard base64 text into the scratch buffer.
func (d *decimals) base64(s []byte) ([]byte, error) {
	need := base64.StdEncoding.DecodedLen(len(s))
	if cap(d.raw) < need {
		d.raw = make([]byte, need)
	}
	n, err := base64.StdEncoding.Decode(d.raw[:need], s)
	return d.raw[:n], err
}

// varDecimal reads a VariableScaleDecimal {"scale": s, "value": base64}.
func (d *decimals) varDecimal(in *column.Value) error {
	sv, vv := in.Tree.Get("scale"), in.Tree.Get("value")
	if sv == nil || vv == nil {
		return column.Reasonf("cannot read %s as a Debezium VariableScaleDecimal (want scale and value)", column.Show(in))
	}
	scale, err := sv.Int()
	val, err2 := vv.StringBytes()
	if err != nil || err2 != nil {
		return column.Reasonf("cannot read %s as a Debezium VariableScaleDecimal (want an integer scale and base64 value)", column.Show(in))
	}
	return d.decimalFromBase64(in, val, scale)
}

// maxScale bounds a decimal scale read from a record (Debezium's come from
// column definitions, PostgreSQL allows up to 1000 for numeric).
const maxScale = 1000

// decimalFromBase64 turns base64 unscaled two's-complement bytes and a scale
// into decimal text, and makes in that number.
func (d *decimals) decimalFromBase64(in *column.Value, b64 []byte, scale int) error {
	if scale > maxScale || scale < -maxScale {
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
	d.dec = d.decimalText(d.dec[:0], raw, scale)
	in.Kind, in.Bytes = column.Number, d.dec
	return nil
}

// decimalText appends the decimal text of the big-endian two's-complement
// integer raw scaled by 10^-scale. Up to 16 bytes (38 digits) it does not
// allocate.
func (d *decimals) decimalText(dst, raw []byte, scale int) []byte {
	neg := len(raw) > 0 && raw[0]&0x80 != 0
	mag := raw
	if neg {
		d.mag = append(d.mag[:0], raw...)
		for i := range d.mag {
			d.mag[i] = ^d.mag[i]
		}
		for i := len(d.mag) - 1; i >= 0; i-- {
			d.mag[i]++
			if d.mag[i] != 0 {
				break
			}
		}
		mag = d.mag
	}
	for len(mag) > 0 && mag[0] == 0 {
		mag = mag[1:]
	}
	digits := d.digits[:0]
	switch {
	case len(mag) <= 8:
		var u uint64
		for _, x := range mag {
			u = u<<8 | uint64(x)
		}
		digits = strconv.AppendUint(digits, u, 10)
	case len(mag) <= 16:
		var hi, lo uint64
		for _, x := range mag[:len(mag)-8] {
			hi = hi<<8 | uint64(x)
		}
		for _, x := range mag[len(mag)-8:] {
			lo = lo<<8 | uint64(x)
		}
		digits = append128(digits, hi, lo)
	default:
		d.bi.SetBytes(mag)
		digits = d.bi.Append(digits, 10)
	}
	d.digits = digits
	zero := len(digits) == 1 && digits[0] == '0'
	if neg && !zero {
		dst = append(dst, '-')
	}
	switch {
	case scale <= 0:
		dst = append(dst, digits...)
		for i := 0; i < -scale && !zero; i++ {
			dst = append(dst, '0')
		}
	case len(digits) > scale:
		dst = append(dst, digits[:len(digits)-scale]...)
		dst = append(dst, '.')
		dst = append(dst, digits[len(digits)-scale:]...)
	default:
		dst = append(dst, '0', '.')
		for i := len(digits); i < scale; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	}
	return dst
}

// append128 appends the decimal digits of hi×2^64 + lo.
func append128(dst []byte, hi, lo uint64) []byte {
	const chunk = 1e19 // the largest power of ten below 2^64
	var chunks [2]uint64
	n := 0
	for hi != 0 {
		var r uint64
		hi, r = hi/chunk, hi%chunk
		lo, r = bits.Div64(r, lo, chunk)
		chunks[n] = r
		n++
	}
	dst = strconv.AppendUint(dst, lo, 10)
	for n > 0 {
		n--
		var buf [19]byte
		c := chunks[n]
		for j := 18; j >= 0; j-- {
			buf[j] = byte('0' + c%10)
			c /= 10
		}
		dst = append(dst, buf[:]...)
	}
	return dst
}

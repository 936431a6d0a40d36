package format

import (
	"math/big"
	"math/bits"
	"strconv"
)

// unscaled turns a decimal's unscaled value, big-endian two's-complement
// bytes as Avro and Kafka Connect write it, into exact decimal text. It
// holds the scratch space that keeps the common sizes (up to 16 bytes, 38
// digits) free of allocations.
type Unscaled struct {
	mag, digits []byte
	bi          big.Int
}

// decimalText appends the decimal text of the big-endian two's-complement
// integer raw scaled by 10^-scale. Up to 16 bytes (38 digits) it does not
// allocate.
func (d *Unscaled) Text(dst, raw []byte, scale int) []byte {
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

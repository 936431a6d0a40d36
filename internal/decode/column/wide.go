package column

import (
	"math/big"
	"math/bits"

	"sink/internal/chtype"
)

// u256 is a 256-bit integer in two's complement, least significant word
// first. Int128/Int256/UInt128/UInt256 columns store their values in it so
// that appending a record allocates nothing; the *big.Int values
// clickhouse-go takes are made once per insert (ColumnData).
type u256 [4]uint64

// wideBits is the width of a wide integer kind and whether it is signed.
func wideBits(k chtype.Kind) (n int, signed bool) {
	switch k {
	case chtype.Int128:
		return 128, true
	case chtype.Int256:
		return 256, true
	case chtype.UInt128:
		return 128, false
	}
	return 256, false
}

// mulAdd sets x = x*10 + d and reports overflow beyond 256 bits.
func (x *u256) mulAdd(d uint64) bool {
	carry := d
	for i := range x {
		hi, lo := bits.Mul64(x[i], 10)
		var c uint64
		x[i], c = bits.Add64(lo, carry, 0)
		carry = hi + c
	}
	return carry != 0
}

// bitLen is the position of the highest set bit plus one.
func (x *u256) bitLen() int {
	for i := 3; i >= 0; i-- {
		if x[i] != 0 {
			return i*64 + bits.Len64(x[i])
		}
	}
	return 0
}

func (x *u256) neg() {
	var borrow uint64
	for i := range x {
		x[i], borrow = bits.Sub64(0, x[i], borrow)
	}
}

func (x *u256) isPow2(n int) bool { // x == 2^n
	for i := range x {
		want := uint64(0)
		if i == n/64 {
			want = 1 << (n % 64)
		}
		if x[i] != want {
			return false
		}
	}
	return true
}

// wide reads an integer (JSON number or numeric string written without a
// fraction, or with a zero fraction or an exponent that makes it integral;
// true/false are 1/0) into a wide integer column's range.
func (c *State) wide(in *Value, t *chtype.Type) (u256, error) {
	var x u256
	var neg bool
	switch in.Kind {
	case Integer, Instant:
		n := in.Int
		if n < 0 {
			neg, n = true, -n
		}
		x[0] = uint64(n)
	case True:
		x[0] = 1
	case False:
	case String, Number:
		n, ok := c.parseNumber(in.Bytes)
		if !ok {
			return x, cannotParse(in, t)
		}
		if n.exp < 0 {
			return x, cannotConvert(in, t, "not an integer")
		}
		if n.intDigits() > 78 {
			return x, cannotConvert(in, t, "out of range")
		}
		for _, ch := range n.digits {
			if x.mulAdd(uint64(ch - '0')) {
				return x, cannotConvert(in, t, "out of range")
			}
		}
		for i := 0; i < n.exp; i++ {
			if x.mulAdd(0) {
				return x, cannotConvert(in, t, "out of range")
			}
		}
		neg = n.neg
	default:
		return x, cannotConvert(in, t, "")
	}
	size, signed := wideBits(t.Kind)
	l := x.bitLen()
	switch {
	case l == 0:
		return x, nil
	case !signed && (neg || l > size):
		return x, cannotConvert(in, t, "out of range")
	case signed && l >= size && !(neg && x.isPow2(size-1)):
		return x, cannotConvert(in, t, "out of range")
	}
	if neg {
		x.neg()
	}
	return x, nil
}

// bigInt converts a stored value to the big.Int clickhouse-go takes.
func (x u256) bigInt(signed bool) big.Int {
	var b big.Int
	negative := signed && x[3]>>63 == 1
	if negative {
		x.neg()
	}
	b.SetBits([]big.Word{big.Word(x[0]), big.Word(x[1]), big.Word(x[2]), big.Word(x[3])})
	if negative {
		b.Neg(&b)
	}
	return b
}

package column

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"net/netip"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"sink/internal/chtype"
)

// number is a finite decimal value: (-1)^neg × digits × 10^exp, normalized so
// digits has no leading or trailing zeros (zero is empty digits, exp 0).
type number struct {
	neg    bool
	digits []byte // ASCII digits; borrows State.digits
	exp    int
}

func isDigit(ch byte) bool { return ch >= '0' && ch <= '9' }

// parseNumber parses [+-]digits[.digits][(e|E)[+-]digits] exactly (no
// rounding). It accepts what JSON numbers and ordinary numeric strings look
// like; NaN, Inf, hex and spaces are not numbers here.
func (c *State) parseNumber(b []byte) (number, bool) {
	var n number
	i := 0
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		n.neg = b[i] == '-'
		i++
	}
	d := c.digits[:0]
	seen := false
	for ; i < len(b) && isDigit(b[i]); i++ {
		seen = true
		if len(d) > 0 || b[i] != '0' {
			d = append(d, b[i])
		}
	}
	frac := 0
	if i < len(b) && b[i] == '.' {
		i++
		for ; i < len(b) && isDigit(b[i]); i++ {
			seen = true
			frac++
			if len(d) > 0 || b[i] != '0' {
				d = append(d, b[i])
			}
		}
	}
	if !seen {
		return n, false
	}
	e := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			eneg = b[i] == '-'
			i++
		}
		if i == len(b) {
			return n, false
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
			if e = e*10 + int(b[i]-'0'); e > 1_000_000 {
				return n, false
			}
		}
		if eneg {
			e = -e
		}
	}
	if i != len(b) {
		return n, false
	}
	c.digits = d
	n.exp = e - frac
	for len(d) > 0 && d[len(d)-1] == '0' {
		d = d[:len(d)-1]
		n.exp++
	}
	n.digits = d
	if len(d) == 0 {
		n.neg, n.exp = false, 0
	}
	return n, true
}

// IsNumber reports whether b is a number as parseNumber reads it.
func (c *State) IsNumber(b []byte) bool {
	_, ok := c.parseNumber(b)
	return ok
}

// intDigits is the number of digits before the decimal point.
func (n number) intDigits() int { return len(n.digits) + n.exp }

// magnitude returns |n| as an integer; ok is false if n is fractional
// (frac) or does not fit in uint64.
func (n number) magnitude() (mag uint64, frac, ok bool) {
	if n.exp < 0 {
		return 0, true, false
	}
	if n.intDigits() > 20 {
		return 0, false, false
	}
	for _, ch := range n.digits {
		d := uint64(ch - '0')
		if mag > (math.MaxUint64-d)/10 {
			return 0, false, false
		}
		mag = mag*10 + d
	}
	for i := 0; i < n.exp; i++ {
		if mag > math.MaxUint64/10 {
			return 0, false, false
		}
		mag *= 10
	}
	return mag, false, true
}

// integer reads an integral value as sign and magnitude. Booleans are 1 and
// 0; numbers may be written with a fraction or exponent if the value is
// integral (1.0, 1e3).
func (c *State) integer(in *Value, t *chtype.Type) (neg bool, mag uint64, err error) {
	switch in.Kind {
	case Integer, Instant:
		if in.Int < 0 {
			return true, uint64(-in.Int), nil
		}
		return false, uint64(in.Int), nil
	case True:
		return false, 1, nil
	case False:
		return false, 0, nil
	case String, Number:
		b := in.Bytes
		i := 0
		if len(b) > 0 && b[0] == '-' {
			neg, i = true, 1
		}
		if n := len(b) - i; n > 0 && n <= 19 { // fast path: plain digits, cannot overflow
			var m uint64
			j := i
			for ; j < len(b); j++ {
				d := b[j] - '0'
				if d > 9 {
					break
				}
				m = m*10 + uint64(d)
			}
			if j == len(b) {
				return neg, m, nil
			}
		}
		n, ok := c.parseNumber(b)
		if !ok {
			return false, 0, cannotParse(in, t)
		}
		m, frac, ok := n.magnitude()
		if frac {
			return false, 0, cannotConvert(in, t, "not an integer")
		}
		if !ok {
			return false, 0, cannotConvert(in, t, "out of range")
		}
		return n.neg, m, nil
	}
	return false, 0, cannotConvert(in, t, "")
}

func (c *State) signed(in *Value, t *chtype.Type, lo, hi int64) (int64, error) {
	neg, mag, err := c.integer(in, t)
	if err != nil {
		return 0, err
	}
	if neg {
		if mag > uint64(-(lo+1))+1 {
			return 0, cannotConvert(in, t, "out of range")
		}
		return -int64(mag), nil
	}
	if mag > uint64(hi) {
		return 0, cannotConvert(in, t, "out of range")
	}
	return int64(mag), nil
}

func (c *State) unsigned(in *Value, t *chtype.Type, hi uint64) (uint64, error) {
	neg, mag, err := c.integer(in, t)
	if err != nil {
		return 0, err
	}
	if (neg && mag != 0) || mag > hi {
		return 0, cannotConvert(in, t, "out of range")
	}
	return mag, nil
}

// float accepts numbers and numeric strings, including the strings NaN, Inf,
// +Inf, -Inf and Infinity (any case), which ClickHouse stores as is. A finite
// value beyond the type's range is rejected.
func (c *State) float(in *Value, t *chtype.Type, bitSize int) (float64, error) {
	switch in.Kind {
	case Integer, Instant:
		return float64(in.Int), nil
	case String, Number:
		if bitSize == 64 {
			if f, ok := plainFloat64(in.Bytes); ok {
				return f, nil
			}
		}
		if in.Kind == Number && BareNaNInf(in.Bytes) {
			return 0, cannotConvert(in, t, "a bare NaN or Inf is not JSON; send it as a string")
		}
		if _, ok := c.parseNumber(in.Bytes); !ok && !isNaNInf(in.Bytes) {
			return 0, cannotParse(in, t) // no hex floats, underscores or spaces
		}
		f, err := strconv.ParseFloat(B2S(in.Bytes), bitSize)
		if err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
				if math.IsInf(f, 0) {
					return 0, cannotConvert(in, t, "out of range")
				}
				return f, nil // underflow to zero or a denormal
			}
			return 0, cannotParse(in, t)
		}
		return f, nil
	}
	return 0, cannotConvert(in, t, "")
}

// float64pow10 are the powers of ten a float64 holds exactly.
var float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// plainFloat64 is float's fast path for a Float64 written
// [-]digits[.digits] whose digits, read as one integer m, are below 2^52
// with at most 22 after the point: m and 10^k are then exact float64s,
// and one division rounds m / 10^k correctly, which is what
// strconv.ParseFloat returns for the text (its own exact path). ok is
// false for anything else, which the general path reads or refuses.
func plainFloat64(b []byte) (float64, bool) {
	neg, m, _, frac, ok := plainNumber(b)
	if !ok || m >= 1<<52 || frac >= len(float64pow10) {
		return 0, false
	}
	f := float64(m) / float64pow10[frac]
	if neg {
		f = -f
	}
	return f, true
}

// plainNumber reads the common way a number is written,
// [-]digits[.digits] (at least one digit before the point), as its
// digits m read as one integer, the significant digits before the point
// (intSig: leading zeros do not count) and the digits after it (frac).
// ok is false for any other text, and for more than 19 significant
// digits (m would not fit).
func plainNumber(b []byte) (neg bool, m uint64, intSig, frac int, ok bool) {
	i := 0
	if len(b) > 0 && b[0] == '-' {
		i, neg = 1, true
	}
	start, sig := i, 0
	for ; i < len(b) && isDigit(b[i]); i++ {
		if m != 0 || b[i] != '0' {
			sig++
		}
		m = m*10 + uint64(b[i]-'0')
	}
	if i == start {
		return false, 0, 0, 0, false
	}
	intSig = sig
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && isDigit(b[i]); i++ {
			if m != 0 || b[i] != '0' {
				sig++
			}
			m = m*10 + uint64(b[i]-'0')
			frac++
		}
	}
	if i != len(b) || sig > 19 {
		return false, 0, 0, 0, false
	}
	return neg, m, intSig, frac, true
}

func isNaNInf(b []byte) bool {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	return bytes.EqualFold(b, []byte("nan")) || bytes.EqualFold(b, []byte("inf")) || bytes.EqualFold(b, []byte("infinity"))
}

// decimalNumber reads a value as an exact decimal and checks it against
// Decimal(P, S): at most S digits after the point (trailing zeros don't
// count; nothing is rounded) and at most P-S before it.
func (c *State) decimalNumber(in *Value, t *chtype.Type) (number, error) {
	var n number
	b, ok := c.text(in)
	if !ok {
		return n, cannotConvert(in, t, "")
	}
	if n, ok = c.parseNumber(b); !ok {
		return n, cannotParse(in, t)
	}
	if n.exp+t.Scale < 0 {
		return n, cannotConvert(in, t, "more than "+strconv.Itoa(t.Scale)+" digits after the decimal point")
	}
	if n.intDigits() > t.Precision-t.Scale {
		return n, cannotConvert(in, t, "more than "+strconv.Itoa(t.Precision-t.Scale)+" digits before the decimal point")
	}
	return n, nil
}

// decimal64 returns the value scaled by 10^S, for precision up to 18.
func (c *State) decimal64(in *Value, t *chtype.Type) (int64, error) {
	if in.Kind == Number || in.Kind == String {
		if v, ok := plainDecimal(in.Bytes, t.Precision-t.Scale, t.Scale); ok {
			return v, nil
		}
	}
	return c.exactDecimal64(in, t)
}

// exactDecimal64 is decimal64 for any value, through the exact digits.
func (c *State) exactDecimal64(in *Value, t *chtype.Type) (int64, error) {
	n, err := c.decimalNumber(in, t)
	if err != nil {
		return 0, err
	}
	var v int64
	for _, ch := range n.digits {
		v = v*10 + int64(ch-'0')
	}
	for i := n.exp + t.Scale; i > 0; i-- {
		v *= 10
	}
	if n.neg {
		v = -v
	}
	return v, nil
}

// plainDecimal is decimal64's fast path for the common way a decimal is
// written: [-]digits[.digits], with at most ip significant digits before
// the point and at most scale after it (so the scaled value has at most
// 18 digits and fits). It returns the value scaled by 10^scale; ok is
// false for anything else (a sign '+', an exponent, a missing integer
// part, more digits: trailing zeros after the point may still make it
// fit), which the exact path then reads or refuses.
func plainDecimal(b []byte, ip, scale int) (int64, bool) {
	neg, m, intSig, frac, ok := plainNumber(b)
	if !ok || intSig > ip || frac > scale {
		return 0, false
	}
	v := int64(m) // at most ip + scale ≤ 18 significant digits
	for ; frac < scale; frac++ {
		v *= 10
	}
	if neg {
		v = -v
	}
	return v, true
}

// decimalBig handles precision above 18 (allocates per value).
func (c *State) decimalBig(in *Value, t *chtype.Type) (decimal.Decimal, error) {
	n, err := c.decimalNumber(in, t)
	if err != nil {
		return decimal.Decimal{}, err
	}
	s := make([]byte, 0, len(n.digits)+n.exp+t.Scale+1)
	if n.neg {
		s = append(s, '-')
	}
	s = append(s, n.digits...)
	for i := n.exp + t.Scale; i > 0; i-- {
		s = append(s, '0')
	}
	if len(n.digits) == 0 {
		s = append(s[:0], '0')
	}
	var bi big.Int
	bi.SetString(string(s), 10)
	return decimal.NewFromBigInt(&bi, int32(-t.Scale)), nil
}

// boolean accepts true/false, 0/1 and the strings "true", "false" (any
// case), "1", "0".
func (c *State) boolean(in *Value, t *chtype.Type) (bool, error) {
	switch in.Kind {
	case True:
		return true, nil
	case False:
		return false, nil
	case String:
		switch {
		case bytes.EqualFold(in.Bytes, []byte("true")) || string(in.Bytes) == "1":
			return true, nil
		case bytes.EqualFold(in.Bytes, []byte("false")) || string(in.Bytes) == "0":
			return false, nil
		}
		return false, cannotParse(in, t)
	case Number, Integer:
		neg, mag, err := c.integer(in, t)
		if err != nil {
			return false, err
		}
		if neg || mag > 1 {
			return false, cannotConvert(in, t, "want 0 or 1")
		}
		return mag == 1, nil
	}
	return false, cannotConvert(in, t, "")
}

func (c *State) uuidValue(in *Value, t *chtype.Type) (uuid.UUID, error) {
	if in.Kind != String {
		return uuid.Nil, cannotConvert(in, t, "")
	}
	u, err := uuid.ParseBytes(in.Bytes)
	if err != nil {
		return uuid.Nil, cannotParse(in, t)
	}
	return u, nil
}

// enum accepts an element name (string) or an element value (number, or a
// numeric string that is not a name).
func (c *State) enum(in *Value, t *chtype.Type) (int16, error) {
	switch in.Kind {
	case String:
		if v, ok := t.EnumByName[string(in.Bytes)]; ok {
			return v, nil
		}
		if _, ok := c.parseNumber(in.Bytes); !ok {
			return 0, cannotConvert(in, t, "unknown name")
		}
	case Number, Integer:
	default:
		return 0, cannotConvert(in, t, "")
	}
	v, err := c.signed(in, t, math.MinInt16, math.MaxInt16)
	if err != nil {
		return 0, err
	}
	if !t.EnumByValue[int16(v)] {
		return 0, cannotConvert(in, t, "unknown value")
	}
	return int16(v), nil
}

func (c *State) ip(in *Value, t *chtype.Type) (netip.Addr, error) {
	if in.Kind != String {
		return netip.Addr{}, cannotConvert(in, t, "")
	}
	if bytes.IndexByte(in.Bytes, '%') >= 0 { // zones are not storable (and ParseAddr would keep the text)
		return netip.Addr{}, cannotParse(in, t)
	}
	a, err := netip.ParseAddr(B2S(in.Bytes))
	if err != nil {
		return netip.Addr{}, cannotParse(in, t)
	}
	return a, nil
}

// ipv4 accepts dotted-quad strings and integers 0..2^32-1, returned as the
// big-endian number clickhouse-go's IPv4 column takes from a []uint32.
func (c *State) ipv4(in *Value, t *chtype.Type) (uint32, error) {
	if in.Kind == Number || in.Kind == Integer {
		v, err := c.unsigned(in, t, math.MaxUint32)
		return uint32(v), err
	}
	a, err := c.ip(in, t)
	if err != nil {
		return 0, err
	}
	if !a.Is4() {
		return 0, cannotConvert(in, t, "not an IPv4 address")
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:]), nil
}

// ipv6 accepts IPv6 strings and IPv4 strings (stored as ::ffff:a.b.c.d).
func (c *State) ipv6(in *Value, t *chtype.Type) ([16]byte, error) {
	a, err := c.ip(in, t)
	if err != nil {
		return [16]byte{}, err
	}
	return a.As16(), nil
}

// ---- dates and times ----

// SecondsPerDay is the seconds of a day (no leap seconds, as unix time).
const SecondsPerDay = 86400

// daysFromCivil returns days since 1970-01-01 for a proleptic Gregorian date.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func num2(b []byte) (int, bool) {
	if len(b) < 2 || !isDigit(b[0]) || !isDigit(b[1]) {
		return 0, false
	}
	return int(b[0]-'0')*10 + int(b[1]-'0'), true
}

// looksLikeDate reports whether b starts like YYYY-MM-DD.
func looksLikeDate(b []byte) bool {
	return len(b) >= 10 && b[4] == '-' && b[7] == '-'
}

// parseYMD parses YYYY-MM-DD at the start of b.
func parseYMD(b []byte) (y, m, d int, ok bool) {
	if !looksLikeDate(b) {
		return 0, 0, 0, false
	}
	for i := 0; i < 4; i++ {
		if !isDigit(b[i]) {
			return 0, 0, 0, false
		}
		y = y*10 + int(b[i]-'0')
	}
	var ok1, ok2 bool
	m, ok1 = num2(b[5:7])
	d, ok2 = num2(b[8:10])
	if !ok1 || !ok2 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, 0, 0, false
	}
	return y, m, d, true
}

// parseDateTimeText parses YYYY-MM-DD[(T|t| )hh:mm[:ss[.fraction]][Z|±hh[:mm]]]
// (RFC 3339 and ClickHouse's own text format). Text without a zone is wall
// time in loc (UTC when loc is nil); a date alone is midnight.
func parseDateTimeText(b []byte, loc *time.Location) (sec, nsec int64, ok bool) {
	return (*dayCache)(nil).parseDateTimeText(b, loc)
}

// dayCache remembers the last date read as text and its day number: the
// timestamps of a stream mostly share their date, and turning the date
// into days is most of reading the time. The zero dayCache is empty; a nil
// one remembers nothing.
type dayCache struct {
	text    [10]byte // YYYY-MM-DD as read
	y, m, d int
	days    int64 // daysFromCivil(y, m, d)
	set     bool
}

// date parses YYYY-MM-DD at the start of b, as parseYMD, with its day
// number.
func (dc *dayCache) date(b []byte) (y, m, d int, days int64, ok bool) {
	if dc != nil && dc.set && len(b) >= 10 && string(b[:10]) == string(dc.text[:]) {
		return dc.y, dc.m, dc.d, dc.days, true
	}
	if y, m, d, ok = parseYMD(b); !ok {
		return 0, 0, 0, 0, false
	}
	days = daysFromCivil(y, m, d)
	if dc != nil {
		copy(dc.text[:], b)
		dc.y, dc.m, dc.d, dc.days, dc.set = y, m, d, days, true
	}
	return y, m, d, days, true
}

// parseDateTimeText is parseDateTimeText remembering the date in dc.
func (dc *dayCache) parseDateTimeText(b []byte, loc *time.Location) (sec, nsec int64, ok bool) {
	y, mo, d, days, ok := dc.date(b)
	if !ok {
		return 0, 0, false
	}
	var hh, mm, ss int
	rest := b[10:]
	if len(rest) > 0 {
		if rest[0] != 'T' && rest[0] != 't' && rest[0] != ' ' {
			return 0, 0, false
		}
		var ok1, ok2 bool
		hh, ok1 = num2(rest[1:])
		if !ok1 || len(rest) < 6 || rest[3] != ':' {
			return 0, 0, false
		}
		mm, ok2 = num2(rest[4:])
		if !ok2 || hh > 23 || mm > 59 {
			return 0, 0, false
		}
		rest = rest[6:]
		if len(rest) > 0 && rest[0] == ':' {
			if ss, ok1 = num2(rest[1:]); !ok1 || ss > 59 {
				return 0, 0, false
			}
			rest = rest[3:]
			if len(rest) > 0 && rest[0] == '.' {
				rest = rest[1:]
				n := 0
				for n < len(rest) && isDigit(rest[n]) {
					if n < 9 {
						nsec = nsec*10 + int64(rest[n]-'0')
					}
					n++
				}
				if n == 0 {
					return 0, 0, false
				}
				for i := n; i < 9; i++ {
					nsec *= 10
				}
				rest = rest[n:]
			}
		}
		switch {
		case len(rest) == 0:
		case len(rest) == 1 && (rest[0] == 'Z' || rest[0] == 'z'):
			loc = time.UTC
		case rest[0] == '+' || rest[0] == '-':
			oh, okh := num2(rest[1:])
			om, okm := 0, true
			switch len(rest) {
			case 3:
			case 5:
				om, okm = num2(rest[3:])
			case 6:
				if rest[3] != ':' {
					okm = false
				} else {
					om, okm = num2(rest[4:])
				}
			default:
				okm = false
			}
			if !okh || !okm || oh > 23 || om > 59 {
				return 0, 0, false
			}
			off := int64(oh*3600 + om*60)
			if rest[0] == '-' {
				off = -off
			}
			return days*SecondsPerDay + int64(hh*3600+mm*60+ss) - off, nsec, true
		default:
			return 0, 0, false
		}
	}
	if loc == nil || loc == time.UTC {
		return days*SecondsPerDay + int64(hh*3600+mm*60+ss), nsec, true
	}
	return time.Date(y, time.Month(mo), d, hh, mm, ss, 0, loc).Unix(), nsec, true
}

var pow10 = [...]int64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

// unixNumber converts a unix timestamp to seconds and nanoseconds, choosing
// the unit by magnitude: |v| < 1e11 seconds, < 1e14 milliseconds, < 1e17
// microseconds, otherwise nanoseconds. Fractions are kept to the nanosecond.
func unixNumber(n number) (sec, nsec int64, ok bool) {
	var unit int // power of ten per second: 0, 3, 6, 9
	switch id := n.intDigits(); {
	case id <= 11:
		unit = 0
	case id <= 14:
		unit = 3
	case id <= 17:
		unit = 6
	case id <= 20:
		unit = 9
	default:
		return 0, 0, false
	}
	e := n.exp - unit // value in seconds = digits × 10^e
	k := len(n.digits) + e
	var ip uint64
	for i := 0; i < k && i < len(n.digits); i++ {
		ip = ip*10 + uint64(n.digits[i]-'0')
	}
	for i := len(n.digits); i < k; i++ {
		ip *= 10
	}
	for i := 0; i < 9; i++ { // nine fraction digits: position k+i of the digit string
		var d int64
		if p := k + i; p >= 0 && p < len(n.digits) {
			d = int64(n.digits[p] - '0')
		}
		nsec = nsec*10 + d
	}
	sec = int64(ip)
	if n.neg {
		sec = -sec
		if nsec > 0 {
			sec--
			nsec = 1e9 - nsec
		}
	}
	return sec, nsec, true
}

func unixInt(v int64) (sec, nsec int64) {
	a := v
	if a < 0 {
		a = -a
	}
	unit := 0
	switch {
	case a < 1e11:
	case a < 1e14:
		unit = 3
	case a < 1e17:
		unit = 6
	default:
		unit = 9
	}
	p := pow10[unit]
	sec, r := v/p, v%p
	if r < 0 {
		sec--
		r += p
	}
	return sec, r * pow10[9-unit]
}

// timestamp reads a value as an instant: text (see parseDateTimeText),
// unix numbers or numeric strings (see unixNumber), or the record time.
func (c *State) timestamp(in *Value, t *chtype.Type) (sec, nsec int64, err error) {
	switch in.Kind {
	case Instant:
		return in.Time.Unix(), int64(in.Time.Nanosecond()), nil
	case Integer:
		sec, nsec = unixInt(in.Int)
		return sec, nsec, nil
	case String, Number:
		if in.Kind == String && looksLikeDate(in.Bytes) {
			sec, nsec, ok := c.days.parseDateTimeText(in.Bytes, t.Loc)
			if !ok {
				return 0, 0, cannotParse(in, t)
			}
			return sec, nsec, nil
		}
		n, ok := c.parseNumber(in.Bytes)
		if !ok {
			return 0, 0, cannotParse(in, t)
		}
		if sec, nsec, ok = unixNumber(n); !ok {
			return 0, 0, cannotConvert(in, t, "out of range")
		}
		return sec, nsec, nil
	}
	return 0, 0, cannotConvert(in, t, "")
}

const (
	maxDateTime     = math.MaxUint32
	minDateTime64   = -2208988800 // 1900-01-01 00:00:00 UTC
	maxDateTime64   = 10413791999 // 2299-12-31 23:59:59 UTC
	maxDateTime64p9 = 9223372035  // 2262-04-11: DateTime64(9) ticks must fit in int64
)

var (
	minDate32Days = daysFromCivil(1900, 1, 1)
	maxDate32Days = daysFromCivil(2299, 12, 31)
)

func (c *State) dateTime(in *Value, t *chtype.Type) (int64, error) {
	sec, _, err := c.timestamp(in, t)
	if err != nil {
		return 0, err
	}
	if sec < 0 || sec > maxDateTime {
		return 0, cannotConvert(in, t, "out of range")
	}
	return sec, nil
}

func (c *State) dateTime64(in *Value, t *chtype.Type) (time.Time, error) {
	sec, nsec, err := c.timestamp(in, t)
	if err != nil {
		return time.Time{}, err
	}
	lo, hi := int64(minDateTime64), int64(maxDateTime64)
	if t.Precision == 9 {
		hi = maxDateTime64p9
	}
	if sec < lo || sec > hi {
		return time.Time{}, cannotConvert(in, t, "out of range")
	}
	return time.Unix(sec, nsec).UTC(), nil
}

// date reads YYYY-MM-DD (a longer date-time string counts by the date as
// written, its time and zone are checked but not applied), a day number
// 0..65535, a larger unix timestamp (by the timestamp rules, UTC date) or the
// record time (UTC date).
func (c *State) date(in *Value, t *chtype.Type) (time.Time, error) {
	var days int64
	switch in.Kind {
	case Instant:
		days = floorDiv(in.Time.Unix(), SecondsPerDay)
	case Integer:
		if in.Int >= 0 && in.Int <= math.MaxUint16 {
			days = in.Int
		} else {
			sec, _ := unixInt(in.Int)
			days = floorDiv(sec, SecondsPerDay)
		}
	case String, Number:
		if in.Kind == String && looksLikeDate(in.Bytes) {
			y, m, d, ok := parseYMD(in.Bytes)
			if ok && len(in.Bytes) > 10 {
				_, _, ok = parseDateTimeText(in.Bytes, nil)
			}
			if !ok {
				return time.Time{}, cannotParse(in, t)
			}
			days = daysFromCivil(y, m, d)
			break
		}
		n, ok := c.parseNumber(in.Bytes)
		if !ok {
			return time.Time{}, cannotParse(in, t)
		}
		if mag, _, ok := n.magnitude(); ok && !n.neg && mag <= math.MaxUint16 {
			days = int64(mag)
			break
		}
		sec, _, ok := unixNumber(n)
		if !ok {
			return time.Time{}, cannotConvert(in, t, "out of range")
		}
		days = floorDiv(sec, SecondsPerDay)
	default:
		return time.Time{}, cannotConvert(in, t, "")
	}
	lo, hi := int64(0), int64(math.MaxUint16)
	if t.Kind == chtype.Date32 {
		lo, hi = minDate32Days, maxDate32Days
	}
	if days < lo || days > hi {
		return time.Time{}, cannotConvert(in, t, "out of range")
	}
	return time.Unix(days*SecondsPerDay, 0).UTC(), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// BareNaNInf reports an unquoted NaN or Inf number token, which JSON does
// not have but the parser takes (it does not take Infinity, which makes the
// whole record invalid JSON): both are rejected, so that no bare literal
// is accepted in one spelling and refused in another.
func BareNaNInf(b []byte) bool {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	if len(b) == 0 || (b[0]|0x20 != 'n' && b[0]|0x20 != 'i') {
		return false // the common case: a digit
	}
	return isNaNInf(b)
}

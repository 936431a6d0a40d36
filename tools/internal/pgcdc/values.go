package pgcdc

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// gen draws random values and renders them as PostgreSQL literals; with
// millis every time and timestamp is a whole millisecond.
type gen struct {
	rnd    *rand.Rand
	millis bool
}

// pgString quotes s as a PostgreSQL string literal (standard_conforming_strings
// on, as since PostgreSQL 9.1: only the quote is doubled).
func pgString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// pieces are what random text is made of: every escape JSON and ClickHouse
// care about, multi-byte UTF-8 (2, 3 and 4 bytes), a combining accent,
// line and paragraph separators, a byte-order mark, DEL and other control
// characters (NUL is the one PostgreSQL text cannot hold).
var pieces = []string{"a", "Zz", " ", "42", "'", "''", `"`, `\`, `\\`, `\n`, "\n", "\t", "\r", "\r\n", "é", "ü", "日本語",
	"😀", "e\u0301", "\u2028", "\u2029", "\ufeff", "\x01", "\x1f", "\x7f", "{", "}", "[", "]", ",", ":", "NULL", "null",
	"%", "_", "$", "`", "<tag>", "&amp;", "\u00a0", "Ω", "\u200b"}

func (g gen) text(maxPieces int) string {
	if g.rnd.IntN(20) == 0 {
		return ""
	}
	var b strings.Builder
	for n := 1 + g.rnd.IntN(maxPieces); n > 0; n-- {
		b.WriteString(pieces[g.rnd.IntN(len(pieces))])
	}
	return b.String()
}

// bigText is random letters and digits, size bytes: pglz finds no repeats
// in it, and STORAGE EXTERNAL keeps it uncompressed anyway.
func (g gen) bigText(size int) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, size)
	for i := range b {
		b[i] = alnum[g.rnd.IntN(len(alnum))]
	}
	return string(b)
}

func (g gen) bytes(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(g.rnd.Uint32())
	}
	return b
}

// bigSize is the size of a TOASTed value: 9 to 24 KB.
func (g gen) bigSize() int { return 9<<10 + g.rnd.IntN(15<<10) }

var (
	minTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2299, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// instant is a random time in 1900..2299 in µs (ms with millis), often
// before 1970, now and then one of the edges.
func (g gen) instant() time.Time {
	t := g.anyInstant()
	if g.millis {
		t = t.Truncate(time.Millisecond)
	}
	return t
}

func (g gen) anyInstant() time.Time {
	switch g.rnd.IntN(12) {
	case 0:
		return minTime
	case 1:
		return time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC)
	case 2:
		return time.Unix(0, 0).UTC()
	case 3:
		return time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC)
	case 4:
		return maxTime
	}
	span := maxTime.UnixMicro() - minTime.UnixMicro()
	us := minTime.UnixMicro() + g.rnd.Int64N(span)
	if g.rnd.IntN(3) == 0 {
		us -= us % 1_000_000 // whole seconds too
	}
	return time.UnixMicro(us).UTC()
}

// floatLit renders f for PostgreSQL: the special values by name.
func floatLit(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "'NaN'"
	case math.IsInf(f, 1):
		return "'Infinity'"
	case math.IsInf(f, -1):
		return "'-Infinity'"
	}
	return "'" + strconv.FormatFloat(f, 'g', -1, bits) + "'"
}

func (g gen) float(bits int) float64 {
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1.5, -2.25, 0.1}
	if bits == 32 {
		specials = append(specials, math.MaxFloat32, math.SmallestNonzeroFloat32, -1e-38)
	} else {
		specials = append(specials, math.MaxFloat64, math.SmallestNonzeroFloat64, 1e-300)
	}
	if g.rnd.IntN(3) == 0 {
		return specials[g.rnd.IntN(len(specials))]
	}
	f := (g.rnd.Float64() - 0.5) * math.Pow(10, float64(g.rnd.IntN(30)-10))
	if bits == 32 {
		f = float64(float32(f))
	}
	return f
}

// numeric is unconstrained numeric text: up to 30 integer digits and 20
// decimal places, trailing zeros kept (1.5000 stays 1.5000 in PostgreSQL).
func (g gen) numeric() string {
	switch g.rnd.IntN(10) {
	case 0:
		return "0"
	case 1:
		return "1.5000"
	case 2:
		return "-0.00000000000000000001"
	}
	var b strings.Builder
	if g.rnd.IntN(2) == 0 {
		b.WriteByte('-')
	}
	b.WriteString(strconv.Itoa(1 + g.rnd.IntN(9)))
	for n := g.rnd.IntN(30); n > 0; n-- {
		b.WriteByte(byte('0' + g.rnd.IntN(10)))
	}
	if n := g.rnd.IntN(21); n > 0 {
		b.WriteByte('.')
		for ; n > 0; n-- {
			b.WriteByte(byte('0' + g.rnd.IntN(10)))
		}
	}
	return b.String()
}

// decimal12 is a numeric(12,2) value: at most 10 integer digits.
func (g gen) decimal12() string {
	cents := g.rnd.Int64N(2_000_000_000_000) - 1_000_000_000_000
	if g.rnd.IntN(4) == 0 {
		cents = g.rnd.Int64N(20000) - 10000
	}
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	s := fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
	if g.rnd.IntN(3) == 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".") // 1.5 as well as 1.50
	}
	return s
}

// jsonDoc is a random JSON document: nested objects and arrays, numbers
// written several ways (1.50, 1e3, -0, big integers), every escape in keys
// and strings.
func (g gen) jsonDoc(depth int) string {
	switch r := g.rnd.IntN(10); {
	case depth > 2 || r < 4:
		switch g.rnd.IntN(9) {
		case 0:
			return "null"
		case 1:
			return "true"
		case 2:
			return "false"
		case 3:
			return []string{"1.50", "1e3", "-0", "12345678901234567890", "0.000001", "-7", "2.5E-3"}[g.rnd.IntN(7)]
		case 4:
			return strconv.Itoa(g.rnd.IntN(1000))
		default:
			return jsonString(g.text(6))
		}
	case r < 7:
		n := g.rnd.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = g.jsonDoc(depth + 1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		n := g.rnd.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = jsonString(g.text(3)) + ": " + g.jsonDoc(depth+1)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
}

// jsonString quotes s as a JSON string, escaping what JSON requires and, now
// and then, more (\/ and \u escapes are both valid input).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// literal returns a random value of column c as a PostgreSQL expression.
func (g gen) literal(c Column) string {
	if c.Nullable && g.rnd.IntN(8) == 0 {
		return "NULL"
	}
	switch c.Kind {
	case KInt16:
		return strconv.Itoa(g.rnd.IntN(65536) - 32768)
	case KInt32:
		if g.rnd.IntN(6) == 0 {
			return []string{"2147483647", "-2147483648", "0"}[g.rnd.IntN(3)]
		}
		return strconv.Itoa(g.rnd.IntN(2000001) - 1000000)
	case KInt64:
		return strconv.FormatInt(g.rnd.Int64()-g.rnd.Int64(), 10)
	case KDecimal:
		return g.decimal12()
	case KNumeric:
		return g.numeric()
	case KFloat32:
		return floatLit(g.float(32), 32) + "::real"
	case KFloat64:
		return floatLit(g.float(64), 64) + "::double precision"
	case KBool:
		return strconv.FormatBool(g.rnd.IntN(2) == 0)
	case KDate:
		return "'" + g.instant().Format("2006-01-02") + "'::date"
	case KTimestamp:
		return "'" + g.instant().Format("2006-01-02 15:04:05.999999") + "'::timestamp"
	case KTimestampTZ:
		// Written with a random offset; PostgreSQL keeps the instant.
		off := (g.rnd.IntN(57) - 28) * 30 * 60
		in := g.instant()
		if in.Equal(minTime) {
			in = in.Add(24 * time.Hour) // the offset must not take it below 1900
		}
		if in.Equal(maxTime) {
			in = in.Add(-24 * time.Hour)
		}
		return "'" + in.In(time.FixedZone("", off)).Format("2006-01-02 15:04:05.999999-07:00") + "'::timestamptz"
	case KTime:
		switch g.rnd.IntN(6) {
		case 0:
			return "'24:00:00'::time"
		case 1:
			return "'00:00:00'::time"
		case 2:
			if g.millis {
				return "'23:59:59.999'::time"
			}
			return "'23:59:59.999999'::time"
		}
		us := g.rnd.Int64N(86_400_000_000)
		if g.millis {
			us -= us % 1000
		}
		return "'" + time.UnixMicro(us).UTC().Format("15:04:05.999999") + "'::time"
	case KUUID:
		b := g.bytes(16)
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		h := hex.EncodeToString(b)
		if g.rnd.IntN(4) == 0 {
			h = strings.ToUpper(h) // PostgreSQL prints it in lower case
		}
		return fmt.Sprintf("'%s-%s-%s-%s-%s'::uuid", h[:8], h[8:12], h[12:16], h[16:20], h[20:])
	case KJSON:
		return pgString(g.jsonDoc(0)) + "::jsonb"
	case KIntArray:
		n := g.rnd.IntN(6)
		if n == 0 {
			return "'{}'::integer[]"
		}
		els := make([]string, n)
		for i := range els {
			if g.rnd.IntN(4) == 0 {
				els[i] = "NULL"
			} else {
				els[i] = strconv.Itoa(g.rnd.IntN(2001) - 1000)
			}
		}
		return "ARRAY[" + strings.Join(els, ",") + "]::integer[]"
	case KTextArray:
		n := g.rnd.IntN(5)
		if n == 0 {
			return "'{}'::text[]"
		}
		els := make([]string, n)
		for i := range els {
			if g.rnd.IntN(4) == 0 {
				els[i] = "NULL"
			} else {
				els[i] = pgString(g.text(4))
			}
		}
		return "ARRAY[" + strings.Join(els, ",") + "]::text[]"
	case KBytes:
		size := g.rnd.IntN(40)
		if c.Big {
			size = g.bigSize()
		}
		return `'\x` + hex.EncodeToString(g.bytes(size)) + `'::bytea`
	case KEnum:
		return pgString(Moods[g.rnd.IntN(len(Moods))]) + "::mood"
	}
	if c.Big {
		return pgString(g.bigText(g.bigSize()))
	}
	return pgString(g.text(8))
}

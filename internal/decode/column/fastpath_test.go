package column

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"sink/internal/chtype"
)

// The fast paths for the common ways numbers are written (plainFloat64,
// plainDecimal) must give exactly what the general path gives, and leave
// everything else to it.

// numberTexts are number texts around the fast paths' limits: signs,
// leading and trailing zeros, the 2^52 and 22-fraction-digit limits,
// decimals' digit limits, exponents, and what is no number.
func numberTexts() []string {
	out := []string{
		"0", "-0", "0.0", "-0.0", "00", "007.50", "5.", "-5.", ".5", "-.5", "+1", "1e3", "1E-2", "1.5e", "-", "", "1.2.3", "1-2",
		"4503599627370495", "4503599627370496", "4503599627370497", "-4503599627370495.9",
		"9007199254740993", "0.1", "0.2", "0.3", "123456.789", "1.0000000000000000000001", "1.000000000000000000001",
		"0.0000000000000000000001", "0.00000000000000000000001", "99999999999999.9999", "999999999999999.9999",
		"12345678901234.5678", "-12345678901234.5678", "1.23456", "1.2345", "1.23450000", "0001.0000", "NaN", "inf", " 1", "1 ", "1_0",
		"18446744073709551616", "99999999999999999999.5",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var sb strings.Builder
		if r.IntN(3) == 0 {
			sb.WriteByte('-')
		}
		for n := r.IntN(18); n >= 0; n-- {
			sb.WriteByte(byte('0' + r.IntN(10)))
		}
		if r.IntN(4) > 0 {
			sb.WriteByte('.')
			for n := r.IntN(25); n > 0; n-- {
				sb.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		out = append(out, sb.String())
	}
	return out
}

func TestPlainFloat64IsParseFloat(t *testing.T) {
	fast := 0
	for _, s := range numberTexts() {
		f, ok := plainFloat64([]byte(s))
		if !ok {
			continue
		}
		fast++
		want, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(f) != math.Float64bits(want) {
			t.Errorf("%q: fast path %v (%x), ParseFloat %v (%x) %v", s, f, math.Float64bits(f), want, math.Float64bits(want), err)
		}
	}
	if fast < 1000 {
		t.Errorf("the fast path took only %d texts", fast)
	}
}

func TestPlainDecimalIsExact(t *testing.T) {
	for _, typ := range []string{"Decimal(18, 4)", "Decimal(18, 0)", "Decimal(9, 2)", "Decimal(18, 18)", "Decimal(10, 5)"} {
		ct, fast := chtype.Parse(typ), 0
		for _, s := range numberTexts() {
			got, ok := plainDecimal([]byte(s), ct.Precision-ct.Scale, ct.Scale)
			if !ok {
				continue
			}
			var c State
			want, err := c.exactDecimal64(&Value{Kind: Number, Bytes: []byte(s)}, ct)
			if err != nil {
				t.Errorf("%s %q: fast path %d, exact path refuses: %v", typ, s, got, err)
				continue
			}
			fast++
			if got != want {
				t.Errorf("%s %q: fast path %d, exact path %d", typ, s, got, want)
			}
		}
		if fast < 100 {
			t.Errorf("%s: the fast path took only %d texts", typ, fast)
		}
	}
}

// FuzzPlainNumbers holds the fast paths to the general ones on any text.
//
//	go test ./internal/decode/ -run '^$' -fuzz FuzzPlainNumbers -fuzztime 1m
func FuzzPlainNumbers(f *testing.F) {
	for _, s := range numberTexts()[:200] {
		f.Add(s)
	}
	dec := chtype.Parse("Decimal(18, 4)")
	f.Fuzz(func(t *testing.T, s string) {
		if got, ok := plainFloat64([]byte(s)); ok {
			if want, err := strconv.ParseFloat(s, 64); err != nil || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%q: fast path %v, ParseFloat %v %v", s, got, want, err)
			}
		}
		if got, ok := plainDecimal([]byte(s), dec.Precision-dec.Scale, dec.Scale); ok {
			var c State
			if want, err := c.exactDecimal64(&Value{Kind: String, Bytes: []byte(s)}, dec); err != nil || got != want {
				t.Fatalf("%q: fast path %d, exact path %d %v", s, got, want, err)
			}
		}
	})
}

// TestLowCardinalityDictionary holds an lcStrCol to what its rows alone
// build (the default "" first, then each distinct value in the order rows
// added it) through appends, failed rows taken back and resets, while its
// dictionary grows past lcLinear (where it starts keeping a map) and
// shrinks below it again.
func TestLowCardinalityDictionary(t *testing.T) {
	l := newLCStrCol(chtype.Parse("String"))
	st := &State{b: &Block{}}
	var rows []string
	r := rand.New(rand.NewPCG(3, 4))
	for step := 0; step < 20000; step++ {
		switch op := r.IntN(100); {
		case op < 2:
			l.reset()
			rows = rows[:0]
		case op < 12:
			n := r.IntN(len(rows) + 1)
			l.truncate(n)
			rows = rows[:n]
		default:
			v := ""
			if k := r.IntN(4 * lcLinear); k > 0 {
				v = strings.Repeat("v", k%5) + strconv.Itoa(k)
			}
			if err := l.add(st, &Value{Kind: String, Bytes: []byte(v)}); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, v)
		}
		dict, keys := []string{""}, make([]int, 0, len(rows))
		for _, v := range rows {
			k := -1
			for i := 1; i < len(dict); i++ {
				if dict[i] == v {
					k = i
				}
			}
			if k < 0 {
				k = len(dict)
				dict = append(dict, v)
			}
			keys = append(keys, k)
		}
		got := make([]string, len(l.dict.Pos))
		for i := range got {
			got[i] = l.dict.Row(i)
		}
		if strings.Join(got, ",") != strings.Join(dict, ",") || fmt.Sprint(l.keys) != fmt.Sprint(keys) {
			t.Fatalf("step %d: dict %q keys %v, want %q %v", step, got, l.keys, dict, keys)
		}
		if n := len(l.pos); n != 0 && n != len(dict)-1 || n == 0 && len(dict)-1 > lcLinear {
			t.Fatalf("step %d: map of %d values for a dictionary of %d", step, n, len(dict)-1)
		}
	}
}

package pgcdc

import (
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

var (
	pgSide    = side{}
	chString_ = side{clickhouse: true, chType: "Nullable(String)"}
	chInt64   = side{clickhouse: true, chType: "Nullable(Int64)"}
)

// Values that are the same value however each database prints them
// compare equal; values that differ do not; text that is not a value of
// its kind never equals anything.
func TestCanonEqualities(t *testing.T) {
	cases := []struct {
		kind   Kind
		a      string
		as     side
		b      string
		bs     side
		equal  bool
		reason string
	}{
		{KNumeric, "1.5000", pgSide, "1.5", chString_, true, "trailing zeros"},
		{KNumeric, "-0.00000000000000000001", pgSide, "-0.00000000000000000001", chString_, true, "20 places"},
		{KNumeric, "530489685254991576216398.582572882055", pgSide, "530489685254991576216398.58257288205", chString_, false, "last digit"},
		{KNumeric, "1.5", pgSide, "1.5e0", chString_, false, "exponent is not numeric text"},
		{KDecimal, "-12.30", pgSide, "-12.3", chString_, true, "Decimal(12,2) text"},
		{KFloat64, "NaN", pgSide, "nan", chString_, true, "NaN = NaN"},
		{KFloat64, "Infinity", pgSide, "inf", chString_, true, "+Inf"},
		{KFloat64, "-Infinity", pgSide, "-inf", chString_, true, "-Inf"},
		{KFloat64, "-Infinity", pgSide, "inf", chString_, false, "signs"},
		{KFloat64, "-0", pgSide, "0", chString_, true, "-0 = 0"},
		{KFloat64, "0.1", pgSide, "0.1", chString_, true, "shortest text"},
		{KFloat64, "0.1", pgSide, "0.10000000000000002", chString_, false, "one ulp apart"},
		{KFloat32, "-3588.417", pgSide, "-3588.417", chString_, true, "float32"},
		{KFloat32, "3.4028235e+38", pgSide, "3.4028235e38", chString_, true, "max float32"},
		{KBool, "true", pgSide, "1", chString_, true, "UInt8 1"},
		{KBool, "false", pgSide, "false", chString_, true, "Bool"},
		{KBool, "false", pgSide, "1", chString_, false, "flipped"},
		{KDate, "1969-12-31", pgSide, "1969-12-31", chString_, true, "before 1970"},
		{KDate, "1969-12-31", pgSide, "1970-01-01", chString_, false, "a day apart"},
		{KTimestamp, "1969-07-20 20:17:40.5", pgSide, "1969-07-20 20:17:40.500000", chString_, true, "DateTime64 text"},
		{KTimestamp, "2277-10-05 06:07:20.099788", pgSide, "2277-10-05T06:07:20.099788Z", chString_, true, "RFC 3339"},
		{KTimestamp, "2277-10-05 06:07:20.099788", pgSide, "2277-10-05 06:07:20.099", chString_, false, "µs lost"},
		{KTimestampTZ, "2024-05-17 10:34:56.789+00", pgSide, "2024-05-17T12:34:56.789+02:00", chString_, true, "same instant"},
		{KTimestampTZ, "1900-01-02 00:00:00+00", pgSide, "1900-01-02 00:00:00.000000", chString_, true, "DateTime64('UTC')"},
		{KTime, "24:00:00", pgSide, "86400000000", chInt64, true, "24:00 as µs"},
		{KTime, "24:00:00", pgSide, "24:00:00", chString_, true, "24:00 as text"},
		{KTime, "24:00:00", pgSide, "00:00:00", chString_, false, "24:00 is not 00:00"},
		{KTime, "24:00:00", pgSide, "0", chInt64, false, "24:00 is not 0 µs"},
		{KTime, "18:30:30.505629", pgSide, "18:30:30.505629", chString_, true, "µs"},
		{KTime, "18:30:30.5", pgSide, "66630500000", chInt64, true, "µs since midnight"},
		{KTime, "18:30:30", pgSide, "66630000000", chString_, false, "digits are not a time in a String column"},
		{KUUID, "d93eb698-bfd1-47c7-9b93-f22b0cf6b50d", pgSide, "D93EB698-BFD1-47C7-9B93-F22B0CF6B50D", chString_, true, "case"},
		{KJSON, `{"b": 1, "a": [1.50, null, "x\n"]}`, pgSide, `{"a":[1.5,null,"x\n"],"b":1}`, chString_, true, "keys and numbers"},
		{KJSON, `{"a": 1}`, pgSide, `{"a": "1"}`, chString_, false, "number vs string"},
		{KJSON, `{"a": 1}`, pgSide, `__debezium_unavailable_value`, chString_, false, "placeholder"},
		{KBytes, "00ff10", pgSide, "\x00\xff\x10", chString_, true, "bytes"},
		{KBytes, "00ff10", pgSide, "AP8Q", chString_, false, "base64 text is not the bytes"},
		{KEnum, "it's fine", pgSide, "it's fine", chString_, true, "quote"},
		{KText, "a\tb", pgSide, "a\\tb", chString_, false, "escape kept as text"},
	}
	for _, c := range cases {
		a, b := canon(c.kind, c.as, c.a), canon(c.kind, c.bs, c.b)
		if (a == b) != c.equal {
			t.Errorf("%s %q vs %q (%s): canon %q vs %q, equal %v; want %v", c.kind, c.a, c.b, c.reason, a, b, a == b, c.equal)
		}
	}
}

func TestCanonInvalidNeverEqual(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		raw  string
	}{
		{KInt32, "1.0"}, {KNumeric, "abc"}, {KFloat64, ""}, {KBool, "yes"}, {KDate, "2024-5-17"},
		{KTimestamp, "yesterday"}, {KTime, "25:00:00"}, {KTime, "24:00:01"}, {KUUID, "d93eb698bfd147c79b93f22b0cf6b50d"},
		{KJSON, `{"a":1} x`}, {KEnum, "angry"},
	} {
		got := canon(c.kind, chString_, c.raw)
		if !strings.HasPrefix(got, "\x00invalid: ") {
			t.Errorf("%s %q: canon %q; want the invalid marker", c.kind, c.raw, got)
		}
	}
}

func TestCanonArrays(t *testing.T) {
	pg, err := pgArrayElements(`[null,308,-614]`)
	if err != nil {
		t.Fatal(err)
	}
	ch := []*string{nil, ptr("308"), ptr("-614")}
	if a, b := canonArray(KInt32, pgSide, pg), canonArray(KInt32, chString_, ch); a != b {
		t.Errorf("int arrays: %q vs %q", a, b)
	}
	if a, b := canonArray(KInt32, pgSide, pg), canonArray(KInt32, chString_, []*string{ptr("0"), ptr("308"), ptr("-614")}); a == b {
		t.Errorf("NULL element equals 0: %q", a)
	}
	txt, err := pgArrayElements(`["NULL",null,"a\"b\\c\n"]`)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := canonArray(KText, pgSide, txt), canonArray(KText, chString_, []*string{ptr("NULL"), nil, ptr("a\"b\\c\n")}); a != b {
		t.Errorf("text arrays: %q vs %q", a, b)
	}
	if a, b := canonArray(KText, pgSide, txt), canonArray(KText, chString_, []*string{ptr("NULL"), ptr("NULL"), ptr("a\"b\\c\n")}); a == b {
		t.Errorf("a NULL element equals the text NULL: %q", a)
	}
}

// Two workloads of the same seed write the same statements; another seed
// writes others.
func TestWorkloadIsSeeded(t *testing.T) {
	run := func(seed uint64) string {
		w := New(Config{Seed: seed})
		var b strings.Builder
		for _, s := range w.st {
			b.WriteString(w.insert(s, s.fresh()) + "\n")
		}
		for range 200 {
			b.WriteString(strings.Join(w.ops(), "\n") + "\n")
		}
		return b.String()
	}
	if run(7) != run(7) {
		t.Fatal("the same seed wrote different statements")
	}
	if run(7) == run(8) {
		t.Fatal("two seeds wrote the same statements")
	}
}

// Every mirror column type is one both servers have, per dialect.
func TestMirrorTypes(t *testing.T) {
	for _, tb := range Tables() {
		for _, c := range append(tb.Columns, func() []Column {
			if tb.Added != nil {
				return []Column{*tb.Added}
			}
			return nil
		}()...) {
			old, modern := c.CHType(Dialect{}), c.CHType(Dialect{Modern: true})
			for _, mod := range []string{"DateTime64", "Date32", "Bool"} {
				if strings.Contains(old, mod) {
					t.Errorf("%s.%s: %s on 18.16, which has no %s", tb.Name, c.Name, old, mod)
				}
			}
			if c.Nullable && !strings.HasPrefix(modern, "Nullable(") {
				t.Errorf("%s.%s: nullable in PostgreSQL, %s in ClickHouse", tb.Name, c.Name, modern)
			}
		}
	}
}

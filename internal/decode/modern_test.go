package decode

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/column"
)

func TestModernConversions(t *testing.T) {
	f := func(colType, json string, want any) {
		t.Helper()
		data, err := decodeOne(t, colType, json)
		if err != nil {
			t.Errorf("%s from %s: %v", colType, json, err)
			return
		}
		if got := firstRow(colType, data); !reflect.DeepEqual(got, want) {
			t.Errorf("%s from %s = %#v, want %#v", colType, json, got, want)
		}
	}
	// Wide integers: exact, from numbers and numeric strings, full range.
	f("Int128", `"-170141183460469231731687303715884105728"`, "-170141183460469231731687303715884105728")
	f("Int128", `170141183460469231731687303715884105727`, "170141183460469231731687303715884105727")
	f("Int128", `1e20`, "100000000000000000000")
	f("Int128", `-1`, "-1")
	f("Int128", ``, "0")
	f("Int128", `true`, "1")
	f("UInt128", `"340282366920938463463374607431768211455"`, "340282366920938463463374607431768211455")
	f("Int256", `"-57896044618658097711785492504343953926634992332820282019728792003956564819968"`, "-57896044618658097711785492504343953926634992332820282019728792003956564819968")
	f("Int256", `"57896044618658097711785492504343953926634992332820282019728792003956564819967"`, "57896044618658097711785492504343953926634992332820282019728792003956564819967")
	f("UInt256", `"115792089237316195423570985008687907853269984665640564039457584007913129639935"`, "115792089237316195423570985008687907853269984665640564039457584007913129639935")
	f("Nullable(Int128)", `null`, nil)
	f("Nullable(UInt256)", `"5"`, "5")

	// Tuples: named from an object (by name) or an array (by position), unnamed from an array.
	f("Tuple(a UInt8, b String)", `{"b":"x","a":1}`, []any{uint8(1), "x"})
	f("Tuple(a UInt8, b String)", `{"a":1}`, []any{uint8(1), ""})
	f("Tuple(a UInt8, b String)", `[2,"y"]`, []any{uint8(2), "y"})
	f("Tuple(a UInt8, b String)", `null`, []any{uint8(0), ""})
	f("Tuple(UInt8, Nullable(String))", `[3,null]`, []any{uint8(3), nil})
	f("Tuple(a Tuple(b Int8), c Array(UInt8))", `{"a":{"b":-1},"c":[1]}`, []any{[]any{int8(-1)}, []any{uint8(1)}})

	// Nested (unflattened): an array of objects.
	f("Nested(a UInt8, b String)", `[{"a":1,"b":"x"},{"a":2}]`, []any{[]any{uint8(1), "x"}, []any{uint8(2), ""}})

	// Dynamic: the type follows the JSON value.
	f("Dynamic", `-5`, [2]any{"Int64", int64(-5)})
	f("Dynamic", `18446744073709551615`, [2]any{"UInt64", uint64(18446744073709551615)})
	f("Dynamic", `123456789012345678901234567890`, [2]any{"String", "123456789012345678901234567890"})
	f("Dynamic", `1.5`, [2]any{"Float64", 1.5})
	f("Dynamic", `1e3`, [2]any{"Float64", 1000.0})
	f("Dynamic", `"x"`, [2]any{"String", "x"})
	f("Dynamic", `true`, [2]any{"Bool", true})
	f("Dynamic", `{"a": [1, 2]}`, [2]any{"String", `{"a":[1,2]}`})
	f("Dynamic", `[1]`, [2]any{"String", `[1]`})
	f("Dynamic", `null`, nil)
	f("Dynamic", ``, nil)

	// Variant: a value tries the alternatives of its own kind first.
	f("Variant(String, UInt64)", `"42"`, [2]any{"String", "42"})
	f("Variant(String, UInt64)", `42`, [2]any{"UInt64", uint64(42)})
	f("Variant(UInt64, UUID)", `"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`, [2]any{"UUID", mustUUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")})
	f("Variant(Int8, Int64)", `1000`, [2]any{"Int64", int64(1000)})
	f("Variant(Bool, String)", `false`, [2]any{"Bool", false})
	f("Variant(Array(UInt8), String)", `[1, 2]`, [2]any{"Array(UInt8)", []uint8{1, 2}})
	f("Variant(String, UInt64)", `null`, nil)

	// JSON: the object's compact text; typed paths rewritten as canonical literals.
	f("JSON", `{"a": 1, "b": {"c": [1, "x"]}}`, `{"a":1,"b":{"c":[1,"x"]}}`)
	f("JSON", `"{\"a\": 1}"`, `{"a":1}`)
	f("JSON", `null`, `{}`)
	f("JSON", ``, `{}`)
	f("JSON(a UInt32)", `{"a": "42", "b": "42"}`, `{"a":42,"b":"42"}`)
	f("JSON(a.b DateTime64(3))", `{"a": {"b": 1715949296789, "c": 1}}`, `{"a":{"b":"2024-05-17T12:34:56.789Z","c":1}}`)
	f("JSON(a.b DateTime64(3))", `{"a.b": "2024-05-17 14:34:56+02:00"}`, `{"a.b":"2024-05-17T12:34:56Z"}`)
	f("JSON(t DateTime64(3, 'Asia/Tokyo'))", `{"t": "2024-05-17 21:34:56"}`, `{"t":"2024-05-17T12:34:56Z"}`)
	f("JSON(d Decimal(10, 2), e Enum8('x' = 5), f Float64, i IPv4, u UUID, s String, b Bool, dt Date)",
		`{"d": "1.5e1", "e": "x", "f": "-Inf", "i": 167772161, "u": "{6BA7B810-9DAD-11D1-80B4-00C04FD430C8}", "s": 12, "b": "1", "dt": 19860}`,
		`{"d":15,"e":5,"f":"-inf","i":"10.0.0.1","u":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","s":"12","b":true,"dt":"2024-05-17"}`)
	f("JSON(a Array(Nullable(UInt8)), n Nullable(Int64), w Int128)", `{"a": [1, null, "2"], "n": null, "w": "-1"}`, `{"a":[1,null,2],"n":null,"w":-1}`)
	f("JSON(k String)", `{"k": "q\"\\\n\u0001é"}`, `{"k":"q\"\\\n\u0001é"}`)
	// Paths may repeat across spellings that do not write the same path, and inside arrays of objects.
	f("JSON", `{"u": 1e-400, "big": 123456789012345678901234567890, "e": "\u00e9\u0000"}`, `{"u":1e-400,"big":123456789012345678901234567890,"e":"é\u0000"}`)
	f("JSON", `{"a": {"b": 1}, "a.c": 2, "x": [{"a": 1}, {"a": 2}], "y": [[{"k": 1}], {"k": {"k": 2}}]}`,
		`{"a":{"b":1},"a.c":2,"x":[{"a":1},{"a":2}],"y":[[{"k":1}],{"k":{"k":2}}]}`)
}

func TestModernBadValues(t *testing.T) {
	f := func(colType, json, reason string) {
		t.Helper()
		_, err := decodeOne(t, colType, json)
		var re *RecordError
		if !errors.As(err, &re) || re.Reason != reason {
			t.Errorf("%s from %s: got %v, want reason %q", colType, json, err, reason)
		}
	}
	f("Int128", `170141183460469231731687303715884105728`, "cannot convert 170141183460469231731687303715884105728 to Int128: out of range")
	f("Int128", `"-170141183460469231731687303715884105729"`, `cannot convert "-170141183460469231731687303715884105729" to Int128: out of range`)
	f("UInt128", `-1`, "cannot convert -1 to UInt128: out of range")
	f("UInt256", `"115792089237316195423570985008687907853269984665640564039457584007913129639936"`, `cannot convert "1157920892373161954235709850086879078532699846656405640394575840…" to UInt256: out of range`)
	f("Int256", `1.5`, "cannot convert 1.5 to Int256: not an integer")
	f("Int128", `"x"`, `cannot parse "x" as Int128`)
	f("Int128", `{}`, "cannot convert JSON object to Int128")
	f("Tuple(UInt8, String)", `{"a":1}`, "cannot convert JSON object to Tuple(UInt8, String): an unnamed tuple wants a JSON array")
	f("Tuple(UInt8, String)", `[1]`, "cannot convert JSON array to Tuple(UInt8, String): want 2 elements, got 1")
	f("Tuple(a UInt8, b String)", `{"a":300}`, "element a: cannot convert 300 to UInt8: out of range")
	f("Tuple(a UInt8, b String)", `"x"`, `cannot convert "x" to Tuple(a UInt8, b String): want a JSON object or array`)
	f("Dynamic", `1e400`, "cannot convert 1e400 to Dynamic: out of Float64's range")
	f("Variant(UInt8, Date)", `"x"`, `cannot convert "x" to Variant(UInt8, Date): no alternative accepts it`)
	f("Variant(UInt8, Bool)", `300`, `cannot convert 300 to Variant(UInt8, Bool): no alternative accepts it`)
	f("JSON", `[1]`, "cannot convert JSON array to JSON: want a JSON object")
	f("JSON", `"[1]"`, `cannot convert "[1]" to JSON: want a JSON object, or a string holding one`)
	f("JSON(a UInt8)", `{"a": 300}`, `path "a": cannot convert 300 to UInt8: out of range`)
	f("JSON(a.b DateTime64(3))", `{"a": {"b": "yesterday"}}`, `path "a.b": cannot parse "yesterday" as DateTime64(3)`)
	f("JSON(a Array(UInt8))", `{"a": [1, -1]}`, `path "a": element 1: cannot convert -1 to UInt8: out of range`)
	f("JSON", `{"a": 1, "a": 2}`, `path "a" is written twice (ClickHouse refuses such JSON)`)
	f("JSON", `{"a.b": 1, "a": {"b": 2}}`, `path "a.b" is written twice (ClickHouse refuses such JSON)`)
	f("JSON", `{"a": {"b": 1}, "a": {"c": 2}}`, `path "a" is written twice (ClickHouse refuses such JSON)`)
	f("JSON", `{"x": [{"k": 1, "k": null}]}`, `path "k" is written twice (ClickHouse refuses such JSON)`)
	f("JSON(a.b UInt8)", `{"a": {"b": 1}, "a.b": 2}`, `path "a.b" is written twice (ClickHouse refuses such JSON)`)
	f("JSON", `{"a": {"b": 1e400}}`, `path "a.b": number 1e400 is beyond Float64's range (ClickHouse refuses such JSON)`)
	f("JSON", `{"a": [1, -2e308]}`, `path "a": number -2e308 is beyond Float64's range (ClickHouse refuses such JSON)`)
	f("JSON", "{\"a\": \"x\xffy\"}", `path "a": string is not valid UTF-8 (ClickHouse refuses such JSON)`)
	f("JSON", "{\"k\xfe\": 1}", `key "k\xfe" is not valid UTF-8 (ClickHouse refuses such JSON)`)
	f("JSON(s String)", "{\"s\": \"\xff\"}", `path "s": cannot convert "\xff" to String: not valid UTF-8 (ClickHouse's JSON type refuses it)`)
	f("Nested(a UInt8)", `[{"a": 1}, {"a": "x"}]`, `element 1: element a: cannot parse "x" as UInt8`)
}

// TestNestedSpellings fills a flattened Nested (columns n.a and n.b) from
// its three JSON spellings.
func TestNestedSpellings(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "n.a", Type: "Array(UInt8)"}, {Name: "n.b", Type: "Array(String)"}}
	p, err := Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for _, v := range []string{
		`{"n.a": [1, 2], "n.b": ["x", "y"]}`,
		`{"n": [{"a": 3, "b": "z"}, {"a": 4}]}`,
		`{"n": {"a": [5], "b": ["w"]}}`,
		`{}`,
	} {
		if err := p.Append(blk, &kgo.Record{Value: []byte(v)}); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
	want := []any{
		[][]uint8{{1, 2}, {3, 4}, {5}, {}},
		[][]string{{"x", "y"}, {"z", ""}, {"w"}, {}},
	}
	for i := range want {
		if got := blk.ColumnData(i); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("column %d = %#v, want %#v", i, got, want[i])
		}
	}
	err = p.Append(blk, &kgo.Record{Value: []byte(`{"n": [1]}`)})
	if err == nil || !strings.Contains(err.Error(), `element 0: want a JSON object with field "a"`) {
		t.Errorf("array of numbers: %v", err)
	}
}

func TestEnumNamesTheDriverCannotRead(t *testing.T) {
	_, err := Compile("json", []chschema.ColumnSchema{{Name: "e", Type: `Enum8('it\'s' = 1, 'b' = 2)`}}, nil)
	if err == nil || strings.Contains(err.Error(), "\n") ||
		!strings.HasPrefix(err.Error(), `column "e" has type Enum8('it\'s' = 1, 'b' = 2): clickhouse-go cannot parse this type`) {
		t.Fatalf("got %v", err)
	}
	// One escaped name alone is read right, and so are names with commas and '='.
	for _, typ := range []string{`Enum8('it\'s' = 1)`, `Enum8('a, b = c' = 1, 'd' = 2)`} {
		if _, err := Compile("json", []chschema.ColumnSchema{{Name: "e", Type: typ}}, nil); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// modernFuzzTypes are the column types FuzzModernConvert feeds.
var modernFuzzTypes = []string{
	"Int128", "UInt256", "Tuple(a UInt8, b Nullable(String))", "Tuple(Int64, Array(UInt8))", "Nested(a UInt32, b String)",
	"Dynamic", "Variant(String, UInt64, Array(UInt8), DateTime64(3))", "JSON",
	"JSON(a UInt32, b.t DateTime64(3, 'Asia/Tokyo'), b.u UUID, c Array(Nullable(Decimal(20, 3))), d Enum8('x' = 1), e String, f Float32, g IPv6, h Int256)",
}

// FuzzModernConvert: no JSON value makes the new column types panic, a
// failed value leaves the block unchanged, and a JSON column always holds
// one valid JSON object.
func FuzzModernConvert(f *testing.F) {
	for _, v := range []string{
		`1`, `-1e3`, `"170141183460469231731687303715884105727"`, `[1, "x"]`, `{"a": 1, "b": "x"}`, `null`, `true`,
		`[{"a": 1, "b": "x"}]`, `{"a": "42", "b": {"t": 1715949296789, "u": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}}`,
		`{"c": ["1.5", null], "d": "x", "e": {"k": [1]}, "f": "NaN", "g": "::1", "h": "-5"}`, `"{\"a\": 1}"`, `1.5`,
	} {
		f.Add(v)
	}
	plans := make([]*Plan, len(modernFuzzTypes))
	for i, typ := range modernFuzzTypes {
		p, err := Compile("json", []chschema.ColumnSchema{{Name: "c", Type: typ}}, nil)
		if err != nil {
			f.Fatal(err)
		}
		plans[i] = p
	}
	f.Fuzz(func(t *testing.T, value string) {
		for i, p := range plans {
			blk := p.NewBlock()
			err := p.Append(blk, &kgo.Record{Value: []byte(`{"c":` + value + `}`)})
			if err != nil {
				noPanic(t, err)
				if blk.Rows() != 0 || blk.Bytes() != 0 {
					t.Fatalf("%s: failed Append left %d rows", modernFuzzTypes[i], blk.Rows())
				}
				continue
			}
			data := blk.ColumnData(0)
			if s, ok := data.([]string); ok { // JSON
				v, err := fastjson.Parse(s[0])
				if err != nil || v.Type() != fastjson.TypeObject {
					t.Fatalf("%s from %s: stored %q, not a JSON object (%v)", modernFuzzTypes[i], value, s[0], err)
				}
			}
		}
	})
}

func mustUUID(s string) any {
	data, err := column.ConvertJSON(chtype.Parse("UUID"), fastjson.MustParse(strconv.Quote(s)))
	if err != nil {
		panic(err)
	}
	return data
}

// TestArrayOfTupleParts fills Array(Tuple(T, U)) as ClickHouse 18.16 lists
// it (columns a.1 and a.2) from the tuples written as JSON arrays.
func TestArrayOfTupleParts(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "a.1", Type: "Array(UInt8)"}, {Name: "a.2", Type: "Array(String)"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	if err := p.Append(blk, &kgo.Record{Value: []byte(`{"a": [[1, "x"], [2, "y"]]}`)}); err != nil {
		t.Fatal(err)
	}
	if got := blk.ColumnData(0); !reflect.DeepEqual(got, [][]uint8{{1, 2}}) {
		t.Errorf("a.1 = %v", got)
	}
	if got := blk.ColumnData(1); !reflect.DeepEqual(got, [][]string{{"x", "y"}}) {
		t.Errorf("a.2 = %v", got)
	}
}

// The newer types append without allocating too (their clickhouse-go
// values are made once per insert, in ColumnData).
func TestZeroAllocsPerRecordModern(t *testing.T) {
	for _, c := range []struct{ typ, value string }{
		{"JSON", `{"a": {"b": [1, {"c": "x"}]}, "d": "e"}`},
		{"JSON(a.b UInt32, t DateTime64(3), s String)", `{"a": {"b": "7"}, "t": 1715949296789, "s": "x", "z": [1]}`},
		{"JSON", `"{\"a\": 1}"`},
		{"Dynamic", `"x"`},
		{"Dynamic", `1.5`},
		{"Variant(String, UInt64, Array(UInt8))", `[1, 2]`},
		{"Tuple(a UInt32, b String, c Nullable(Int8))", `{"a": 1, "b": "x"}`},
		{"Nested(a UInt32, b String)", `[{"a": 1, "b": "x"}]`},
		{"Int256", `"-57896044618658097711785492504343953926634992332820282019728792003956564819968"`},
	} {
		p, err := Compile("json", []chschema.ColumnSchema{{Name: "c", Type: c.typ}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		blk := p.NewBlock()
		rec := &kgo.Record{Value: []byte(`{"c":` + c.value + `}`)}
		next := func() {
			if blk.Rows() == 5000 {
				blk.Reset()
			}
			if err := p.Append(blk, rec); err != nil {
				t.Fatal(err)
			}
		}
		for j := 0; j < 6000; j++ {
			next()
		}
		if allocs := testing.AllocsPerRun(2000, next); allocs > 0.1 {
			t.Errorf("%s: %.2f allocations per record", c.typ, allocs)
		}
	}
}

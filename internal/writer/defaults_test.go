package writer

import (
	"math"
	"math/big"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

func TestExprFunctions(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"7", nil},
		{"CAST(7, 'Int32')", []string{"CAST"}},
		{"toDate('2020-01-02')", []string{"toDate"}},
		{"now()", []string{"now"}},
		{"id * 2", nil},
		{"concat('now()', `rand(`, \"x(\", lower (s))", []string{"concat", "lower"}},
		{"'it''s rand()' || toString(1e3)", []string{"toString"}},
		{"'a\\'b now()'", nil},
		{"plus(plus(1, 2), dictGet('d', 'v', toUInt64(1)))", []string{"plus", "dictGet", "toUInt64"}},
		{"arrayMap(x -> x + 1, [1, 2])", []string{"arrayMap"}},
		{"0x1F", nil},
	}
	for _, tt := range tests {
		if got := exprFunctions(tt.expr); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("exprFunctions(%q) = %q; want %q", tt.expr, got, tt.want)
		}
	}
}

func TestBuiltinVolatile(t *testing.T) {
	for f, want := range map[string]bool{
		"now": true, "NOW": true, "now64": true, "today": true, "rand": true, "rand64": true, "randConstant": true,
		"generateUUIDv4": true, "dictGetString": true, "joinGet": true, "hostName": true, "rowNumberInBlock": true,
		"toDate": false, "plus": false, "CAST": false, "concat": false, "toString": false, "lower": false, "nowhere": true,
		"arrayMap": false, "notEquals": false,
	} {
		if got := builtinVolatile(f); got != want {
			t.Errorf("builtinVolatile(%q) = %v; want %v", f, got, want)
		}
	}
}

func TestDefaultJSON(t *testing.T) {
	i32 := int32(5)
	var nilInt *int32
	at := time.Date(2021, 2, 3, 4, 5, 6, 789000000, time.FixedZone("x", 3600))
	tests := []struct {
		v    any
		typ  string
		want string
	}{
		{int32(7), "Int32", "7"},
		{int8(-3), "Int8", "-3"},
		{uint64(math.MaxUint64), "UInt64", "18446744073709551615"},
		{*big.NewInt(-12), "Int128", "-12"},
		{big.NewInt(12), "UInt256", "12"},
		{1.5, "Float64", "1.5"},
		{float32(0.1), "Float32", "0.1"},
		{math.NaN(), "Float64", `"NaN"`},
		{math.Inf(-1), "Float64", `"-Infinity"`},
		{decimal.RequireFromString("1.50"), "Decimal(10, 2)", "1.5"},
		{"a\"b\\c\n\x00\xff", "String", `"a\"b\\c\u000a\u0000` + "\xff" + `"`},
		{"b", "Enum8('a' = 1, 'b' = 2)", `"b"`},
		{true, "Bool", "true"},
		{at, "Date", `"2021-02-03"`},
		{at, "DateTime('Asia/Tokyo')", `"2021-02-03T03:05:06.789Z"`},
		{at, "Nullable(DateTime64(3))", `"2021-02-03T03:05:06.789Z"`},
		{uuid.MustParse("61f0c404-5cb3-11e7-907b-a6006ad3dba0"), "UUID", `"61f0c404-5cb3-11e7-907b-a6006ad3dba0"`},
		{net.ParseIP("1.2.3.4"), "IPv4", `"1.2.3.4"`},
		{&i32, "Nullable(Int32)", "5"},
		{nilInt, "Nullable(Int32)", "null"},
		{[]int32{1, 2}, "Array(Int32)", "[1,2]"},
		{[]time.Time{at}, "Array(Nullable(Date))", `["2021-02-03"]`},
		{[][]string{{"x"}, {}}, "Array(Array(LowCardinality(String)))", `[["x"],[]]`},
		{[]*int32{&i32, nil}, "Array(Nullable(Int32))", "[5,null]"},
	}
	for _, tt := range tests {
		got, err := DefaultJSON(tt.v, tt.typ)
		if err != nil || got != tt.want {
			t.Errorf("DefaultJSON(%v, %s) = %s, %v; want %s", tt.v, tt.typ, got, err, tt.want)
		}
	}
	if got, err := DefaultJSON(map[string]int{"a": 1}, "Map(String, Int32)"); err == nil {
		t.Errorf("DefaultJSON of a map = %s; want an error", got)
	}
}

func TestUnreadableType(t *testing.T) {
	for typ, want := range map[string]string{
		"Int32": "", "Nullable(String)": "", "Array(LowCardinality(String))": "", "DateTime64(3, 'UTC')": "",
		"Map(String, Int32)": "Map", "Array(Tuple(a Int32))": "Tuple", "JSON": "JSON", "Nullable(Time)": "Time",
		"AggregateFunction(sum, UInt64)": "AggregateFunction", "Variant(Int32, String)": "Variant",
	} {
		if got, _ := unreadableType(typ); got != want {
			t.Errorf("unreadableType(%s) = %q; want %q", typ, got, want)
		}
	}
}

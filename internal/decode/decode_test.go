package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/chcol"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/errtext"
)

// decodeOne decodes {"c": json} (or {} when json is "") into a one-column
// table of colType and returns the column's data.
func decodeOne(t *testing.T, colType, json string) (any, error) {
	t.Helper()
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "c", Type: colType}}, nil)
	if err != nil {
		t.Fatalf("Compile(%s): %v", colType, err)
	}
	value := `{"c":` + json + `}`
	if json == "" {
		value = `{}`
	}
	blk := p.NewBlock()
	if err := p.Append(blk, &kgo.Record{Topic: "t", Partition: 3, Offset: 42, Value: []byte(value)}); err != nil {
		if blk.Rows() != 0 || blk.Bytes() != 0 {
			t.Fatalf("%s %s: failed Append left rows=%d bytes=%d", colType, json, blk.Rows(), blk.Bytes())
		}
		return nil, err
	}
	if blk.Rows() != 1 {
		t.Fatalf("Rows() = %d, want 1", blk.Rows())
	}
	return blk.ColumnData(0), nil
}

// norm turns one element of ColumnData into a comparable, readable value:
// NULL -> nil, Decimal -> its string, Date -> "2006-01-02", DateTime ->
// "2006-01-02 15:04:05" UTC, DateTime64 -> RFC 3339 UTC, UUID and IPs -> their
// strings, Array -> []any, Map -> [][2]any.
func norm(t *chtype.Type, v any) any {
	nullable := false
	for t.Kind == chtype.Nullable || t.Kind == chtype.LowCardinality {
		nullable = nullable || t.Kind == chtype.Nullable
		t = t.Elem
	}
	if nullable {
		rv := reflect.ValueOf(v)
		if rv.IsNil() {
			return nil
		}
		v = rv.Elem().Interface()
	}
	switch t.Kind {
	case chtype.Array:
		s := reflect.ValueOf(v)
		out := []any{}
		for i := 0; i < s.Len(); i++ {
			out = append(out, norm(t.Elem, s.Index(i).Interface()))
		}
		return out
	case chtype.Map:
		r := v.(*chschema.MapRow)
		out := [][2]any{}
		for i := 0; i < r.Len(); i++ {
			k, val := r.Entry(i)
			out = append(out, [2]any{norm(t.Key, k), norm(t.Elem, val)})
		}
		return out
	case chtype.Decimal:
		return v.(decimal.Decimal).String()
	case chtype.Date, chtype.Date32:
		d := v.(time.Time)
		if d.Location() != time.UTC || d.Hour() != 0 || d.Minute() != 0 || d.Second() != 0 || d.Nanosecond() != 0 {
			return "not UTC midnight: " + d.String()
		}
		return d.Format("2006-01-02")
	case chtype.DateTime:
		return time.Unix(v.(int64), 0).UTC().Format("2006-01-02 15:04:05")
	case chtype.DateTime64:
		return v.(time.Time).Format(time.RFC3339Nano)
	case chtype.UUID:
		return v.(uuid.UUID).String()
	case chtype.IPv4:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], v.(uint32))
		return netip.AddrFrom4(b).String()
	case chtype.IPv6:
		return netip.AddrFrom16(v.([16]byte)).String()
	case chtype.Int128, chtype.Int256, chtype.UInt128, chtype.UInt256:
		b := v.(big.Int)
		return b.String()
	case chtype.Tuple:
		row := v.([]any)
		out := []any{}
		for i, e := range t.Elems {
			out = append(out, norm(e, row[i]))
		}
		return out
	case chtype.Dynamic, chtype.Variant:
		d := v.(chcol.Variant)
		if d.Nil() {
			return nil
		}
		return [2]any{d.Type(), d.Any()}
	}
	return v
}

func firstRow(colType string, data any) any {
	return norm(chtype.Parse(colType), reflect.ValueOf(data).Index(0).Interface())
}

func TestConversions(t *testing.T) {
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

	// Integers: numbers, numeric strings, integral fractions/exponents, bools; missing and null are 0.
	f("Int8", "-128", int8(-128))
	f("Int8", "127", int8(127))
	f("Int16", `"-300"`, int16(-300))
	f("Int16", `"+300"`, int16(300))
	f("Int32", "1e3", int32(1000))
	f("Int32", "2.000", int32(2))
	f("Int32", "-0", int32(0))
	f("Int64", "-9223372036854775808", int64(math.MinInt64))
	f("Int64", "9223372036854775807", int64(math.MaxInt64))
	f("Int64", "true", int64(1))
	f("Int64", "false", int64(0))
	f("Int64", "null", int64(0))
	f("Int64", "", int64(0))
	f("UInt8", "255", uint8(255))
	f("UInt8", "-0", uint8(0))
	f("UInt16", "65535", uint16(65535))
	f("UInt32", "4294967295", uint32(math.MaxUint32))
	f("UInt64", "18446744073709551615", uint64(math.MaxUint64))
	f("UInt64", `"42"`, uint64(42))
	f("UInt64", "1.8446744073709551615e19", uint64(math.MaxUint64))
	f("UInt64", "007", uint64(7))

	// Floats: numbers, numeric strings, NaN/Inf strings; underflow is 0.
	f("Float64", "1.5", 1.5)
	f("Float64", `"2.5e3"`, 2500.0)
	f("Float64", "-12", -12.0)
	f("Float64", `"-Inf"`, math.Inf(-1))
	f("Float64", `"infinity"`, math.Inf(1))
	f("Float64", "1e-400", 0.0)
	f("Float64", "", 0.0)
	f("Float32", "3.25", float32(3.25))
	f("Float32", `"0.1"`, float32(0.1))

	// Decimals: exact, trailing zeros beyond the scale are fine.
	f("Decimal(18, 4)", "12.3456", "12.3456")
	f("Decimal(18, 4)", `"12.34"`, "12.34")
	f("Decimal(18, 4)", "-0.0001", "-0.0001")
	f("Decimal(18, 4)", "12.34560000", "12.3456")
	f("Decimal(18, 4)", "1e3", "1000")
	f("Decimal(18, 4)", "1.5E-2", "0.015")
	f("Decimal(18, 4)", "99999999999999.9999", "99999999999999.9999")
	f("Decimal(18, 4)", "-99999999999999.9999", "-99999999999999.9999")
	f("Decimal(18, 4)", "0", "0")
	f("Decimal(18, 4)", "", "0")
	f("Decimal(18, 0)", "123456789012345678", "123456789012345678")
	f("Decimal(9, 2)", `"-1234567.89"`, "-1234567.89")
	f("Decimal32(2)", "1.25", "1.25")
	f("Decimal64(3)", "1.5", "1.5")
	f("Decimal(38, 10)", "1234567890123456789012345678.0123456789", "1234567890123456789012345678.0123456789")
	f("Decimal128(2)", "-0.5", "-0.5")
	f("Decimal(76, 0)", "1e75", "1"+strings.Repeat("0", 75))

	// Strings: as is; other JSON values as their JSON text.
	f("String", `"héllo"`, "héllo")
	f("String", `"a\"b\\n\u00e9\n"`, "a\"b\\né\n")
	f("String", "42", "42")
	f("String", "1.50", "1.50")
	f("String", "-1e3", "-1e3")
	f("String", "true", "true")
	f("String", "false", "false")
	f("String", `{"a":1, "b":[1, 2], "c":{"d":"x"}}`, `{"a":1,"b":[1,2],"c":{"d":"x"}}`)
	f("String", `[1, "x", null]`, `[1,"x",null]`)
	f("String", "null", "")
	f("String", "", "")
	f("FixedString(4)", `"ab"`, "ab\x00\x00")
	f("FixedString(2)", `"ab"`, "ab")
	f("FixedString(3)", "", "\x00\x00\x00")
	f("FixedString(3)", "12", "12\x00")

	// Date: YYYY-MM-DD, the date part of a date-time as written, day numbers, unix timestamps.
	f("Date", `"2024-05-17"`, "2024-05-17")
	f("Date", `"2024-05-17T23:30:00+02:00"`, "2024-05-17")
	f("Date", `"2024-05-17 23:30:00"`, "2024-05-17")
	f("Date", "19860", "2024-05-17")
	f("Date", `"19860"`, "2024-05-17")
	f("Date", "0", "1970-01-01")
	f("Date", "65535", "2149-06-06")
	f("Date", "1715949296", "2024-05-17")
	f("Date", "1715949296789", "2024-05-17")
	f("Date", `"2024-02-29"`, "2024-02-29")
	f("Date", "", "1970-01-01")
	f("Date", "null", "1970-01-01")
	f("Date32", `"1960-01-01"`, "1960-01-01")
	f("Date32", `"2299-12-31"`, "2299-12-31")
	f("Date32", `"1900-01-01"`, "1900-01-01")

	// DateTime: RFC 3339, "YYYY-MM-DD hh:mm:ss" in the column zone (UTC if none), unix s/ms/us/ns.
	f("DateTime", `"2024-05-17T12:34:56Z"`, "2024-05-17 12:34:56")
	f("DateTime", `"2024-05-17t12:34:56z"`, "2024-05-17 12:34:56")
	f("DateTime", `"2024-05-17 12:34:56"`, "2024-05-17 12:34:56")
	f("DateTime", `"2024-05-17T12:34:56.789+02:00"`, "2024-05-17 10:34:56")
	f("DateTime", `"2024-05-17T12:34:56-0130"`, "2024-05-17 14:04:56")
	f("DateTime", `"2024-05-17T12:34:56+05"`, "2024-05-17 07:34:56")
	f("DateTime", `"2024-05-17T12:34"`, "2024-05-17 12:34:00")
	f("DateTime", `"2024-05-17"`, "2024-05-17 00:00:00")
	f("DateTime", "1715949296", "2024-05-17 12:34:56")
	f("DateTime", `"1715949296"`, "2024-05-17 12:34:56")
	f("DateTime", "1715949296.9", "2024-05-17 12:34:56")
	f("DateTime", "1715949296789", "2024-05-17 12:34:56")
	f("DateTime", "1715949296789123", "2024-05-17 12:34:56")
	f("DateTime", "1715949296789123456", "2024-05-17 12:34:56")
	f("DateTime", "100000000000", "1973-03-03 09:46:40") // from 1e11 on, numbers are milliseconds
	f("DateTime", "0", "1970-01-01 00:00:00")
	f("DateTime", "4294967295", "2106-02-07 06:28:15")
	f("DateTime", "", "1970-01-01 00:00:00")
	f("DateTime('Europe/Moscow')", `"2024-05-17 15:34:56"`, "2024-05-17 12:34:56")
	f("DateTime('Europe/Moscow')", `"2024-05-17T12:34:56Z"`, "2024-05-17 12:34:56")
	f("DateTime('Europe/Moscow')", "1715949296", "2024-05-17 12:34:56")
	f("DateTime('UTC')", `"2024-05-17 12:34:56"`, "2024-05-17 12:34:56")
	f("DateTime('America/New_York')", `"2024-01-17 07:34:56"`, "2024-01-17 12:34:56")

	// DateTime64: same inputs, fractions kept.
	f("DateTime64(3)", `"2024-05-17T12:34:56.789Z"`, "2024-05-17T12:34:56.789Z")
	f("DateTime64(6, 'Asia/Tokyo')", `"2024-05-17 21:34:56.123456"`, "2024-05-17T12:34:56.123456Z")
	f("DateTime64(9)", `"2024-05-17T12:34:56.123456789123Z"`, "2024-05-17T12:34:56.123456789Z")
	f("DateTime64(3)", "1715949296789", "2024-05-17T12:34:56.789Z")
	f("DateTime64(3)", "1715949296.5", "2024-05-17T12:34:56.5Z")
	f("DateTime64(6)", "1715949296789123", "2024-05-17T12:34:56.789123Z")
	f("DateTime64(9)", "1715949296789123456", "2024-05-17T12:34:56.789123456Z")
	f("DateTime64(3)", `"1950-01-01 00:00:00"`, "1950-01-01T00:00:00Z")
	f("DateTime64(3)", "-1000", "1969-12-31T23:43:20Z")
	f("DateTime64(3)", "-1.5", "1969-12-31T23:59:58.5Z")
	f("DateTime64(3)", "", "1970-01-01T00:00:00Z")

	// UUID, Enum, Bool, IPs.
	f("UUID", `"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`, "6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	f("UUID", `"6BA7B810-9DAD-11D1-80B4-00C04FD430C8"`, "6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	f("UUID", "", "00000000-0000-0000-0000-000000000000")
	f("Enum8('a' = 1, 'b' = 2)", `"b"`, int8(2))
	f("Enum8('a' = 1, 'b' = 2)", "1", int8(1))
	f("Enum8('a' = 1, 'b' = 2)", `"2"`, int8(2))
	f("Enum8('a' = 1, 'b' = 2)", "", int8(1))
	f("Enum8('x' = 7, 'y' = -5)", "null", int8(-5))
	f("Enum8('a,b' = 1, 'c=d' = 2)", `"c=d"`, int8(2))
	f(`Enum16('big' = 1000, 'it\'s' = -1)`, `"it's"`, int16(-1))
	f(`Enum16('big' = 1000, 'it\'s' = -1)`, `1000`, int16(1000))
	f("Bool", "true", true)
	f("Bool", "false", false)
	f("Bool", "1", true)
	f("Bool", "0", false)
	f("Bool", `"TRUE"`, true)
	f("Bool", `"0"`, false)
	f("Bool", "", false)
	f("IPv4", `"10.0.0.1"`, "10.0.0.1")
	f("IPv4", "167772161", "10.0.0.1")
	f("IPv4", "", "0.0.0.0")
	f("IPv6", `"2001:db8::1"`, "2001:db8::1")
	f("IPv6", `"10.0.0.1"`, "::ffff:10.0.0.1")
	f("IPv6", "", "::")

	// Nullable: null and missing are NULL; values as the inner type.
	f("Nullable(Int64)", "null", nil)
	f("Nullable(Int64)", "", nil)
	f("Nullable(Int64)", "5", int64(5))
	f("Nullable(String)", `""`, "")
	f("Nullable(String)", "null", nil)
	f("Nullable(Decimal(10, 2))", "1.5", "1.5")
	f("Nullable(Decimal(10, 2))", "null", nil)
	f("Nullable(Decimal(40, 2))", "1.5", "1.5")
	f("Nullable(DateTime)", "1715949296", "2024-05-17 12:34:56")
	f("Nullable(DateTime)", "null", nil)
	f("Nullable(Date)", `"2024-05-17"`, "2024-05-17")
	f("Nullable(UUID)", "null", nil)
	f("Nullable(Enum8('a' = 1))", `"a"`, int8(1))
	f("Nullable(FixedString(2))", `"a"`, "a\x00")
	f("Nullable(Float32)", "null", nil)
	f("LowCardinality(String)", `"x"`, "x")
	f("LowCardinality(Nullable(String))", "null", nil)
	f("LowCardinality(Nullable(String))", `"x"`, "x")
	f("LowCardinality(FixedString(2))", `"x"`, "x\x00")
	f("LowCardinality(UInt32)", "7", uint32(7))
	f("SimpleAggregateFunction(max, UInt64)", "5", uint64(5))

	// Arrays.
	f("Array(Int64)", "[1, 2, 3]", []any{int64(1), int64(2), int64(3)})
	f("Array(Int64)", "[]", []any{})
	f("Array(Int64)", "", []any{})
	f("Array(Int64)", "null", []any{})
	f("Array(String)", `["a", 1, null, {"x":1}]`, []any{"a", "1", "", `{"x":1}`})
	f("Array(Nullable(Int32))", "[1, null]", []any{int32(1), nil})
	f("Array(Nullable(String))", `[null, "x"]`, []any{nil, "x"})
	f("Array(LowCardinality(String))", `["a", "b"]`, []any{"a", "b"})
	f("Array(Array(UInt8))", "[[1], [], [2, 3]]", []any{[]any{uint8(1)}, []any{}, []any{uint8(2), uint8(3)}})
	f("Array(Array(Nullable(UInt8)))", "[[null], [2]]", []any{[]any{nil}, []any{uint8(2)}})
	f("Array(DateTime)", `["2024-05-17 12:34:56", 0]`, []any{"2024-05-17 12:34:56", "1970-01-01 00:00:00"})
	f("Array(Decimal(9, 2))", `[1.5, "2"]`, []any{"1.5", "2"})
	f("Array(Date)", `["2024-05-17"]`, []any{"2024-05-17"})
	f("Array(UUID)", `["6ba7b810-9dad-11d1-80b4-00c04fd430c8"]`, []any{"6ba7b810-9dad-11d1-80b4-00c04fd430c8"})
	f("Array(Map(String, UInt8))", `[{"a":1}, {}]`, []any{[][2]any{{"a", uint8(1)}}, [][2]any{}})

	// Maps keep JSON order; keys are converted from their text.
	f("Map(String, UInt64)", `{"a":1, "b":2}`, [][2]any{{"a", uint64(1)}, {"b", uint64(2)}})
	f("Map(String, UInt64)", `{}`, [][2]any{})
	f("Map(String, UInt64)", "", [][2]any{})
	f("Map(String, UInt64)", "null", [][2]any{})
	f("Map(String, Nullable(String))", `{"a":null, "b":"x"}`, [][2]any{{"a", nil}, {"b", "x"}})
	f("Map(String, Array(Int8))", `{"a":[1, 2]}`, [][2]any{{"a", []any{int8(1), int8(2)}}})
	f("Map(LowCardinality(String), Int64)", `{"x":-1}`, [][2]any{{"x", int64(-1)}})
	f("Map(UInt16, String)", `{"7":"x"}`, [][2]any{{uint16(7), "x"}})
	f("Map(String, DateTime)", `{"t":1715949296}`, [][2]any{{"t", "2024-05-17 12:34:56"}})
	f("Map(String, Decimal(9, 2))", `{"p":"1.25"}`, [][2]any{{"p", "1.25"}})
}

func TestBadValues(t *testing.T) {
	f := func(colType, json, reason string) {
		t.Helper()
		_, err := decodeOne(t, colType, json)
		var re *RecordError
		if !errors.As(err, &re) {
			t.Errorf("%s from %s: got %v, want RecordError %q", colType, json, err, reason)
			return
		}
		if re.Column != "c" || re.Topic != "t" || re.Partition != 3 || re.Offset != 42 || re.Reason != reason {
			t.Errorf("%s from %s:\n got %+v\nwant reason %q", colType, json, *re, reason)
		}
	}
	f("Int8", "128", "cannot convert 128 to Int8: out of range")
	f("Int8", "-129", "cannot convert -129 to Int8: out of range")
	f("Int32", "1.5", "cannot convert 1.5 to Int32: not an integer")
	f("Int32", `"1.5"`, `cannot convert "1.5" to Int32: not an integer`)
	f("Int64", "9223372036854775808", "cannot convert 9223372036854775808 to Int64: out of range")
	f("Int64", `"abc"`, `cannot parse "abc" as Int64`)
	f("Int64", `""`, `cannot parse "" as Int64`)
	f("Int64", `" 1"`, `cannot parse " 1" as Int64`)
	f("Int64", `"0x10"`, `cannot parse "0x10" as Int64`)
	f("Int64", "NaN", `bare NaN is not JSON (quote it, "NaN" or "Infinity", for a Float column)`)
	f("Int64", "{}", "cannot convert JSON object to Int64")
	f("Int64", "[1]", "cannot convert JSON array to Int64")
	f("Int64", "1e400", "cannot convert 1e400 to Int64: out of range")
	f("UInt8", "256", "cannot convert 256 to UInt8: out of range")
	f("UInt8", "-1", "cannot convert -1 to UInt8: out of range")
	f("UInt64", "18446744073709551616", "cannot convert 18446744073709551616 to UInt64: out of range")
	f("UInt64", "1e20", "cannot convert 1e20 to UInt64: out of range")
	f("UInt16", "65536", "cannot convert 65536 to UInt16: out of range")
	f("UInt32", "-5", "cannot convert -5 to UInt32: out of range")
	f("Float32", "1e39", "cannot convert 1e39 to Float32: out of range")
	f("Float64", `"abc"`, `cannot parse "abc" as Float64`)
	f("Float64", `"1_000"`, `cannot parse "1_000" as Float64`)
	f("Float64", `"0x1p3"`, `cannot parse "0x1p3" as Float64`)
	f("Float64", "true", "cannot convert true to Float64")
	f("Float64", "[]", "cannot convert JSON array to Float64")
	f("Decimal(18, 4)", `"abc"`, `cannot parse "abc" as Decimal(18, 4)`)
	f("Decimal(18, 4)", "1.23456", "cannot convert 1.23456 to Decimal(18, 4): more than 4 digits after the decimal point")
	f("Decimal(18, 4)", "123456789012345", "cannot convert 123456789012345 to Decimal(18, 4): more than 14 digits before the decimal point")
	f("Decimal(18, 4)", "1e14", "cannot convert 1e14 to Decimal(18, 4): more than 14 digits before the decimal point")
	f("Decimal(18, 4)", "true", "cannot convert true to Decimal(18, 4)")
	f("Decimal(18, 4)", `"NaN"`, `cannot parse "NaN" as Decimal(18, 4)`)
	f("Decimal(38, 2)", "0.001", "cannot convert 0.001 to Decimal(38, 2): more than 2 digits after the decimal point")
	f("FixedString(2)", `"abc"`, "string of 3 bytes is too long for FixedString(2)")
	f("FixedString(1)", `"é"`, "string of 2 bytes is too long for FixedString(1)")
	f("Date", `"2024-02-30"`, `cannot parse "2024-02-30" as Date`)
	f("Date", `"2024-13-01"`, `cannot parse "2024-13-01" as Date`)
	f("Date", `"17/05/2024"`, `cannot parse "17/05/2024" as Date`)
	f("Date", `"2024-05-17Tgarbage"`, `cannot parse "2024-05-17Tgarbage" as Date`)
	f("Date", `"1960-01-01"`, `cannot convert "1960-01-01" to Date: out of range`)
	f("Date", `"2149-06-07"`, `cannot convert "2149-06-07" to Date: out of range`)
	f("Date", "-1", "cannot convert -1 to Date: out of range")
	f("Date", "true", "cannot convert true to Date")
	f("Date32", `"1899-12-31"`, `cannot convert "1899-12-31" to Date32: out of range`)
	f("DateTime", `"2024-05-17 25:00:00"`, `cannot parse "2024-05-17 25:00:00" as DateTime`)
	f("DateTime", `"2024-05-17 12:34:56 UTC"`, `cannot parse "2024-05-17 12:34:56 UTC" as DateTime`)
	f("DateTime", `"2024-05-17T12:34:56+2"`, `cannot parse "2024-05-17T12:34:56+2" as DateTime`)
	f("DateTime", `"2024-05-17T12:34:56."`, `cannot parse "2024-05-17T12:34:56." as DateTime`)
	f("DateTime", `"yesterday"`, `cannot parse "yesterday" as DateTime`)
	f("DateTime", `"1969-12-31 23:59:59"`, `cannot convert "1969-12-31 23:59:59" to DateTime: out of range`)
	f("DateTime", `"2106-02-07 06:28:16"`, `cannot convert "2106-02-07 06:28:16" to DateTime: out of range`)
	f("DateTime", "-1", "cannot convert -1 to DateTime: out of range")
	f("DateTime", "123456789012345678901", "cannot convert 123456789012345678901 to DateTime: out of range")
	f("DateTime", "[1]", "cannot convert JSON array to DateTime")
	f("DateTime('Europe/Moscow')", "false", "cannot convert false to DateTime('Europe/Moscow')")
	f("DateTime64(3)", `"1899-12-31 23:59:59"`, `cannot convert "1899-12-31 23:59:59" to DateTime64(3): out of range`)
	f("DateTime64(3)", `"2300-01-01 00:00:00"`, `cannot convert "2300-01-01 00:00:00" to DateTime64(3): out of range`)
	f("DateTime64(9)", `"1899-12-31 23:59:59"`, `cannot convert "1899-12-31 23:59:59" to DateTime64(9): out of range`)
	f("DateTime64(9)", `"2263-01-01 00:00:00"`, `cannot convert "2263-01-01 00:00:00" to DateTime64(9): out of range`)
	f("UUID", `"nope"`, `cannot parse "nope" as UUID`)
	f("UUID", "1", "cannot convert 1 to UUID")
	f("Enum8('a' = 1, 'b' = 2)", `"c"`, `cannot convert "c" to Enum8('a' = 1, 'b' = 2): unknown name`)
	f("Enum8('a' = 1, 'b' = 2)", "3", "cannot convert 3 to Enum8('a' = 1, 'b' = 2): unknown value")
	f("Enum8('a' = 1, 'b' = 2)", `"3"`, `cannot convert "3" to Enum8('a' = 1, 'b' = 2): unknown value`)
	f("Enum8('a' = 1, 'b' = 2)", "1.5", "cannot convert 1.5 to Enum8('a' = 1, 'b' = 2): not an integer")
	f("Enum8('a' = 1, 'b' = 2)", "true", "cannot convert true to Enum8('a' = 1, 'b' = 2)")
	f("Bool", "2", "cannot convert 2 to Bool: want 0 or 1")
	f("Bool", `"yes"`, `cannot parse "yes" as Bool`)
	f("Bool", "{}", "cannot convert JSON object to Bool")
	f("IPv4", `"::1"`, `cannot convert "::1" to IPv4: not an IPv4 address`)
	f("IPv4", `"10.0.0.256"`, `cannot parse "10.0.0.256" as IPv4`)
	f("IPv4", "4294967296", "cannot convert 4294967296 to IPv4: out of range")
	f("IPv6", `"fe80::1%eth0"`, `cannot parse "fe80::1%eth0" as IPv6`)
	f("IPv6", "1", "cannot convert 1 to IPv6")
	f("Nullable(Int64)", `"x"`, `cannot parse "x" as Int64`)
	f("Nullable(Int64)", `""`, `cannot parse "" as Int64`)
	f("LowCardinality(Nullable(FixedString(1)))", `"ab"`, "string of 2 bytes is too long for FixedString(1)")
	f("Array(Int64)", `[1, "x"]`, `element 1: cannot parse "x" as Int64`)
	f("Array(Int64)", `"1,2"`, `cannot convert "1,2" to Array(Int64): want a JSON array`)
	f("Array(Int64)", `{}`, `cannot convert JSON object to Array(Int64): want a JSON array`)
	f("Array(Array(UInt8))", `[[1], [300]]`, `element 1: element 0: cannot convert 300 to UInt8: out of range`)
	f("Map(String, UInt8)", `{"a":300}`, `key "a": cannot convert 300 to UInt8: out of range`)
	f("Map(UInt8, String)", `{"x":"y"}`, `key "x": cannot parse "x" as UInt8`)
	f("Map(String, String)", "[]", `cannot convert JSON array to Map(String, String): want a JSON object`)
	f("DateTime", "99999999999", "cannot convert 99999999999 to DateTime: out of range") // below 1e11: seconds (year 5138)
}

func TestLongValuesAreCutInReasons(t *testing.T) {
	long := strings.Repeat("9", 100)
	_, err := decodeOne(t, "Int64", `"`+long+`x"`)
	want := `cannot parse "` + strings.Repeat("9", 64) + `…" as Int64`
	if re := err.(*RecordError); re.Reason != want {
		t.Fatalf("reason = %q, want %q", re.Reason, want)
	}
}

func TestFloatSpecials(t *testing.T) {
	for _, s := range []string{`"NaN"`, `"nan"`} { // bare NaN: TestBareNaNInfRejected
		data, err := decodeOne(t, "Float64", s)
		if err != nil || !math.IsNaN(data.([]float64)[0]) {
			t.Errorf("Float64 from %s = %v, %v; want NaN", s, data, err)
		}
	}
	data, err := decodeOne(t, "Float32", `"+Inf"`)
	if err != nil || !math.IsInf(float64(data.([]float32)[0]), 1) {
		t.Errorf("Float32 from +Inf = %v, %v", data, err)
	}
}

func TestRecordErrors(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "price", Type: "Decimal(18, 4)"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := func(value, want string) {
		t.Helper()
		blk := p.NewBlock()
		err := p.Append(blk, &kgo.Record{Topic: "t", Partition: 3, Offset: 42, Value: []byte(value)})
		var re *RecordError
		if !errors.As(err, &re) {
			t.Fatalf("%s: got %v, want RecordError", value, err)
		}
		if got := err.Error(); got != want {
			t.Errorf("%s:\n got %s\nwant %s", value, got, want)
		}
		if blk.Rows() != 0 || blk.Bytes() != 0 {
			t.Errorf("%s: block not empty after error", value)
		}
	}
	f(`{"price":"abc"}`, `decode topic "t" partition 3 offset 42: column "price": cannot parse "abc" as Decimal(18, 4)`)
	f(`{"price":1`, `decode topic "t" partition 3 offset 42: invalid JSON: object without its closing '}' at byte 10`)
	f(`{"price":1,"qty":}`, `decode topic "t" partition 3 offset 42: invalid JSON: unexpected character '}' at byte 17`)
	f(`{"price":1 "qty":2}`, `decode topic "t" partition 3 offset 42: invalid JSON: want ',' or '}' after the value of "price" at byte 11`)
	f(`{"price" 1}`, `decode topic "t" partition 3 offset 42: invalid JSON: want ':' after key "price" at byte 9`)
	f(`{"price":"1}`, `decode topic "t" partition 3 offset 42: invalid JSON: string without its closing quote at byte 9`)
	f(`{"price":[1 2]}`, `decode topic "t" partition 3 offset 42: invalid JSON: want ',' or ']' after an array element at byte 12`)
	f(`{"price":nul}`, `decode topic "t" partition 3 offset 42: invalid JSON: unexpected value at byte 9`)
	f(`{1:2}`, `decode topic "t" partition 3 offset 42: invalid JSON: want a quoted key at byte 1`)
	f(strings.Repeat("[", 301)+strings.Repeat("]", 301), `decode topic "t" partition 3 offset 42: invalid JSON: nested deeper than 300 levels at byte 300`)
	f(``, `decode topic "t" partition 3 offset 42: invalid JSON: missing value at byte 0`)
	f(`{"price":1} x`, `decode topic "t" partition 3 offset 42: invalid JSON: unexpected text after the value at byte 12`)
	f(`[1, 2]`, `decode topic "t" partition 3 offset 42: invalid JSON: want an object, got array`)
	f(`"x"`, `decode topic "t" partition 3 offset 42: invalid JSON: want an object, got string`)
	f(`null`, `decode topic "t" partition 3 offset 42: invalid JSON: want an object, got null`)
	f(`12`, `decode topic "t" partition 3 offset 42: invalid JSON: want an object, got number`)
}

func TestPaths(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "a", Type: "String"},
		{Name: "deep", Type: "Int64"},
		{Name: "second", Type: "String"},
		{Name: "via_array", Type: "String"},
		{Name: "gone", Type: "Nullable(String)"},
		{Name: "through_scalar", Type: "Nullable(String)"},
		{Name: "dotted.name", Type: "String"},
		{Name: "esc", Type: "String"},
	}
	p, err := Compile("json", cols, map[string]string{
		"deep": "x.y.z", "second": "x.w", "via_array": "arr.1.k", "gone": "x.nope.z",
		"through_scalar": "a.b",
	})
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	rec := &kgo.Record{Value: []byte(`{"a":"A","a":"dup","x":{"y":{"z":7},"w":"W"},"arr":[{"k":"0"},{"k":"1"}],"dotted.name":"D","es\u0063":"E"}`)}
	if err := p.Append(blk, rec); err != nil {
		t.Fatal(err)
	}
	var got []any
	for i := range cols {
		got = append(got, firstRow(cols[i].Type, blk.ColumnData(i)))
	}
	want := []any{"A", int64(7), "W", "1", nil, nil, "D", "E"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestMetaSources(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "_topic", Type: "LowCardinality(String)"},
		{Name: "_partition", Type: "Int32"},
		{Name: "_offset", Type: "UInt64"},
		{Name: "_timestamp", Type: "DateTime64(3)"},
		{Name: "_key", Type: "String"},
		{Name: "ts", Type: "DateTime"},
		{Name: "ts_ms", Type: "UInt64"},
		{Name: "ts_day", Type: "Date"},
		{Name: "ts_text", Type: "String"},
		{Name: "key_num", Type: "Int64"},
		{Name: "trace", Type: "String"},
		{Name: "n", Type: "Nullable(Int32)"},
		{Name: "absent", Type: "Nullable(String)"},
		{Name: "nullhdr", Type: "Nullable(String)"},
		{Name: "part_text", Type: "String"},
		{Name: "off_dec", Type: "Decimal(18, 2)"},
		{Name: "topic_from_json", Type: "String"},
	}
	mapping := map[string]string{
		"ts": "$timestamp", "ts_ms": "$timestamp", "ts_day": "$timestamp", "ts_text": "$timestamp",
		"key_num": "$key", "trace": "$header.trace", "n": "$header.n", "absent": "$header.absent",
		"nullhdr": "$header.nul", "part_text": "$partition", "off_dec": "$offset", "topic_from_json": "_topic",
	}
	p, err := Compile("json", cols, mapping)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	ts := time.Date(2024, 5, 17, 12, 34, 56, 789_000_000, time.UTC)
	rec := &kgo.Record{
		Topic: "events", Partition: 7, Offset: 123456, Timestamp: ts.In(time.FixedZone("X", 3600)), Key: []byte("-42"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "n", Value: []byte("5")}, {Key: "trace", Value: []byte("second")}, {Key: "nul"}},
		Value:   []byte(`{"_topic":"from-json","_offset":"ignored"}`),
	}
	if err := p.Append(blk, rec); err != nil {
		t.Fatal(err)
	}
	want := []any{"events", int32(7), uint64(123456), "2024-05-17T12:34:56.789Z", "-42", "2024-05-17 12:34:56",
		uint64(ts.UnixMilli()), "2024-05-17", "2024-05-17T12:34:56.789Z", int64(-42), "abc", int32(5), nil, nil,
		"7", "123456", "from-json"}
	for i := range cols {
		if got := firstRow(cols[i].Type, blk.ColumnData(i)); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("%s = %#v, want %#v", cols[i].Name, got, want[i])
		}
	}

	// No key: String gets "", Nullable gets NULL; a key that does not parse is a bad record.
	p2, err := Compile("json", []chschema.ColumnSchema{{Name: "_key", Type: "String"}, {Name: "k", Type: "Nullable(Int64)"}}, map[string]string{"k": "$key"})
	if err != nil {
		t.Fatal(err)
	}
	blk2 := p2.NewBlock()
	if err := p2.Append(blk2, &kgo.Record{Value: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if got := firstRow("String", blk2.ColumnData(0)); got != "" {
		t.Errorf("_key without key = %#v", got)
	}
	if got := firstRow("Nullable(Int64)", blk2.ColumnData(1)); got != nil {
		t.Errorf("k without key = %#v", got)
	}
	// No timestamp (zero, or Kafka's -1): missing, so the zero value or NULL.
	p3, err := Compile("json", []chschema.ColumnSchema{{Name: "_timestamp", Type: "DateTime"}, {Name: "t", Type: "Nullable(DateTime64(3))"}}, map[string]string{"t": "$timestamp"})
	if err != nil {
		t.Fatal(err)
	}
	blk3 := p3.NewBlock()
	for _, ts := range []time.Time{{}, time.UnixMilli(-1)} {
		if err := p3.Append(blk3, &kgo.Record{Timestamp: ts, Value: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := firstRowsAll("DateTime", blk3.ColumnData(0)); !reflect.DeepEqual(got, []any{"1970-01-01 00:00:00", "1970-01-01 00:00:00"}) {
		t.Errorf("_timestamp without timestamp = %#v", got)
	}
	if got := firstRowsAll("Nullable(DateTime64(3))", blk3.ColumnData(1)); !reflect.DeepEqual(got, []any{nil, nil}) {
		t.Errorf("t without timestamp = %#v", got)
	}

	err = p2.Append(blk2, &kgo.Record{Topic: "t", Offset: 9, Key: []byte("k1"), Value: []byte(`{}`)})
	if err == nil || err.Error() != `decode topic "t" partition 0 offset 9: column "k": cannot parse "k1" as Int64` {
		t.Errorf("bad key: %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	f := func(cols []chschema.ColumnSchema, mapping map[string]string, want string) {
		t.Helper()
		_, err := Compile("json", cols, mapping)
		if err == nil || err.Error() != want {
			t.Errorf("Compile(%v, %v) = %v\nwant %s", cols, mapping, err, want)
		}
	}
	one := func(typ string) []chschema.ColumnSchema { return []chschema.ColumnSchema{{Name: "a", Type: typ}} }
	cols := []chschema.ColumnSchema{{Name: "a", Type: "String"}, {Name: "m", Type: "String", DefaultKind: "MATERIALIZED"}, {Name: "al", Type: "String", DefaultKind: "ALIAS"}}

	f(cols, map[string]string{"nope": "x"}, `mapping names column "nope", which is not in the table`)
	f(cols, map[string]string{"m": "x"}, `mapping names column "m", which is MATERIALIZED and cannot be inserted`)
	f(cols, map[string]string{"al": "x"}, `mapping names column "al", which is ALIAS and cannot be inserted`)
	f(cols, map[string]string{"a": "$foo"}, `column "a": unknown source "$foo" (want a JSON path or $topic, $partition, $offset, $timestamp, $key, $header.NAME)`)
	f(cols, map[string]string{"a": "$header."}, `column "a": unknown source "$header." (want a JSON path or $topic, $partition, $offset, $timestamp, $key, $header.NAME)`)
	f(cols, map[string]string{"a": "$Topic"}, `column "a": unknown source "$Topic" (want a JSON path or $topic, $partition, $offset, $timestamp, $key, $header.NAME)`)
	f(cols, map[string]string{"a": "x..y"}, `column "a": invalid JSON path "x..y"`)
	f(cols, map[string]string{"a": ".x"}, `column "a": invalid JSON path ".x"`)
	f(cols, map[string]string{"a": ""}, `column "a": invalid JSON path ""`)
	f(one("Array(String)"), map[string]string{"a": "$key"}, `column "a": source $key cannot fill type Array(String)`)
	f(one("Map(String, String)"), map[string]string{"a": "$header.h"}, `column "a": source $header.h cannot fill type Map(String, String)`)
	f([]chschema.ColumnSchema{{Name: "a", Type: "String"}, {Name: "a", Type: "Int8"}}, nil, `column "a" is listed twice`)
	f([]chschema.ColumnSchema{{Name: "m", Type: "String", DefaultKind: "MATERIALIZED"}}, nil, `no insertable columns`)
	for _, typ := range []string{
		"AggregateFunction(uniq, UInt64)", "Object('json')", "Point", "Nothing", "Nullable(Nothing)",
		"Nullable(Array(UInt8))", "LowCardinality(Array(String))",
		"Tuple()", "Tuple(a UInt8, String)", "Nullable(Tuple(UInt8))", "Tuple(a Point)", "Nested(UInt8)",
		"Array(JSON)", "Array(Dynamic)", "Array(Variant(String, UInt8))", "Map(String, Dynamic)", "Tuple(a JSON)",
		"JSON(a Map(String, UInt8))", "JSON(a Tuple(UInt8))", "JSON(a JSON)", "JSON(a Point)", "Nullable(JSON)",
		"Variant(Nullable(String), UInt8)", "Variant(String, Dynamic)", "Variant()", "Dynamic(foo)", "Int128(1)",
		"Map(Nullable(String), UInt8)", "Map(Array(String), UInt8)", "Foo(", "Decimal(18, 40)", "Decimal(0, 0)", "FixedString(0)",
		"DateTime('Mars/Olympus')", "DateTime64(10)", "Enum8('a' = 1000)", "Enum8()", "Int32(5)", "",
	} {
		f(one(typ), nil, fmt.Sprintf("column %q has type %s which the json format cannot fill", "a", typ))
	}
	if _, err := Compile("thrift", cols, nil); err == nil || err.Error() != `unsupported format "thrift" (supported: json, connect-json, debezium-json, avro, protobuf, json-schema, debezium-avro)` {
		t.Errorf("format: %v", err)
	}
}

func TestCompileSkipsMaterializedAndFillsDefaults(t *testing.T) {
	table := []chschema.ColumnSchema{
		{Name: "a", Type: "String"},
		{Name: "m", Type: "String", DefaultKind: "MATERIALIZED"},
		{Name: "d", Type: "UInt8", DefaultKind: "DEFAULT"},
		{Name: "al", Type: "String", DefaultKind: "ALIAS"},
	}
	p, err := Compile("json", table, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []chschema.ColumnSchema{table[0], table[2]}
	if got := p.Columns(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Columns() = %v, want %v", got, want)
	}
}

func TestInsertColumns(t *testing.T) {
	table := []chschema.ColumnSchema{
		{Name: "id", Type: "UInt64"},
		{Name: "d1", Type: "String", DefaultKind: "DEFAULT"},
		{Name: "m", Type: "String", DefaultKind: "MATERIALIZED"},
		{Name: "name", Type: "String"},
		{Name: "d2", Type: "DateTime", DefaultKind: "DEFAULT"},
		{Name: "al", Type: "String", DefaultKind: "ALIAS"},
		{Name: "e", Type: "String", DefaultKind: "EPHEMERAL"},
	}
	f := func(mappings []map[string]string, want ...string) {
		t.Helper()
		var got []string
		for _, c := range InsertColumns(table, mappings...) {
			got = append(got, c.Name)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("InsertColumns(%v) = %v, want %v", mappings, got, want)
		}
	}
	f(nil, "id", "name")
	f([]map[string]string{{}}, "id", "name")
	f([]map[string]string{{"name": "n"}}, "id", "name")
	f([]map[string]string{{"d2": "ts"}}, "id", "name", "d2")
	f([]map[string]string{{"d2": "ts"}, {"d1": "x"}}, "id", "d1", "name", "d2")
	f([]map[string]string{{"m": "x", "al": "y"}}, "id", "name")
	f([]map[string]string{{"e": "x"}}, "id", "name", "e")
}

func TestColumnDataTypes(t *testing.T) {
	f := func(colType, want string) {
		t.Helper()
		data, err := decodeOne(t, colType, "")
		if err != nil {
			t.Fatalf("%s: %v", colType, err)
		}
		if got := fmt.Sprintf("%T", data); got != want {
			t.Errorf("ColumnData(%s) is %s, want %s", colType, got, want)
		}
	}
	f("Int8", "[]int8")
	f("Int16", "[]int16")
	f("Int32", "[]int32")
	f("Int64", "[]int64")
	f("UInt8", "[]uint8")
	f("UInt16", "[]uint16")
	f("UInt32", "[]uint32")
	f("UInt64", "[]uint64")
	f("Float32", "[]float32")
	f("Float64", "[]float64")
	f("Decimal(18, 4)", "[]decimal.Decimal")
	f("Decimal(38, 4)", "[]decimal.Decimal")
	f("String", "[]string")
	f("FixedString(3)", "[]string")
	f("Date", "[]time.Time")
	f("Date32", "[]time.Time")
	f("DateTime", "[]int64")
	f("DateTime('Europe/Moscow')", "[]int64")
	f("DateTime64(3, 'UTC')", "[]time.Time")
	f("UUID", "[]uuid.UUID")
	f("Enum8('a' = 1)", "[]int8")
	f("Enum16('a' = 1)", "[]int16")
	f("Bool", "[]bool")
	f("IPv4", "[]uint32")
	f("IPv6", "[][16]uint8")
	f("Nullable(Int64)", "[]*int64")
	f("Nullable(Decimal(9, 2))", "[]*decimal.Decimal")
	f("Nullable(String)", "[]*string")
	f("Nullable(DateTime)", "[]*int64")
	f("LowCardinality(String)", "[]string")
	f("LowCardinality(Nullable(String))", "[]*string")
	f("Array(String)", "[][]string")
	f("Array(Nullable(UInt8))", "[][]*uint8")
	f("Array(Decimal(9, 2))", "[][]decimal.Decimal")
	f("Array(Array(Int32))", "[][][]int32")
	f("Map(String, UInt64)", "[]*chschema.MapRow")
	f("Array(Map(String, UInt64))", "[][]*chschema.MapRow")
}

// TestRollback appends records that fail after other columns (and, for
// arrays and maps, part of the failing column) took their values, and checks
// the block is exactly as before and still fills every column in step.
func TestRollback(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "s", Type: "String"},
		{Name: "n", Type: "Nullable(Int64)"},
		{Name: "arr", Type: "Array(Array(String))"},
		{Name: "m", Type: "Map(String, Array(UInt8))"},
		{Name: "d", Type: "Decimal(18, 2)"},
		{Name: "fs", Type: "FixedString(3)"},
		{Name: "last", Type: "UInt8"},
	}
	p, err := Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"s":"first","n":1,"arr":[["a"],["b","c"]],"m":{"k":[1,2]},"d":1.5,"fs":"ab","last":1}`
	next := `{"s":"second","arr":[["q"]],"m":{"z":[9]},"last":2}`
	want := []any{
		[]any{"first", "second"},
		[]any{int64(1), nil},
		[]any{[]any{[]any{"a"}, []any{"b", "c"}}, []any{[]any{"q"}}},
		[]any{[][2]any{{"k", []any{uint8(1), uint8(2)}}}, [][2]any{{"z", []any{uint8(9)}}}},
		[]any{"1.5", "0"},
		[]any{"ab\x00", "\x00\x00\x00"},
		[]any{uint8(1), uint8(2)},
	}
	f := func(bad, wantColumn string) {
		t.Helper()
		blk := p.NewBlock()
		if err := p.Append(blk, &kgo.Record{Value: []byte(good)}); err != nil {
			t.Fatal(err)
		}
		snapshot := func() []any {
			var out []any
			for i := range cols {
				out = append(out, firstRowsAll(cols[i].Type, blk.ColumnData(i)))
			}
			return out
		}
		before, rows, bytes := snapshot(), blk.Rows(), blk.Bytes()
		err := p.Append(blk, &kgo.Record{Value: []byte(bad)})
		var re *RecordError
		if !errors.As(err, &re) || re.Column != wantColumn {
			t.Fatalf("Append(%s) = %v, want an error in column %q", bad, err, wantColumn)
		}
		if got := snapshot(); !reflect.DeepEqual(got, before) || blk.Rows() != rows || blk.Bytes() != bytes {
			t.Fatalf("after failed Append (%v):\n got %v rows=%d bytes=%d\nwant %v rows=%d bytes=%d", err, got, blk.Rows(), blk.Bytes(), before, rows, bytes)
		}
		if err := p.Append(blk, &kgo.Record{Value: []byte(next)}); err != nil {
			t.Fatal(err)
		}
		if got := snapshot(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s failed, the next record gives\n got %#v\nwant %#v", bad, got, want)
		}
	}
	f(`{"s":"second, longer string","n":null,"arr":[["x","y","z"],[]],"m":{"a":[3],"b":[4,5]},"d":"2.25","fs":"xyz","last":256}`, "last")
	f(`{"s":"third","n":2,"arr":[["x"],["y"]],"m":{"a":[3],"b":[4,500]},"d":"2.25","fs":"xyz","last":1}`, "m")
	f(`{"s":"third","n":2,"arr":[["x"],["y"]],"m":{"a":[3],"b":"x"},"d":"2.25","fs":"xyz","last":1}`, "m")
	f(`{"s":"fourth","n":2,"arr":[["x", "y"],"z"],"m":{"a":[3]},"d":"2.25","fs":"xyz","last":1}`, "arr")
	f(`{"s":"fifth","n":2,"arr":[["x"]],"m":{"a":[3],"b":[4,5]},"d":"2.255","fs":"xyz","last":1}`, "d")
}

func firstRowsAll(colType string, data any) any {
	t := chtype.Parse(colType)
	s := reflect.ValueOf(data)
	out := []any{}
	for i := 0; i < s.Len(); i++ {
		out = append(out, norm(t, s.Index(i).Interface()))
	}
	return out
}

func TestBlockSharedAcrossPlans(t *testing.T) {
	table := []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "src", Type: "String"}, {Name: "_topic", Type: "String"}}
	ma := map[string]string{"src": "a.name"}
	mb := map[string]string{"id": "uid", "src": "$header.src"}
	cols := InsertColumns(table, ma, mb)
	pa, err := Compile("json", cols, ma)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := Compile("json", cols, mb)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pa.Columns(), pb.Columns()) {
		t.Fatal("plans differ in columns")
	}
	blk := pa.NewBlock()
	if err := pa.Append(blk, &kgo.Record{Topic: "ta", Value: []byte(`{"id":1,"a":{"name":"x"}}`)}); err != nil {
		t.Fatal(err)
	}
	if err := pb.Append(blk, &kgo.Record{Topic: "tb", Value: []byte(`{"uid":2}`), Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("h")}}}); err != nil {
		t.Fatal(err)
	}
	got := []any{blk.ColumnData(0), blk.ColumnData(1), blk.ColumnData(2)}
	want := []any{[]uint64{1, 2}, []string{"x", "h"}, []string{"ta", "tb"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	other, err := Compile("json", []chschema.ColumnSchema{{Name: "id", Type: "Int64"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Append to a block of another layout did not panic")
		}
	}()
	_ = other.Append(blk, &kgo.Record{Value: []byte(`{}`)})
}

func TestBytesAndReset(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "s", Type: "String"}, {Name: "n", Type: "UInt64"}, {Name: "a", Type: "Array(Nullable(Int32))"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	if blk.Bytes() != 0 {
		t.Fatalf("empty block Bytes() = %d", blk.Bytes())
	}
	add := func(v string) int {
		t.Helper()
		before := blk.Bytes()
		if err := p.Append(blk, &kgo.Record{Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
		return blk.Bytes() - before
	}
	small := add(`{"s":"ab","n":1,"a":[]}`)
	big := add(`{"s":"` + strings.Repeat("x", 1000) + `","n":1,"a":[1,2,3]}`)
	if small <= 0 || big < 1000+3*5 {
		t.Fatalf("Bytes grew by %d for a small record and %d for a big one", small, big)
	}
	huge := add(`{"s":"` + strings.Repeat("y", 100_000) + `"}`) // beyond the arena's chunk: own allocation
	if huge < 100_000 {
		t.Fatalf("Bytes grew by %d for a 100 kB string", huge)
	}
	strs := blk.ColumnData(0).([]string)
	kept := strs[1]

	blk.Reset()
	if blk.Rows() != 0 || blk.Bytes() != 0 {
		t.Fatalf("after Reset: rows=%d bytes=%d", blk.Rows(), blk.Bytes())
	}
	for i := 0; i < 100; i++ { // refill; strings handed out before Reset must not change
		add(`{"s":"` + strings.Repeat("z", 1000) + `"}`)
	}
	if kept != strings.Repeat("x", 1000) {
		t.Fatal("a string from before Reset changed")
	}
	if blk.Rows() != 100 || len(blk.ColumnData(0).([]string)) != 100 || len(blk.ColumnData(2).([][]*int32)) != 100 {
		t.Fatal("refill after Reset: wrong row count")
	}
}

// TestZeroAllocsPerRecord pins the steady-state cost: decoding a typical
// record allocates nothing (strings go to a chunked arena).
func TestZeroAllocsPerRecord(t *testing.T) {
	p, err := Compile("json", InsertColumns(benchCols), nil)
	if err != nil {
		t.Fatal(err)
	}
	events := benchEvents(64)
	blk := p.NewBlock()
	i := 0
	next := func() {
		if blk.Rows() == 5000 {
			blk.Reset()
		}
		if err := p.Append(blk, &kgo.Record{Topic: "events", Value: events[i%len(events)]}); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for j := 0; j < 6000; j++ { // warm up buffers
		next()
	}
	if allocs := testing.AllocsPerRun(2000, next); allocs > 0.1 {
		t.Fatalf("%.2f allocations per record", allocs)
	}
}

// TestNewBlockPresized checks that a block opened while a full one is
// still held (as the pipeline opens one while the sealed block is being
// inserted) starts with the row and String capacity the full one grew
// to, never grows while it fills to the same size, and holds the same
// values as a block grown from empty.
func TestNewBlockPresized(t *testing.T) {
	p, err := Compile("json", InsertColumns(benchCols), nil)
	if err != nil {
		t.Fatal(err)
	}
	events := benchEvents(64)
	fill := func(blk *column.Block, n int) {
		for range n {
			i := blk.Rows()
			if err := p.Append(blk, &kgo.Record{Topic: "events", Value: events[i%len(events)]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const rows = 3000
	first := p.NewBlock()
	fill(first, rows)

	second := p.NewBlock()
	fill(second, 1)
	// The capacities, through the native columns, which alias the buffers.
	caps := func(b *column.Block) (buf, pos, vals int) {
		payload := b.Native(5).(proto.ColStr) // String column "payload"
		user := b.Native(0).(proto.ColUInt64)
		return cap(payload.Buf), cap(payload.Pos), cap(user)
	}
	bufCap, posCap, valCap := caps(second)
	if want := len(first.Native(5).(proto.ColStr).Buf); bufCap < want {
		t.Fatalf("payload buffer starts at %d bytes, want at least the %d the first block used", bufCap, want)
	}
	if posCap < rows || valCap < rows {
		t.Fatalf("row capacity starts at %d (String) and %d (UInt64), want at least %d", posCap, valCap, rows)
	}
	fill(second, rows-1)
	if b, p, v := caps(second); b != bufCap || p != posCap || v != valCap {
		t.Fatal("a presized block grew while filling to the size of the one before it")
	}
	for i := range first.Columns() {
		if a, b := fmt.Sprint(first.ColumnData(i)), fmt.Sprint(second.ColumnData(i)); a != b {
			t.Fatalf("column %d differs between the grown and the presized block", i)
		}
	}
}

// A 2,000-deep nested JSON value is a bad record with a short error that
// names the record; and a reason of any length (some parsers repeat
// themselves at every nesting level: 14 KB for that value) is cut so that
// the error text fits errtext.Max, with the record's coordinates whole at
// its start and the reason's innermost words at its end.
func TestDeepJSONErrorIsCapped(t *testing.T) {
	p, err := Compile("json", []chschema.ColumnSchema{{Name: "price", Type: "Decimal(18, 4)"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	value := `{"price":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`
	err = p.Append(p.NewBlock(), &kgo.Record{Topic: "orders", Partition: 7, Offset: 123456789, Value: []byte(value)})
	var re *RecordError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a RecordError", err)
	}
	const where = `decode topic "orders" partition 7 offset 123456789: `
	if msg := err.Error(); len(msg) > errtext.Max || !strings.HasPrefix(msg, where) {
		t.Fatalf("deep JSON: error text of %d bytes %.200q; want at most %d, starting with the coordinates", len(msg), msg, errtext.Max)
	}
	t.Logf("deep JSON: %d-byte error: %s", len(err.Error()), err)

	long := &RecordError{Topic: "orders", Partition: 7, Offset: 123456789, Column: "price",
		Reason: "invalid JSON: " + strings.Repeat("cannot parse array value: ", 540) + "unexpected end"}
	msg := long.Error()
	if len(msg) > errtext.Max || !utf8.ValidString(msg) {
		t.Fatalf("error text %d bytes (valid UTF-8: %v), want at most %d", len(msg), utf8.ValidString(msg), errtext.Max)
	}
	if !strings.HasPrefix(msg, where+`column "price": invalid JSON: `) {
		t.Fatalf("error text %.120q does not start with the record's coordinates", msg)
	}
	if !strings.Contains(msg, " bytes cut] … ") || !strings.HasSuffix(msg, "cannot parse array value: unexpected end") {
		t.Fatalf("error text does not say what was cut or lost the reason's end: %q", msg)
	}
	t.Logf("a %d-byte reason: %d-byte error", len(long.Reason), len(msg))
}

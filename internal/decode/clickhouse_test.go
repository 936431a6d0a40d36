package decode

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

// normRead normalizes a value clickhouse-go returns when reading a column
// (Row or Scan) to the representation norm gives the block's own value.
func normRead(t *chtype.Type, v any) any {
	for t.Kind == chtype.Nullable || t.Kind == chtype.LowCardinality {
		t = t.Elem
	}
	if v == nil {
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer {
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
			out = append(out, normRead(t.Elem, s.Index(i).Interface()))
		}
		return out
	case chtype.Map:
		m := reflect.ValueOf(v)
		out := [][2]any{}
		for it := m.MapRange(); it.Next(); {
			out = append(out, [2]any{normRead(t.Key, it.Key().Interface()), normRead(t.Elem, it.Value().Interface())})
		}
		return sortPairs(out)
	case chtype.Decimal:
		return v.(decimal.Decimal).String()
	case chtype.Date, chtype.Date32:
		return v.(time.Time).Format("2006-01-02")
	case chtype.DateTime:
		return v.(time.Time).UTC().Format("2006-01-02 15:04:05")
	case chtype.DateTime64:
		return v.(time.Time).UTC().Format(time.RFC3339Nano)
	case chtype.UUID:
		return v.(uuid.UUID).String()
	case chtype.Enum8:
		return int8(t.EnumByName[v.(string)])
	case chtype.Enum16:
		return t.EnumByName[v.(string)]
	case chtype.IPv4, chtype.IPv6:
		var a netip.Addr
		switch ip := v.(type) {
		case netip.Addr:
			a = ip
		case net.IP:
			a, _ = netip.AddrFromSlice(ip)
		default:
			return fmt.Sprintf("unexpected %T", v)
		}
		if t.Kind == chtype.IPv6 {
			a = netip.AddrFrom16(a.As16())
		}
		return a.String()
	}
	return v
}

// normSorted is norm with map entries sorted (reading a Map back gives a Go map).
func normSorted(t *chtype.Type, v any) any {
	n := norm(t, v)
	var fix func(t *chtype.Type, n any) any
	fix = func(t *chtype.Type, n any) any {
		for t.Kind == chtype.Nullable || t.Kind == chtype.LowCardinality {
			t = t.Elem
		}
		switch t.Kind {
		case chtype.Map:
			ps := n.([][2]any)
			for i := range ps {
				ps[i][1] = fix(t.Elem, ps[i][1])
			}
			return sortPairs(ps)
		case chtype.Array:
			if s, ok := n.([]any); ok {
				for i := range s {
					s[i] = fix(t.Elem, s[i])
				}
			}
		}
		return n
	}
	return fix(t, n)
}

func sortPairs(ps [][2]any) [][2]any {
	sort.Slice(ps, func(i, j int) bool { return fmt.Sprint(ps[i][0]) < fmt.Sprint(ps[j][0]) })
	return ps
}

// TestClickHouseGoAcceptsColumnData hands ColumnData of every supported type
// (including those the local 18.16 server lacks: Bool, Date32, DateTime64,
// Map, IPv4, IPv6, SimpleAggregateFunction, Decimal256) to clickhouse-go's
// own column of that type, round-trips it through the native encoding and
// compares what clickhouse-go reads back.
func TestClickHouseGoAcceptsColumnData(t *testing.T) {
	f := func(colType string, jsons ...string) {
		t.Helper()
		ct := chtype.Parse(colType)
		p, err := Compile("json", []chschema.ColumnSchema{{Name: "c", Type: colType}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		blk := p.NewBlock()
		for _, j := range jsons {
			v := `{"c":` + j + `}`
			if j == "" {
				v = `{}`
			}
			if err := p.Append(blk, &kgo.Record{Value: []byte(v)}); err != nil {
				t.Fatalf("%s: %v", colType, err)
			}
		}
		sc := &column.ServerContext{Timezone: time.UTC, Revision: 54460}
		chType := column.Type(colType)
		in, err := chType.Column("c", sc)
		if err != nil {
			t.Fatalf("clickhouse-go has no column for %s: %v", colType, err)
		}
		data := blk.ColumnData(0)
		if _, err := in.Append(data); err != nil {
			t.Fatalf("%s: clickhouse-go rejects ColumnData %T: %v", colType, data, err)
		}
		var buf proto.Buffer
		if cs, ok := in.(column.CustomSerialization); ok {
			if err := cs.WriteStatePrefix(&buf); err != nil {
				t.Fatal(err)
			}
		}
		in.Encode(&buf)
		out, _ := chType.Column("c", sc)
		r := proto.NewReader(bytes.NewReader(buf.Buf))
		if cs, ok := out.(column.CustomSerialization); ok {
			if err := cs.ReadStatePrefix(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := out.Decode(r, len(jsons)); err != nil {
			t.Fatalf("%s: decode: %v", colType, err)
		}
		rows := reflect.ValueOf(data)
		for i := range jsons {
			want := normSorted(ct, rows.Index(i).Interface())
			got := normRead(ct, out.Row(i, false))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s row %d (%s): clickhouse-go read %#v, block had %#v", colType, i, jsons[i], got, want)
			}
		}
	}
	f("Int8", "-128", "127", "")
	f("Int16", "-32768", `"7"`)
	f("Int32", "2147483647", "null")
	f("Int64", "-9223372036854775808", "1")
	f("UInt8", "255", "true")
	f("UInt16", "65535")
	f("UInt32", "4294967295")
	f("UInt64", "18446744073709551615")
	f("Float32", "1.5", `"-Inf"`)
	f("Float64", "-2.25e10", "")
	f("Decimal(9, 2)", "-1234567.89", `"0.01"`)
	f("Decimal(18, 4)", "99999999999999.9999", "-0.0001", "")
	f("Decimal(38, 10)", "-1234567890123456789012345678.0123456789", "0")
	f("Decimal(76, 20)", "12345678901234567890123456789012345678901234567890.12345678901234567890")
	f("String", `"héllo"`, `{"a":[1]}`, "")
	f("FixedString(4)", `"ab"`, `"abcd"`, "")
	f("Date", `"2024-05-17"`, `"2149-06-06"`, "")
	f("Date32", `"1900-01-01"`, `"2299-12-31"`, "")
	f("DateTime", `"2024-05-17T12:34:56Z"`, "4294967295", "")
	f("DateTime('Europe/Moscow')", `"2024-05-17 15:34:56"`)
	f("DateTime64(3)", `"2024-05-17T12:34:56.789Z"`, `"1900-01-01 00:00:00"`, "")
	f("DateTime64(9, 'Asia/Tokyo')", "1715949296789123456")
	f("UUID", `"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`, "")
	f("Enum8('a' = 1, 'b' = -2)", `"b"`, "1", "")
	f("Enum16('x' = -1000, 'y' = 1000)", `"y"`, "")
	f("Bool", "true", "false", "")
	f("IPv4", `"10.0.0.1"`, `"255.255.255.255"`, "")
	f("IPv6", `"2001:db8::1"`, `"10.0.0.1"`, "")
	f("Nullable(Int64)", "1", "null", "")
	f("Nullable(String)", `"x"`, "null")
	f("Nullable(Decimal(18, 4))", "1.5", "null")
	f("Nullable(Decimal(38, 4))", "1.5", "null")
	f("Nullable(DateTime)", "1715949296", "null")
	f("Nullable(DateTime64(3))", "1715949296789", "null")
	f("Nullable(Date)", `"2024-05-17"`, "null")
	f("Nullable(UUID)", "null", `"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`)
	f("Nullable(FixedString(2))", `"a"`, "null")
	f("Nullable(Enum8('a' = 1))", `"a"`, "null")
	f("Nullable(Bool)", "true", "null")
	f("Nullable(IPv4)", `"1.2.3.4"`, "null")
	f("Nullable(IPv6)", `"::1"`, "null")
	f("Nullable(Float64)", "null", "1")
	f("LowCardinality(String)", `"a"`, `"b"`, `"a"`, "")
	f("LowCardinality(Nullable(String))", `"a"`, "null", `"a"`)
	f("LowCardinality(FixedString(2))", `"a"`, `"ab"`)
	f("LowCardinality(UInt64)", "1", "2", "1")
	f("Array(Int32)", "[1, 2]", "[]", "")
	f("Array(String)", `["a", "b"]`, "[]")
	f("Array(Nullable(Int64))", "[1, null]", "[null]")
	f("Array(Nullable(String))", `["a", null]`)
	f("Array(Array(UInt8))", "[[1], [], [2, 3]]", "[]")
	f("Array(Decimal(9, 2))", `[1.5, "2"]`)
	f("Array(DateTime)", `["2024-05-17 12:34:56"]`)
	f("Array(DateTime64(3))", `["2024-05-17 12:34:56.789"]`)
	f("Array(Date)", `["2024-05-17"]`)
	f("Array(UUID)", `["6ba7b810-9dad-11d1-80b4-00c04fd430c8"]`)
	f("Array(LowCardinality(String))", `["a", "a", "b"]`)
	f("Array(Enum8('a' = 1, 'b' = 2))", `["a", "b"]`)
	f("Array(FixedString(2))", `["a", "bc"]`)
	f("Array(Bool)", "[true, false]")
	f("Array(IPv4)", `["1.2.3.4"]`)
	f("Map(String, UInt64)", `{"a":1, "b":2}`, "{}", "")
	f("Map(String, Nullable(String))", `{"a":null, "b":"x"}`)
	f("Map(String, Array(Int8))", `{"a":[1, 2], "b":[]}`)
	f("Map(LowCardinality(String), Int64)", `{"x":-1}`)
	f("Map(UInt16, String)", `{"7":"x"}`)
	f("Map(String, DateTime)", `{"t":1715949296}`)
	f("Map(String, Decimal(9, 2))", `{"p":"1.25"}`)
	f("Map(String, Map(String, UInt8))", `{"a":{"b":1}}`)
	f("Array(Map(String, UInt8))", `[{"a":1}, {}]`)
	f("SimpleAggregateFunction(max, UInt64)", "5")
}

// chTable is every type the local ClickHouse 18.16 server has (Bool, Date32,
// DateTime64, Map, IPv4/IPv6 and SimpleAggregateFunction came later; the test
// above covers them against clickhouse-go alone).
const chTable = `CREATE TABLE %s.t (
	id UInt32,
	i8 Int8, i16 Int16, i32 Int32, i64 Int64,
	u8 UInt8, u16 UInt16, u32 UInt32, u64 UInt64,
	f32 Float32, f64 Float64,
	d9 Decimal(9, 2), d18 Decimal(18, 4), d38 Decimal128(10),
	s String, fs FixedString(4),
	d Date, dt DateTime, dtz DateTime('Europe/Moscow'),
	u UUID,
	e8 Enum8('a' = 1, 'b' = 2, 'c, d = e' = -3), e16 Enum16('x' = -1000, 'y' = 1000),
	lc LowCardinality(String), lcn LowCardinality(Nullable(String)),
	n_i Nullable(Int64), n_f Nullable(Float64), n_s Nullable(String), n_d Nullable(Decimal(18, 4)),
	n_dt Nullable(DateTime), n_date Nullable(Date), n_u Nullable(UUID), n_fs Nullable(FixedString(2)),
	n_e Nullable(Enum8('a' = 1)),
	a_i Array(Int32), a_s Array(String), a_n Array(Nullable(Int64)), a_a Array(Array(UInt8)),
	a_d Array(Decimal(9, 2)), a_dt Array(DateTime), a_lc Array(LowCardinality(String)),
	a_date Array(Date), a_u Array(UUID), a_e Array(Enum8('a' = 1, 'b' = 2)), a_fs Array(FixedString(2)),
	_topic LowCardinality(String), _partition Int32, _offset UInt64, _timestamp DateTime, _key String,
	def String DEFAULT 'dflt',
	mat String MATERIALIZED upper(s),
	al String ALIAS lower(s)
) ENGINE = MergeTree ORDER BY id`

var chRecords = []string{
	`{"id":1,"i8":-128,"i16":"-32768","i32":2147483647,"i64":-9223372036854775808,
	  "u8":255,"u16":65535,"u32":4294967295,"u64":"18446744073709551615",
	  "f32":1.5,"f64":-2.25e10,
	  "d9":-1234567.89,"d18":"99999999999999.9999","d38":"-1234567890123456789012345678.0123456789",
	  "s":"héllo \"world\"\n","fs":"ab",
	  "d":"2024-05-17","dt":"2024-05-17T12:34:56Z","dtz":"2024-05-17 15:34:56",
	  "u":"6ba7b810-9dad-11d1-80b4-00c04fd430c8",
	  "e8":"c, d = e","e16":1000,
	  "lc":"web","lcn":"ios",
	  "n_i":7,"n_f":0.5,"n_s":"x","n_d":1.5,"n_dt":1715949296789,"n_date":"2024-05-17","n_u":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","n_fs":"z","n_e":"a",
	  "a_i":[1,2,3],"a_s":["a","",{"k":1}],"a_n":[1,null],"a_a":[[1],[],[2,3]],
	  "a_d":[1.5,"2"],"a_dt":["2024-05-17 12:34:56",0],"a_lc":["x","x","y"],
	  "a_date":["2024-05-17"],"a_u":["6ba7b810-9dad-11d1-80b4-00c04fd430c8"],"a_e":["b","a"],"a_fs":["q","rs"],
	  "def":"given"}`,
	`{"id":2}`,
	`{"id":3,"i8":null,"s":null,"lcn":null,"n_i":null,"a_i":null,"a_n":[null,null],"d":19860,"dt":"1715949296","dtz":1715949296,"e8":2,"f64":"NaN","f32":"-Inf","_key":"from-json-ignored"}`,
}

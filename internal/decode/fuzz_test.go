package decode

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/decode/connect"
	"sink/internal/route"
)

// Fuzz targets for the hand-written parsers of this package. Each is seeded
// from the table tests' inputs; `make fuzz` runs each for longer. Any input
// that ever failed is kept as a seed (or under testdata/fuzz) so that it
// stays fixed.

// dbzFuzzCols cover every class of column the debezium-json conversions
// treat differently: numbers, decimals, times, strings, composites.
var dbzFuzzCols = []chschema.ColumnSchema{
	{Name: "id", Type: "Int64"},
	{Name: "total", Type: "Decimal(20, 4)"},
	{Name: "f", Type: "Float64"},
	{Name: "created_at", Type: "DateTime64(6)"},
	{Name: "d", Type: "Nullable(Date32)"},
	{Name: "note", Type: "String"},
	{Name: "fs", Type: "FixedString(4)"},
	{Name: "tags", Type: "Array(String)"},
	{Name: "m", Type: "Map(String, UInt8)"},
	{Name: "op", Type: "LowCardinality(String)"},
	{Name: "tbl", Type: "String"},
	{Name: "ts", Type: "Nullable(Int64)"},
	{Name: "_version", Type: "UInt64"},
	{Name: "_deleted", Type: "UInt8"},
}

var dbzFuzzMapping = map[string]string{"op": "$op", "tbl": "$source.table", "ts": "$ts_ms"}

// noPanic fails a fuzz target on a panic that Append recovered (its
// reason names where it was raised): a bug the input found, which the
// recovery must not hide.
func noPanic(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrPanic) {
		t.Fatalf("decoder panic: %v", err)
	}
}

// dbzOutcome appends r with p to a fresh block and renders what happened:
// the error, or the row's column values.
func dbzOutcome(t *testing.T, p *Plan, r *kgo.Record) string {
	blk := p.NewBlock()
	if err := p.Append(blk, r); err != nil {
		noPanic(t, err)
		if blk.Rows() != 0 || blk.Bytes() != 0 {
			t.Fatalf("failed Append left rows=%d bytes=%d", blk.Rows(), blk.Bytes())
		}
		return "error: " + err.Error()
	}
	var b strings.Builder
	for i := range blk.Columns() {
		render(&b, reflect.ValueOf(blk.ColumnData(i)))
		b.WriteByte('|')
	}
	return b.String()
}

// render writes v with pointers followed, so that equal values render
// equally wherever they are stored.
func render(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("NULL")
			return
		}
		if m, ok := v.Interface().(*chschema.MapRow); ok {
			b.WriteString("map[")
			for i := range m.Len() {
				k, val := m.Entry(i)
				render(b, reflect.ValueOf(k))
				b.WriteByte(':')
				render(b, reflect.ValueOf(val))
				b.WriteByte(' ')
			}
			b.WriteByte(']')
			return
		}
		render(b, v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			fmt.Fprintf(b, "%x", v.Interface())
			return
		}
		b.WriteByte('[')
		for i := range v.Len() {
			render(b, v.Index(i))
			b.WriteByte(' ')
		}
		b.WriteByte(']')
	case reflect.Struct:
		if s, ok := v.Interface().(fmt.Stringer); ok {
			b.WriteString(s.String())
			return
		}
		b.WriteByte('{')
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				render(b, v.Field(i))
				b.WriteByte(' ')
			}
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}

// FuzzDebeziumAppend: no record value or key makes the debezium-json format
// panic, a failed Append leaves the block unchanged, and the schema cache is
// invisible: a value decodes the same on a fresh plan (schema parsed), on
// the same plan again (schema found in the cache by its bytes), and on a
// plan whose cache holds another schema.
func FuzzDebeziumAppend(f *testing.F) {
	entries, _ := os.ReadDir(filepath.Join("testdata", "debezium"))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", "debezium", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte(`{"id": 1}`))
	}
	for _, wrapped := range []bool{true, false} {
		for _, e := range dbzBenchEvents(10, wrapped) {
			f.Add(e, []byte(nil))
		}
	}
	for _, s := range []string{
		`{"schema":null,"payload":{"op":"c","after":{"id":1},"ts_ms":1}}`,
		`{"schema":{},"payload":null}`,
		` { "schema" : {"a":"}"} , "payload" : {"op":"d","before":null,"ts_ms":5} } `,
		`{"schema":{"fields":[{"field":"after","fields":[{"field":"total","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}}]}]},"payload":{"op":"r","after":{"total":"AeI6"},"ts_ms":1}}`,
		`{"op":"u","after":{"total":{"scale":3,"value":"/w=="},"tags":"[\"a\"]","m":"{\"k\":1}"},"ts_ms":2}`,
		`{"schema":{"a":[1,{"b":"\\"}"}]},"payload":{"op":"m"}}`,
		`null`, `[]`, `{"schema":`, `{"op":"x"}`,
	} {
		f.Add([]byte(s), []byte(`{"schema":{"type":"struct"},"payload":{"id":7}}`))
	}
	compile := func(t *testing.T) *Plan {
		p, err := Compile(route.Debezium, dbzFuzzCols, dbzFuzzMapping)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	warm := dbzBenchEvents(1, true)[0]
	f.Fuzz(func(t *testing.T, value, key []byte) {
		r := &kgo.Record{Topic: "pg.public.t", Offset: 42, Value: value, Key: key}
		fresh := compile(t)
		first := dbzOutcome(t, fresh, r)
		if again := dbzOutcome(t, fresh, r); again != first {
			t.Fatalf("second Append differs (schema cache):\nfirst  %s\nsecond %s", first, again)
		}
		other := compile(t)
		dbzOutcome(t, other, &kgo.Record{Value: warm})
		if got := dbzOutcome(t, other, r); got != first {
			t.Fatalf("Append after another schema differs:\nfresh %s\nwarm  %s", first, got)
		}
	})
}

// decimalRef is the decimal text of the two's-complement big-endian raw
// scaled by 10^-scale, computed with math/big: what decimalText must give.
func decimalRef(raw []byte, scale int) string {
	n := new(big.Int).SetBytes(raw)
	if len(raw) > 0 && raw[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(raw))))
	}
	neg := n.Sign() < 0
	digits := new(big.Int).Abs(n).String()
	var out string
	switch {
	case digits == "0" && scale <= 0:
		out = "0"
	case scale <= 0:
		out = digits + strings.Repeat("0", -scale)
	case len(digits) > scale:
		out = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	default:
		out = "0." + strings.Repeat("0", scale-len(digits)) + digits
	}
	if neg {
		out = "-" + out
	}
	return out
}

// FuzzDebeziumDecimal: Debezium's Decimal (base64 two's complement and a
// scale) and VariableScaleDecimal decode to the exact value math/big
// computes, for every width (the 8- and 16-byte fast paths included), and
// no text, scale or object panics.
func FuzzDebeziumDecimal(f *testing.F) {
	for _, c := range []struct {
		unscaled string
		scale    int
	}{
		{"0", 0}, {"0", 2}, {"0", -2}, {"123450", 2}, {"-4207", 2}, {"5", 3}, {"-5", 3}, {"12", -2}, {"-1", 0},
		{"9223372036854775807", 4}, {"-9223372036854775808", 0}, {"18446744073709551616", 1},
		{"-170141183460469231731687303715884105728", 38}, {"99999999999999999999999999999999999999999", 5},
	} {
		n, _ := new(big.Int).SetString(c.unscaled, 10)
		f.Add(twosComplement(n), c.scale)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1)
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 3)
	f.Add([]byte{}, 0)
	f.Add([]byte{0}, connect.MaxScale+1)
	f.Fuzz(func(t *testing.T, raw []byte, scale int) {
		var d connect.Decimals
		b64 := []byte(base64.StdEncoding.EncodeToString(raw))
		in := column.Value{Kind: column.String, Bytes: b64}
		err := d.FromBase64(&in, b64, scale)
		if scale > connect.MaxScale || scale < -connect.MaxScale {
			if err == nil {
				t.Fatalf("scale %d accepted", scale)
			}
			return
		}
		if err != nil {
			t.Fatalf("% x scale %d: %v", raw, scale, err)
		}
		if want := decimalRef(raw, scale); string(in.Bytes) != want || in.Kind != column.Number {
			t.Fatalf("% x scale %d = %q, want %q", raw, scale, in.Bytes, want)
		}
		// The same through a VariableScaleDecimal object, and the text
		// as a JSON number into a Decimal column must not panic either.
		p, err := Compile(route.Debezium, []chschema.ColumnSchema{{Name: "c", Type: "Decimal(76, 10)"}, {Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf(`{"op":"c","ts_ms":1,"after":{"c":{"scale":%d,"value":%q}}}`, scale, b64)
		dbzOutcome(t, p, &kgo.Record{Value: []byte(v)})
	})
}

// FuzzDebeziumDecimalText: any base64-ish text and scale given as a
// Decimal or VariableScaleDecimal field is a value or a bad record.
func FuzzDebeziumDecimalText(f *testing.F) {
	for _, s := range []string{"AeI6", "/w==", "not base64!", "AA=B", "", "gAAAAAAAAAAAAAAAAAAAAAA="} {
		f.Add(s, "2")
	}
	f.Add("AeI6", "x")
	f.Add("AeI6", "-5000")
	p, err := Compile(route.Debezium, []chschema.ColumnSchema{{Name: "c", Type: "Nullable(Decimal(12, 2))"}, {Name: "s", Type: "String"}, {Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text, scale string) {
		schema := fmt.Sprintf(`{"fields":[{"field":"after","fields":[{"field":"c","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":%q}}]}]}`, scale)
		q := fmt.Sprintf("%q", text)
		for _, v := range []string{
			`{"schema":` + schema + `,"payload":{"op":"c","ts_ms":1,"after":{"c":` + q + `,"s":` + q + `}}}`,
			`{"op":"c","ts_ms":1,"after":{"c":` + q + `}}`,
			`{"op":"c","ts_ms":1,"after":{"c":{"scale":` + scale + `,"value":` + q + `}}}`,
		} {
			dbzOutcome(t, p, &kgo.Record{Value: []byte(v)})
		}
	})
}

// convertFuzzTypes are the column types FuzzConvert feeds: every scalar
// type and the containers of the json format (FuzzModernConvert has the
// newer ones).
var convertFuzzTypes = []string{
	"Int8", "UInt8", "Int64", "UInt64", "Float32", "Float64", "Decimal(9, 2)", "Decimal(38, 10)", "Decimal(76, 5)",
	"String", "FixedString(3)", "Date", "Date32", "DateTime", "DateTime('Asia/Tokyo')", "DateTime64(3)", "DateTime64(9, 'America/New_York')",
	"UUID", "Enum8('a' = 1, 'b' = -2)", "Enum16('x' = 1000)", "Bool", "IPv4", "IPv6",
	"Nullable(Int32)", "LowCardinality(Nullable(String))", "Array(Nullable(UInt16))", "Array(Array(String))",
	"Map(String, Int64)", "Map(UInt8, Array(String))",
}

// FuzzConvert: no JSON value makes a column type's conversion panic, a
// value that does not convert leaves the block unchanged, and a converted
// value can be read back with ColumnData.
func FuzzConvert(f *testing.F) {
	for _, v := range []string{
		`1`, `-1`, `1.0`, `1e3`, `1.5`, `"42"`, `"+42"`, `"0x10"`, `true`, `false`, `null`, `"NaN"`, `NaN`, `"-Inf"`, `1e400`,
		`"2024-05-17"`, `"2024-05-17T12:34:56.789+02:00"`, `"2024-05-17 12:34:56.123456789"`, `1715949296789`, `65535`, `-1e18`,
		`"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`, `"{6BA7B810-9DAD-11D1-80B4-00C04FD430C8}"`, `"a"`, `"b"`, `"x"`,
		`"10.0.0.1"`, `"::ffff:10.0.0.1"`, `"fe80::1%eth0"`, `4294967295`, `"abcd"`, `"é"`,
		`[1, null, 3]`, `[["a"], []]`, `{"k": 1, "k": 2}`, `{"1": ["x"]}`, `"99999999999999999999999999999.99"`, `-0.00`,
		`"1_000"`, `" 1"`, `"1e-400"`, `123456789012345678901234567890`,
	} {
		f.Add(v)
	}
	plans := make([]*Plan, len(convertFuzzTypes))
	for i, typ := range convertFuzzTypes {
		p, err := Compile(route.JSON, []chschema.ColumnSchema{{Name: "c", Type: typ}}, nil)
		if err != nil {
			f.Fatal(err)
		}
		plans[i] = p
	}
	f.Fuzz(func(t *testing.T, value string) {
		rec := &kgo.Record{Value: []byte(`{"c":` + value + `}`)}
		for i, p := range plans {
			blk := p.NewBlock()
			if err := p.Append(blk, rec); err != nil {
				noPanic(t, err)
				if blk.Rows() != 0 || blk.Bytes() != 0 {
					t.Fatalf("%s: failed Append left rows=%d bytes=%d", convertFuzzTypes[i], blk.Rows(), blk.Bytes())
				}
				continue
			}
			if blk.Rows() != 1 {
				t.Fatalf("%s: %d rows after one Append", convertFuzzTypes[i], blk.Rows())
			}
			_ = blk.ColumnData(0)
			if n := blk.Native(0); n != nil && n.Rows() != 1 {
				t.Fatalf("%s from %s: native column has %d rows", convertFuzzTypes[i], value, n.Rows())
			}
		}
	})
}

// FuzzSplitWrapped: the byte-level framing that finds the payload of a
// wrapped value without parsing the schema never claims a layout the value
// does not have: when it returns a payload that parses, the whole value is
// the JSON object {"schema": S, "payload": P} with that P. It runs twice per
// input, the second time with the schema in the cache.
func FuzzSplitWrapped(f *testing.F) {
	for _, wrapped := range []bool{true, false} {
		for _, e := range dbzBenchEvents(3, wrapped) {
			f.Add(e)
		}
	}
	for _, s := range []string{
		`{"schema":null,"payload":{"op":"c"}}`, `{"schema":{},"payload":{"a":1},"x":2}`, ` {"schema" :{"a":"}\""} ,"payload": [1] } `,
		`{"schema":{},"payload":1,"payload":2}`, `{"schema":{"a":[}]},"payload":{}}`, `{"schema":nul,"payload":{}}`, `{"schema":{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := schemaCache{keyIdx: map[string]int{"id": 0}, after: make([]connect.Sem, 1), before: make([]connect.Sem, 1)}
		for range 2 {
			payload, _, ok := c.splitWrapped(b)
			if !ok {
				continue
			}
			var pp, wp fastjson.Parser
			p, err := pp.ParseBytes(payload)
			if err != nil {
				continue // the caller then parses the whole value
			}
			w, err := wp.ParseBytes(b)
			if err != nil {
				t.Fatalf("payload %q split from %q, which is not JSON: %v", payload, b, err)
			}
			o, err := w.Object()
			if err != nil || o.Len() != 2 || o.Get("schema") == nil || o.Get("payload") == nil {
				t.Fatalf("payload %q split from %q, which is not {schema, payload}", payload, b)
			}
			if got, want := string(o.Get("payload").MarshalTo(nil)), string(p.MarshalTo(nil)); got != want {
				t.Fatalf("split payload %s, but the value's payload is %s", want, got)
			}
		}
	})
}

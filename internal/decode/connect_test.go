package decode

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/connect"
	"sink/internal/route"
)

// connectEnvelope is a record value as Kafka Connect's JsonConverter writes
// it with schemas.enable=true: a struct of the required int32 id and the
// field v of schema field (its "field" added here), payload id 1 and v.
func connectEnvelope(field, v string) []byte {
	f := strings.TrimSuffix(field, "}") + `,"field":"v"}`
	return []byte(`{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},` + f +
		`],"optional":false,"name":"t.Value"},"payload":{"id":1,"v":` + v + `}}`)
}

// connectRows appends values in format f into a table of cols (mapping:
// column -> source) and returns each row's columns as norm gives them, or
// the first error; a record without a row (ErrSkip) is passed over.
func connectRows(t *testing.T, f route.Format, cols []chschema.ColumnSchema, mapping map[string]string, values ...[]byte) ([]map[string]any, error) {
	t.Helper()
	p, err := Compile(f, cols, mapping)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	blk := p.NewBlock()
	var rows []map[string]any
	for i, v := range values {
		before := blk.Bytes()
		if err := p.Append(blk, &kgo.Record{Topic: "t", Offset: int64(i), Value: v}); err != nil {
			if blk.Rows() != len(rows) || blk.Bytes() != before {
				t.Fatalf("failed Append changed the block: rows %d bytes %d", blk.Rows(), blk.Bytes())
			}
			if errors.Is(err, ErrSkip) {
				continue
			}
			return rows, err
		}
		row := map[string]any{}
		for c, col := range blk.Columns() {
			row[col.Name] = norm(chtype.Parse(col.Type), reflect.ValueOf(blk.ColumnData(c)).Index(len(rows)).Interface())
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// TestConnectTypes pins what each Connect type and logical type becomes, as
// the JsonConverter writes its values, in the columns a user would pick for
// it, read from the envelope by format json (detected) and connect-json.
func TestConnectTypes(t *testing.T) {
	const (
		decimal2  = `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"12"}}`
		decimal0  = `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"0"}}`
		decimal10 = `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"10"}}`
		date      = `{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1}`
		tod       = `{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Time","version":1}`
		ts        = `{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1}`
	)
	cases := []struct {
		schema, value string
		want          map[string]any // column type -> value, or errPrefix + part of the reason
	}{
		{`{"type":"boolean"}`, `true`, map[string]any{"UInt8": uint8(1), "Bool": true, "String": "true"}},
		{`{"type":"int8"}`, `-128`, map[string]any{"Int8": int8(-128), "Int16": int16(-128), "String": "-128", "UInt8": errPrefix + ""}},
		{`{"type":"int16"}`, `32767`, map[string]any{"Int16": int16(32767), "Int8": errPrefix + "out of range"}},
		{`{"type":"int32"}`, `-2147483648`, map[string]any{"Int32": int32(-2147483648), "Int64": int64(-2147483648)}},
		{`{"type":"int64"}`, `9223372036854775807`, map[string]any{"Int64": int64(9223372036854775807), "String": "9223372036854775807",
			"Decimal(19, 0)": "9223372036854775807", "UInt64": uint64(9223372036854775807)}},
		{`{"type":"float"}`, `1.5`, map[string]any{"Float32": float32(1.5), "Float64": 1.5, "Decimal(4, 1)": "1.5"}},
		{`{"type":"double"}`, `"Infinity"`, map[string]any{"Float64": math.Inf(1), "String": "Infinity"}},
		{`{"type":"double"}`, `"-Infinity"`, map[string]any{"Float32": float32(math.Inf(-1))}},
		{`{"type":"string"}`, `"héllo \"q\""`, map[string]any{"String": `héllo "q"`, "LowCardinality(String)": `héllo "q"`}},
		// bytes: base64, the bytes into String and FixedString.
		{`{"type":"bytes"}`, `"AP8Q"`, map[string]any{"String": "\x00\xff\x10", "FixedString(3)": "\x00\xff\x10",
			"FixedString(2)": errPrefix + ""}},
		{`{"type":"bytes"}`, `""`, map[string]any{"String": ""}},
		// Decimal: base64 of the unscaled two's-complement value (12345.67,
		// -1, a 20-byte value), or a number (decimal.format=NUMERIC).
		{decimal2, `"EtaH"`, map[string]any{"Decimal(12, 2)": "12345.67", "Decimal(18, 4)": "12345.67", "String": "12345.67",
			"Float64": 12345.67, "Decimal(6, 2)": errPrefix + "Decimal(6, 2)", "Int32": errPrefix + ""}},
		{decimal0, `"/w=="`, map[string]any{"Decimal(9, 0)": "-1", "Int32": int32(-1), "String": "-1"}},
		{decimal10, `"AQAAAAAAAAAAAAAAAAAAAAAAAAAA"`, map[string]any{"String": "146150163733090291820368483271628301965.5932542976",
			"Decimal(76, 10)": "146150163733090291820368483271628301965.5932542976"}}, // 2^160 / 10^10
		{decimal2, `12345.67`, map[string]any{"Decimal(12, 2)": "12345.67", "String": "12345.67"}},
		// Date: days since 1970-01-01.
		{date, `19860`, map[string]any{"Date": "2024-05-17", "Date32": "2024-05-17", "String": "2024-05-17",
			"DateTime64(3)": "2024-05-17T00:00:00Z", "Int32": int32(19860)}},
		{date, `-25567`, map[string]any{"Date32": "1900-01-01", "String": "1900-01-01", "Date": errPrefix + "out of range"}},
		// Time: ms since midnight, 24:00:00 included (PostgreSQL's end of day).
		{tod, `47655123`, map[string]any{"String": "13:14:15.123", "Int32": int32(47655123), "Int64": int64(47655123),
			"DateTime64(3)": "1970-01-01T13:14:15.123Z", "Date": errPrefix + "time of day"}},
		{tod, `86400000`, map[string]any{"String": "24:00:00", "DateTime64(3)": "1970-01-02T00:00:00Z"}},
		{tod, `86400001`, map[string]any{"String": errPrefix + "not a time of day"}},
		// Timestamp: ms since the epoch, before 1970 too.
		{ts, `1715949296789`, map[string]any{"DateTime64(3)": "2024-05-17T12:34:56.789Z", "DateTime": "2024-05-17 12:34:56",
			"String": "2024-05-17 12:34:56.789", "Int64": int64(1715949296789), "Date": "2024-05-17"}},
		{ts, `-1`, map[string]any{"DateTime64(3)": "1969-12-31T23:59:59.999Z", "String": "1969-12-31 23:59:59.999",
			"DateTime": errPrefix + "out of range"}},
		// Optional fields: null is NULL, or the type's default.
		{`{"type":"int32","optional":true}`, `null`, map[string]any{"Nullable(Int32)": nil, "Int32": int32(0)}},
		{date, `null`, map[string]any{"Nullable(Date32)": nil}},
		{decimal2, `null`, map[string]any{"Nullable(Decimal(12, 2))": nil}},
	}
	for _, f := range []route.Format{route.JSON, route.ConnectJSON} {
		for _, c := range cases {
			for colType, want := range c.want {
				name := fmt.Sprintf("%s: %s %s into %s", f, c.schema, c.value, colType)
				cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "v", Type: colType}}
				rows, err := connectRows(t, f, cols, nil, connectEnvelope(c.schema, c.value))
				if w, ok := want.(string); ok && strings.HasPrefix(w, errPrefix) {
					if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(w, errPrefix)) {
						t.Errorf("%s: got %v, %v; want an error with %q", name, rows, err, strings.TrimPrefix(w, errPrefix))
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if got := rows[0]["v"]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", name, got, want)
				}
			}
		}
	}
}

// TestConnectNaN: Jackson writes NaN as the text "NaN", which a Float column
// reads as NaN.
func TestConnectNaN(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "v", Type: "Float64"}}
	rows, err := connectRows(t, route.JSON, cols, nil, connectEnvelope(`{"type":"double","optional":true}`, `"NaN"`))
	if err != nil || !math.IsNaN(rows[0]["v"].(float64)) {
		t.Fatalf("NaN: %v %v", rows, err)
	}
}

// connectNested is a struct with a nested struct (a Date, a Decimal and
// a struct inside), an array of Decimals, an array of Dates, an array of
// optional int32, a map of Decimals by string and a map keyed by int32
// (pairs), as the JsonConverter writes them.
var connectNested = []byte(`{"schema":{"type":"struct","optional":false,"fields":[
 {"type":"int32","optional":false,"field":"id"},
 {"type":"struct","optional":true,"name":"Addr","field":"addr","fields":[
  {"type":"string","optional":false,"field":"city"},
  {"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","field":"since"},
  {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"},"field":"rent"},
  {"type":"struct","optional":true,"field":"zip","fields":[{"type":"int32","optional":false,"field":"code"}]}]},
 {"type":"array","optional":false,"field":"prices","items":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}}},
 {"type":"array","optional":false,"field":"days","items":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date"}},
 {"type":"array","optional":false,"field":"ints","items":{"type":"int32","optional":true}},
 {"type":"map","optional":false,"field":"rates","keys":{"type":"string","optional":false},"values":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}}},
 {"type":"map","optional":false,"field":"names","keys":{"type":"int32","optional":false},"values":{"type":"string","optional":true}},
 {"type":"array","optional":true,"field":"stamps","items":{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp"}}]},
"payload":{"id":7,"addr":{"city":"Köln","since":19860,"rent":"EtaH","zip":{"code":50667}},
 "prices":["AJY=","/x8="],"days":[0,-1],"ints":[1,null,3],"rates":{"eur":"AJY="},"names":[[1,"a"],[2,null]],
 "stamps":[1715949296789]}}`)

// TestConnectNested: paths into structs, arrays and maps, and structs,
// arrays and maps read whole, with the logical types inside converted.
func TestConnectNested(t *testing.T) {
	cols := []chschema.ColumnSchema{
		{Name: "id", Type: "Int32"}, {Name: "city", Type: "String"}, {Name: "since", Type: "Date"},
		{Name: "rent", Type: "Decimal(9, 2)"}, {Name: "code", Type: "Int32"}, {Name: "first_price", Type: "String"},
		{Name: "eur", Type: "Decimal(5, 2)"},
		{Name: "addr", Type: "String"}, {Name: "addr_t", Type: "Tuple(city String, since Date, rent Decimal(9, 2), zip Tuple(code Int32))"},
		{Name: "addr_j", Type: "JSON"},
		{Name: "prices", Type: "Array(Decimal(5, 2))"}, {Name: "days", Type: "Array(Date32)"}, {Name: "ints", Type: "Array(Nullable(Int32))"},
		{Name: "rates", Type: "Map(String, Decimal(5, 2))"}, {Name: "names", Type: "Map(Int32, Nullable(String))"},
		{Name: "names_s", Type: "String"}, {Name: "stamps", Type: "Array(DateTime64(3))"}, {Name: "stamps_s", Type: "Array(String)"},
	}
	mapping := map[string]string{"city": "addr.city", "since": "addr.since", "rent": "addr.rent", "code": "addr.zip.code",
		"first_price": "prices.0", "eur": "rates.eur", "addr_t": "addr", "addr_j": "addr", "names_s": "names", "stamps_s": "stamps"}
	want := map[string]any{
		"id": int32(7), "city": "Köln", "since": "2024-05-17", "rent": "12345.67", "code": int32(50667), "first_price": "1.50",
		"eur":    "1.5",
		"addr":   `{"city":"Köln","since":"2024-05-17","rent":12345.67,"zip":{"code":50667}}`,
		"addr_t": []any{"Köln", "2024-05-17", "12345.67", []any{int32(50667)}},
		"addr_j": `{"city":"Köln","since":"2024-05-17","rent":12345.67,"zip":{"code":50667}}`,
		"prices": []any{"1.5", "-2.25"}, "days": []any{"1970-01-01", "1969-12-31"}, "ints": []any{int32(1), nil, int32(3)},
		"rates": [][2]any{{"eur", "1.5"}}, "names": [][2]any{{int32(1), "a"}, {int32(2), nil}},
		"names_s": `{"1":"a","2":null}`, "stamps": []any{"2024-05-17T12:34:56.789Z"}, "stamps_s": []any{"2024-05-17T12:34:56.789Z"},
	}
	for _, f := range []route.Format{route.JSON, route.ConnectJSON} {
		rows, err := connectRows(t, f, cols, mapping, connectNested)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for c, w := range want {
			if got := rows[0][c]; !reflect.DeepEqual(got, w) {
				t.Errorf("%s: %s = %#v, want %#v", f, c, got, w)
			}
		}
	}
}

// TestConnectMismatch: a payload its own schema does not describe is a bad
// record naming the field and the cause; so is a schema Connect would not
// read.
func TestConnectMismatch(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "v", Type: "String"}}
	for _, c := range []struct{ schema, value, want string }{
		{`{"type":"int32","optional":true}`, `"7"`, `v: want an integer within int32 for int32, got "7"`},
		{`{"type":"int8","optional":true}`, `300`, `v: want an integer within int8`},
		{`{"type":"int64","optional":true}`, `1.5`, `v: want an integer within int64`},
		{`{"type":"int32","optional":false}`, `null`, `v: null for a required int32 without a default`},
		{`{"type":"boolean","optional":true}`, `"true"`, `v: want true or false`},
		{`{"type":"double","optional":true}`, `"nan"`, `v: want a number, "NaN", "Infinity" or "-Infinity"`},
		{`{"type":"string","optional":true}`, `5`, `v: want a string for string, got 5`},
		{`{"type":"bytes","optional":true}`, `"!!!"`, `v: want a base64 string for bytes`},
		{`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}}`, `true`,
			`v: want a base64 string or a number for bytes (org.apache.kafka.connect.data.Decimal), got true`},
		{`{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date"}`, `"2024-05-17"`,
			`v: want an integer within int32 for int32 (org.apache.kafka.connect.data.Date)`},
		{`{"type":"array","optional":true,"items":{"type":"int32","optional":false}}`, `[1,null]`, `v[1]: null for a required int32`},
		{`{"type":"array","optional":true,"items":{"type":"int32"}}`, `{"a":1}`, `v: want an array for array`},
		{`{"type":"struct","optional":true,"fields":[{"type":"struct","optional":false,"field":"a","fields":[{"type":"int16","field":"b"}]}]}`,
			`{"a":{"b":"x"}}`, `v.a.b: want an integer within int16`},
		{`{"type":"struct","optional":true,"fields":[]}`, `[]`, `v: want an object for struct`},
		{`{"type":"map","optional":true,"keys":{"type":"string"},"values":{"type":"int32"}}`, `{"a":"x"}`, `v.a: want an integer`},
		{`{"type":"map","optional":true,"keys":{"type":"int32"},"values":{"type":"int32"}}`, `[[1]]`, `v[0]: want a [key, value] pair, got [1]`},
		{`{"type":"map","optional":true,"keys":{"type":"int32"},"values":{"type":"int32"}}`, `[["k",1]]`, `v[0] key: want an integer`},
		{`{"type":"map","optional":true,"keys":{"type":"int32"},"values":{"type":"int32"}}`, `{"1":1}`, `v: want an array of [key, value] pairs`},
		// Schemas Connect would not read.
		{`{"type":"uuid","optional":true}`, `"x"`, `with a schema Connect would not read: field "v": unknown type "uuid"`},
		{`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal"}`, `"AA=="`,
			`field "v": org.apache.kafka.connect.data.Decimal without an integer scale parameter`},
		{`{"type":"string","optional":true,"name":"org.apache.kafka.connect.data.Date"}`, `"x"`,
			`field "v": org.apache.kafka.connect.data.Date is carried as int32, this schema's type is string`},
		{`{"type":"array","optional":true}`, `[]`, `field "v": a array schema without items`},
		{`{"type":"struct","optional":true,"fields":{}}`, `{}`, `field "v": a struct schema whose fields are not an array`},
		{`{"type":"struct","optional":true,"fields":[{"type":"int32"}]}`, `{}`, `field "v": field 0 has no name`},
	} {
		_, err := connectRows(t, route.JSON, cols, nil, connectEnvelope(c.schema, c.value))
		var re *RecordError
		if !errors.As(err, &re) || re.Column != "" || !strings.Contains(re.Reason, c.want) {
			t.Errorf("%s %s: %v; want a bad record with %q", c.schema, c.value, err, c.want)
		}
	}
	// A field the schema does not name is ignored, as Connect ignores it.
	v := []byte(`{"schema":{"type":"struct","fields":[{"type":"int32","field":"id"}]},"payload":{"id":1,"v":"x","w":[1]}}`)
	if rows, err := connectRows(t, route.JSON, cols, nil, v); err != nil || rows[0]["v"] != "x" {
		t.Errorf("a field without a schema: %v %v", rows, err)
	}
}

// TestConnectDetection: format json reads envelopes and plain records
// alike, record by record; a route that names the envelope reads records
// as written; connect-json refuses what is not an envelope.
func TestConnectDetection(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "v", Type: "Nullable(Date32)"}}
	date := `{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date"}`
	wrapped := connectEnvelope(date, "19860")
	plain := []byte(`{"id":2,"v":"2024-05-18"}`)
	schemaless := []byte(`{"schema":null,"payload":{"id":3,"v":"2024-05-19"}}`)
	rows, err := connectRows(t, route.JSON, cols, nil, wrapped, plain, schemaless, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprint(r["id"], " ", r["v"]))
	}
	if want := "1 2024-05-17|2 2024-05-18|3 2024-05-19|1 2024-05-17"; strings.Join(got, "|") != want {
		t.Errorf("json, mixed topic: %s, want %s", strings.Join(got, "|"), want)
	}

	// connect-json: the envelope, with or without a schema, and nothing else.
	if rows, err := connectRows(t, route.ConnectJSON, cols, nil, wrapped, schemaless); err != nil || len(rows) != 2 {
		t.Errorf("connect-json: %v %v", rows, err)
	}
	if _, err := connectRows(t, route.ConnectJSON, cols, nil, plain); err == nil || !strings.Contains(err.Error(), connect.NotEnvelope) {
		t.Errorf("connect-json, a plain record: %v", err)
	}
	// A route whose columns read the envelope itself reads it as written.
	lit := []chschema.ColumnSchema{{Name: "raw", Type: "String"}, {Name: "kind", Type: "String"}}
	rows, err = connectRows(t, route.JSON, lit, map[string]string{"raw": "payload.v", "kind": "schema.type"}, wrapped)
	if err != nil || rows[0]["raw"] != "19860" || rows[0]["kind"] != "struct" {
		t.Errorf("json reading payload.v: %v %v", rows, err)
	}
	if _, err := Compile(route.ConnectJSON, lit, map[string]string{"raw": "payload.v"}); err == nil || !strings.Contains(err.Error(), "write the path below it") {
		t.Errorf("connect-json with payload.v: %v", err)
	}
	// A null payload is a tombstone; a payload that is no object is bad.
	p, err := Compile(route.JSON, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	if err := p.Append(blk, &kgo.Record{Value: []byte(`{"schema":{"type":"struct","fields":[],"optional":true},"payload":null}`)}); !errors.Is(err, ErrSkip) {
		t.Errorf("null payload: %v, want a skip", err)
	}
	p.SetPolicy(Policy{TombstoneBad: true})
	if err := p.Append(blk, &kgo.Record{Value: []byte(`{"schema":null,"payload":null}`)}); err == nil || errors.Is(err, ErrSkip) {
		t.Errorf("null payload, on_tombstone bad_record: %v", err)
	}
	err = p.Append(blk, &kgo.Record{Value: []byte(`{"schema":{"type":"int32"},"payload":5}`)})
	if err == nil || !strings.Contains(err.Error(), "payload is a int32: the sink reads the fields of a struct") {
		t.Errorf("an int32 payload: %v", err)
	}
}

// TestConnectSchemaChanges: each record is read by its own schema; a field
// added midway reaches its column, and fields no column reads are counted
// as drift, with the default the schema declares.
func TestConnectSchemaChanges(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "v", Type: "Nullable(String)"}}
	v1 := []byte(`{"schema":{"type":"struct","fields":[{"type":"int32","field":"id"}]},"payload":{"id":1}}`)
	v2 := []byte(`{"schema":{"type":"struct","fields":[{"type":"int32","field":"id"},{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","field":"v"},{"type":"int32","optional":true,"default":7,"field":"w"}]},"payload":{"id":2,"v":0,"w":7}}`)
	p, err := Compile(route.JSON, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for i, v := range [][]byte{v1, v2, v1, v2} {
		if err := p.Append(blk, &kgo.Record{Value: v}); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		un := p.LastUnmapped()
		if i%2 == 1 && (len(un) != 1 || un[0].Name != "w" || un[0].Default == nil || un[0].Default.JSON != "7") {
			t.Errorf("record %d: unmapped %+v, want w with default 7", i, un)
		}
	}
	got := fmt.Sprint(norm(chtype.Parse("Nullable(String)"), blk.ColumnData(1).([]*string)[0]), " ",
		norm(chtype.Parse("Nullable(String)"), blk.ColumnData(1).([]*string)[1]))
	if got != "<nil> 1970-01-01" {
		t.Errorf("v = %s", got)
	}
}

// connectCapture is one record captured from Kafka Connect 4.3 and
// Debezium 3.6.1 (testdata/connect, PostgreSQL 15 table t; the INSERTs are
// in TestConnectCaptured).
type connectCapture struct {
	Key, Value json.RawMessage
}

func readCaptures(t testing.TB, name string) []*kgo.Record {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "connect", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*kgo.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c connectCapture
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: "cjcap.public.t", Offset: int64(len(out)), Key: c.Key}
		if string(c.Value) != "null" {
			r.Value = c.Value
		}
		out = append(out, r)
	}
	return out
}

// TestConnectCaptured reads records the real JsonConverter wrote (Kafka
// Connect 4.3, Debezium 3.6.1 from PostgreSQL 15) for this table:
//
//	CREATE TABLE t (id bigint PRIMARY KEY, i2 smallint, i4 integer, f4 real, f8 double precision,
//	  b boolean, dec numeric(12,2), num numeric, d date, tm time, tm3 time(3), ts timestamp,
//	  ts3 timestamp(3), tstz timestamptz, u uuid, j jsonb, ia integer[], ta text[], ba bytea,
//	  s text, dd numeric(5,2)[]);
//	INSERT INTO t VALUES (1, 7, -42, 1.5, 'NaN', true, 12345.67, 3.14159265358979, '2024-05-17',
//	  '13:14:15.123456', '01:02:03.456', '2024-05-17 12:34:56.789012', '1969-12-31 23:59:59.999',
//	  '2024-05-17 12:34:56+02', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a":[1,2,{"b":null}]}',
//	  '{1,NULL,3}', '{"x",NULL,"y z"}', '\x00ff10', 'héllo "q"', '{1.50,-2.25}');
//	INSERT INTO t (id) VALUES (2);
//	INSERT INTO t VALUES (3, -32768, 2147483647, '-Infinity', 'Infinity', false, -0.01,
//	  -123456789012345678901234567890.123456789, '1900-01-01', '24:00:00', '23:59:59.999',
//	  '1900-01-01 00:00:00', '2262-04-11 23:47:16.854', '1970-01-01 00:00:00+00',
//	  '00000000-0000-0000-0000-000000000000', '[]', '{}', '{}', '\x', '', '{}');
//	UPDATE t SET s = 'upd', dec = 0.5 WHERE id = 1; DELETE FROM t WHERE id = 3;
//
// captured three ways: unwrapped by ExtractNewRecordState with
// time.precision.mode=connect (Connect's Date, Time, Timestamp; deletes
// rewritten with __deleted, add.fields=lsn,op), the same with the
// converter's decimal.format=NUMERIC (a delete is the envelope with a null
// payload: no row), and the whole change event with Debezium's own time
// types (a delete, then a tombstone).
func TestConnectCaptured(t *testing.T) {
	wide := connectCols("id Int64", "i2 Nullable(Int16)", "i4 Nullable(Int32)", "f4 Nullable(Float32)", "f8 Nullable(String)",
		"b Nullable(Bool)", "dec Nullable(Decimal(12, 2))", "num Nullable(String)", "d Nullable(Date32)", "tm Nullable(String)",
		"tm3 Nullable(Int32)", "ts Nullable(DateTime64(6))", "ts3 Nullable(String)", "tstz Nullable(DateTime64(6))",
		"u Nullable(UUID)", "j Nullable(String)", "ia Array(Nullable(Int32))", "ta Array(Nullable(String))", "ba Nullable(String)",
		"s Nullable(String)", "dd Array(Decimal(5, 2))")
	row1 := map[string]any{"id": int64(1), "i2": int16(7), "i4": int32(-42), "f4": float32(1.5), "f8": "NaN", "b": true,
		"dec": "12345.67", "num": "3.14159265358979", "d": "2024-05-17", "tm3": int32(3723456),
		"ts3": "1969-12-31 23:59:59.999", "tstz": "2024-05-17T10:34:56Z",
		"u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": `{"a": [1, 2, {"b": null}]}`, "ia": []any{int32(1), nil, int32(3)},
		"ta": []any{"x", nil, "y z"}, "ba": "\x00\xff\x10", "s": `héllo "q"`, "dd": []any{"1.5", "-2.25"}}
	row2 := map[string]any{"id": int64(2), "i2": nil, "dec": nil, "d": nil, "tm": nil, "ts": nil, "ia": []any{}, "dd": []any{}}
	row3 := map[string]any{"id": int64(3), "i2": int16(-32768), "i4": int32(2147483647), "f4": float32(math.Inf(-1)), "f8": "Infinity",
		"b": false, "dec": "-0.01", "num": "-123456789012345678901234567890.123456789", "d": "1900-01-01", "tm": "24:00:00",
		"tm3": int32(86399999), "ts": "1900-01-01T00:00:00Z", "ts3": "2262-04-11 23:47:16.854", "tstz": "1970-01-01T00:00:00Z",
		"u": "00000000-0000-0000-0000-000000000000", "j": "[]", "ia": []any{}, "ba": "", "s": "", "dd": []any{}}

	t.Run("unwrapped, Connect's time types", func(t *testing.T) {
		cols := append(wide, connectCols("__deleted String", "__lsn UInt64", "__op String")...)
		recs := readCaptures(t, "pg15_dbz361_unwrapped_connect_time.jsonl")
		rows := appendAll(t, route.JSON, cols, nil, recs)
		// Connect's Time and Timestamp hold milliseconds: µs are cut.
		check(t, rows[0], row1, map[string]any{"tm": "13:14:15.123", "ts": "2024-05-17T12:34:56.789Z", "__op": "r", "__deleted": "false"})
		check(t, rows[1], row2, nil)
		check(t, rows[2], row3, nil)
		check(t, rows[3], map[string]any{"id": int64(1), "s": "upd", "dec": "0.5", "__op": "u"}, nil)
		check(t, rows[4], map[string]any{"id": int64(3), "__deleted": "true", "__op": "d"}, nil)
		if rows[4]["__lsn"].(uint64) <= rows[0]["__lsn"].(uint64) {
			t.Errorf("__lsn of the delete %v, of the snapshot %v", rows[4]["__lsn"], rows[0]["__lsn"])
		}
	})
	t.Run("unwrapped, numeric decimals", func(t *testing.T) {
		recs := readCaptures(t, "pg15_dbz361_unwrapped_decimal_numeric.jsonl")
		rows := appendAll(t, route.ConnectJSON, wide, nil, recs)
		check(t, rows[0], row1, map[string]any{"tm": "13:14:15.123"})
		check(t, rows[2], row3, nil)
		if len(rows) != 4 {
			t.Errorf("%d rows, want 4 (the delete has a null payload)", len(rows))
		}
	})
	t.Run("change events, Debezium's time types", func(t *testing.T) {
		mapping := map[string]string{"op": "op", "lsn": "source.lsn", "src": "source", "before_id": "before.id"}
		for _, c := range wide {
			mapping[c.Name] = "after." + c.Name
		}
		cols := append(wide, connectCols("op String", "lsn UInt64", "src Tuple(connector String, table String)", "before_id Nullable(Int64)")...)
		cols[0].Type = "Nullable(Int64)" // a delete has no after image
		recs := readCaptures(t, "pg15_dbz361_envelope_adaptive.jsonl")
		rows := appendAll(t, route.JSON, cols, mapping, recs)
		check(t, rows[0], row1, map[string]any{"tm": "13:14:15.123456", "ts": "2024-05-17T12:34:56.789012Z", "op": "r",
			"src": []any{"postgresql", "t"}})
		check(t, rows[2], row3, map[string]any{"tm": "24:00:00"})
		check(t, rows[4], map[string]any{"id": nil, "before_id": int64(3), "op": "d"}, nil)
		if len(rows) != 5 {
			t.Errorf("%d rows, want 5 (and the tombstone skipped)", len(rows))
		}
	})
}

// appendAll appends recs (tombstones skipped) and returns the rows.
func appendAll(t *testing.T, f route.Format, cols []chschema.ColumnSchema, mapping map[string]string, recs []*kgo.Record) []map[string]any {
	t.Helper()
	var values [][]byte
	for _, r := range recs {
		if r.Value != nil {
			values = append(values, r.Value)
		}
	}
	rows, err := connectRows(t, f, cols, mapping, values...)
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return rows
}

// check compares the row's columns named in want (then in over, which
// wins) with their values.
func check(t *testing.T, row map[string]any, want, over map[string]any) {
	t.Helper()
	all := map[string]any{}
	for k, v := range want {
		all[k] = v
	}
	for k, v := range over {
		all[k] = v
	}
	for k, w := range all {
		if got, ok := row[k]; !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("id %v: %s = %#v, want %#v", row["id"], k, got, w)
		}
	}
}

// connectCols turns "name Type" pairs into columns.
func connectCols(defs ...string) []chschema.ColumnSchema {
	out := make([]chschema.ColumnSchema, len(defs))
	for i, d := range defs {
		name, typ, _ := strings.Cut(d, " ")
		out[i] = chschema.ColumnSchema{Name: name, Type: typ}
	}
	return out
}

// connectBenchPlan is the captured unwrapped table read from its envelope
// (format json), and its records.
func connectBenchPlan(tb testing.TB) (*Plan, []*kgo.Record) {
	cols := connectCols("id Int64", "i2 Nullable(Int16)", "i4 Nullable(Int32)", "f4 Nullable(Float32)", "f8 Nullable(Float64)",
		"b Nullable(Bool)", "dec Nullable(Decimal(12, 2))", "num Nullable(String)", "d Nullable(Date32)", "tm Nullable(String)",
		"tm3 Nullable(Int32)", "ts Nullable(DateTime64(6))", "ts3 Nullable(DateTime64(3))", "tstz Nullable(DateTime64(6))",
		"u Nullable(UUID)", "j Nullable(String)", "ia Array(Nullable(Int32))", "ta Array(Nullable(String))", "ba Nullable(String)",
		"s Nullable(String)", "dd Array(Decimal(5, 2))", "__deleted String", "__lsn UInt64", "__op String")
	p, err := Compile(route.JSON, cols, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var recs []*kgo.Record
	for _, r := range readCaptures(tb, "pg15_dbz361_unwrapped_connect_time.jsonl") {
		if r.Value != nil && !strings.Contains(string(r.Value), `"id":3,`) { // 2262 is beyond DateTime64(3)'s range
			recs = append(recs, r)
		}
	}
	return p, recs
}

// TestConnectAppendDoesNotAllocate: once its schema is compiled, an
// envelope is read without allocating, the Decimal array inside it
// rewritten too.
func TestConnectAppendDoesNotAllocate(t *testing.T) {
	p, recs := connectBenchPlan(t)
	blk := p.NewBlock()
	i := 0
	next := func() {
		if blk.Rows() == 2000 {
			blk.Reset()
		}
		if err := p.Append(blk, recs[i%len(recs)]); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for range 6000 { // warm up: schema compiled, buffers grown
		next()
	}
	if allocs := testing.AllocsPerRun(2000, next); allocs > 0.1 {
		t.Fatalf("%.2f allocations per record", allocs)
	}
}

// BenchmarkConnectAppend: a captured envelope of 24 columns (3 KB, most of
// it the schema) into a table of every type in it.
func BenchmarkConnectAppend(b *testing.B) {
	p, recs := connectBenchPlan(b)
	blk := p.NewBlock()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if blk.Rows() >= 10000 {
			blk.Reset()
		}
		r := recs[n%len(recs)]
		n++
		b.SetBytes(int64(len(r.Value)))
		if err := p.Append(blk, r); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConnectHostileSchemas: a schema nested past the bound is a bad
// record, and the cache of compiled schemas stays within its bounds
// however many distinct schemas the records carry.
func TestConnectHostileSchemas(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","items":`, connect.MaxSchemaDepth+1) + `{"type":"int8"}` + strings.Repeat("}", connect.MaxSchemaDepth+1)
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "v", Type: "String"}}
	if _, err := connectRows(t, route.JSON, cols, nil, connectEnvelope(deep, "[]")); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("nested deeper than %d", connect.MaxSchemaDepth)) {
		t.Errorf("a schema %d arrays deep: %v", connect.MaxSchemaDepth+1, err)
	}
	p, err := Compile(route.JSON, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	doc := strings.Repeat("x", 64<<10) // 64 KiB of doc per schema: 4 MiB holds 63 of them
	for i := range 300 {
		field := fmt.Sprintf(`{"type":"string","optional":true,"doc":"%d%s"}`, i, doc)
		if err := p.Append(blk, &kgo.Record{Value: connectEnvelope(field, `"x"`)}); err != nil {
			t.Fatal(err)
		}
	}
	// The bounds of the cache are checked on the same schemas in the
	// connect package's TestSchemaCacheBounded.
	if blk.Rows() != 300 {
		t.Errorf("%d rows", blk.Rows())
	}
}

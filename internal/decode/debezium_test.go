package decode

import (
	"encoding/base64"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/decode/connect"
	"sink/internal/route"
)

// fixture reads a hand-written Debezium message from testdata/debezium.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "debezium", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dbzRow compiles cols (plus _version UInt64 and _deleted UInt8 unless
// cols has them) with mapping, appends one record and returns the row by
// column name, normalized as norm does.
func dbzRow(t *testing.T, cols []chschema.ColumnSchema, mapping map[string]string, r *kgo.Record) (map[string]any, error) {
	t.Helper()
	has := map[string]bool{}
	for _, c := range cols {
		has[c.Name] = true
	}
	cols = cols[:len(cols):len(cols)] // appending must not write into the caller's array
	if !has["_version"] {
		cols = append(cols, chschema.ColumnSchema{Name: "_version", Type: "UInt64"})
	}
	if !has["_deleted"] {
		cols = append(cols, chschema.ColumnSchema{Name: "_deleted", Type: "UInt8"})
	}
	p, err := Compile(route.Debezium, cols, mapping)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	blk := p.NewBlock()
	if err := p.Append(blk, r); err != nil {
		if blk.Rows() != 0 || blk.Bytes() != 0 {
			t.Fatalf("failed Append left rows=%d bytes=%d", blk.Rows(), blk.Bytes())
		}
		return nil, err
	}
	if blk.Rows() != 1 {
		t.Fatalf("Rows() = %d, want 1", blk.Rows())
	}
	row := map[string]any{}
	for i, c := range blk.Columns() {
		row[c.Name] = firstRow(c.Type, blk.ColumnData(i))
	}
	return row, nil
}

var customerCols = []chschema.ColumnSchema{
	{Name: "id", Type: "Int32"},
	{Name: "first_name", Type: "String"},
	{Name: "last_name", Type: "String"},
	{Name: "email", Type: "String"},
	{Name: "op", Type: "LowCardinality(String)"},
	{Name: "tbl", Type: "String"},
	{Name: "_version", Type: "UInt64"},
	{Name: "_deleted", Type: "UInt8"},
	{Name: "_offset", Type: "UInt64"},
}

func TestDebeziumChangeEvents(t *testing.T) {
	mapping := map[string]string{"op": "$op", "tbl": "$source.table"}
	f := func(value, key string, want map[string]any) {
		t.Helper()
		r := &kgo.Record{Topic: "PostgreSQL_server.inventory.customers", Partition: 1, Offset: 42, Value: fixture(t, value)}
		if key != "" {
			r.Key = fixture(t, key)
		}
		got, err := dbzRow(t, customerCols, mapping, r)
		if err != nil {
			t.Errorf("%s: %v", value, err)
			return
		}
		want["_offset"] = uint64(42)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", value, got, want)
		}
	}
	row := func(id int32, first, last, email, op string, version uint64, deleted uint8) map[string]any {
		return map[string]any{"id": id, "first_name": first, "last_name": last, "email": email, "op": op,
			"tbl": "customers", "_version": version, "_deleted": deleted}
	}

	// Inserts and snapshot reads write the after image, versioned by source.lsn.
	f("pg_customers_insert.json", "", row(1, "Anne", "Kretchmar", "annek@noanswer.org", "c", 24023128, 0))
	f("pg_customers_insert_bare.json", "", row(1, "Anne", "Kretchmar", "annek@noanswer.org", "c", 24023128, 0))
	f("pg_customers_snapshot.json", "", row(2, "George", "Bailey", "gbailey@foobar.com", "r", 24023000, 0))
	// Updates write the after image, not the before.
	f("pg_customers_update.json", "", row(1, "Anne Marie", "Kretchmar", "annek@noanswer.org", "u", 24023300, 0))
	f("pg_customers_update_bare.json", "", row(1, "Anne Marie", "Kretchmar", "annek@noanswer.org", "u", 24023300, 0))
	// Deletes write the before image with the marker set; with REPLICA
	// IDENTITY DEFAULT the before image has only the key.
	f("pg_customers_delete.json", "", row(1, "Anne Marie", "Kretchmar", "annek@noanswer.org", "d", 46523128, 1))
	f("pg_customers_delete_default_identity.json", "", row(1, "", "", "", "d", 46523128, 1))
	// Without a before image the record key (wrapped or bare) gives the row.
	f("pg_customers_delete_no_before.json", "pg_customers_key.json", row(1, "", "", "", "d", 46523128, 1))
	f("pg_customers_delete_no_before.json", "pg_customers_key_bare.json", row(1, "", "", "", "d", 46523128, 1))

	// MySQL has no LSN: ts_ms × 1e6 + offset mod 1e6.
	r := &kgo.Record{Topic: "mysql-server-1.inventory.orders", Offset: 3_000_042, Value: fixture(t, "mysql_orders_update_bare.json")}
	got, err := dbzRow(t, []chschema.ColumnSchema{{Name: "order_number", Type: "UInt32"}, {Name: "quantity", Type: "UInt16"}}, nil, r)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"order_number": uint32(10001), "quantity": uint16(3), "_version": uint64(1465581029523_000042), "_deleted": uint8(0)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mysql update:\n got %v\nwant %v", got, want)
	}
}

// The PostgreSQL fixtures replay one row's history: each later change must
// carry a larger version, and the delete the largest.
func TestDebeziumVersionsGrowAlongARowsHistory(t *testing.T) {
	var last uint64
	for i, name := range []string{"pg_customers_snapshot.json", "pg_customers_insert.json", "pg_customers_update.json", "pg_customers_delete.json"} {
		row, err := dbzRow(t, customerCols[:1], nil, &kgo.Record{Offset: int64(100 - i), Value: fixture(t, name)})
		if err != nil {
			t.Fatal(err)
		}
		v := row["_version"].(uint64)
		if v <= last {
			t.Fatalf("%s: version %d is not above the previous %d", name, v, last)
		}
		last = v
	}
}

func TestDebeziumVersion(t *testing.T) {
	f := func(value string, offset int64, want uint64, wantErr string) {
		t.Helper()
		row, err := dbzRow(t, []chschema.ColumnSchema{{Name: "id", Type: "Int32"}}, nil, &kgo.Record{Topic: "t", Offset: offset, Value: []byte(value)})
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%s: error %v, want %q", value, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Errorf("%s: %v", value, err)
			return
		}
		if got := row["_version"]; got != want {
			t.Errorf("%s: version %v, want %d", value, got, want)
		}
	}
	pg := func(lsn string) string {
		return `{"op":"c","after":{"id":1},"source":{"connector":"postgresql","lsn":` + lsn + `,"ts_ms":1700000000000},"ts_ms":1700000000001}`
	}
	f(pg("24023128"), 5, 24023128, "")
	f(pg("9223372036854775807"), 5, 9223372036854775807, "")
	f(pg("null"), 5, 0, `column "_version": PostgreSQL event without source.lsn, which is its version`)
	f(`{"op":"c","after":{"id":1},"source":{"connector":"postgresql"},"ts_ms":1}`, 5, 0, "PostgreSQL event without source.lsn")
	f(pg(`"24023128"`), 5, 0, `source.lsn "24023128" is not an LSN`)
	f(pg("-1"), 5, 0, `source.lsn -1 is not an LSN`)
	f(pg("9223372036854775808"), 5, 0, `is not an LSN`)
	// Other connectors: the envelope's ts_ms, else source.ts_ms, with the offset.
	f(`{"op":"c","after":{"id":1},"source":{"connector":"mysql","ts_ms":1000},"ts_ms":1700000000001}`, 1_234_567, 1700000000001_234567, "")
	f(`{"op":"c","after":{"id":1},"source":{"connector":"sqlserver","ts_ms":1700000000002},"ts_ms":null}`, 7, 1700000000002_000007, "")
	f(`{"op":"c","after":{"id":1},"source":{"connector":"mongodb","ts_ms":1700000000002}}`, 7, 1700000000002_000007, "")
	f(`{"op":"c","after":{"id":1},"ts_ms":0}`, 0, 0, "")
	f(`{"op":"c","after":{"id":1},"ts_ms":9223372036853}`, 999_999, 9223372036853_999999, "")
	f(`{"op":"c","after":{"id":1},"ts_ms":9223372036854}`, 0, 0, "ts_ms 9223372036854 is not a usable time in milliseconds")
	f(`{"op":"c","after":{"id":1},"ts_ms":-5}`, 0, 0, "ts_ms -5 is not a usable time")
	f(`{"op":"c","after":{"id":1},"ts_ms":"soon"}`, 0, 0, `ts_ms "soon" is not a usable time`)
	f(`{"op":"c","after":{"id":1}}`, 0, 0, "event has neither ts_ms nor source.ts_ms to version it by")
	f(`{"op":"c","after":{"id":1},"source":{"connector":"mysql"}}`, 0, 0, "event has neither ts_ms nor source.ts_ms")
}

func TestDebeziumSkips(t *testing.T) {
	p, err := Compile(route.Debezium, customerCols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	f := func(value []byte, what string) {
		t.Helper()
		err := p.Append(blk, &kgo.Record{Topic: "t", Offset: 1, Value: value})
		if !errors.Is(err, ErrSkip) || !strings.Contains(err.Error(), what) {
			t.Errorf("%q: error %v, want ErrSkip (%s)", value, err, what)
		}
		var re *RecordError
		if errors.As(err, &re) {
			t.Errorf("%q: a skip must not be a RecordError", value)
		}
		if blk.Rows() != 0 || blk.Bytes() != 0 {
			t.Fatalf("%q: skipped record left rows=%d bytes=%d", value, blk.Rows(), blk.Bytes())
		}
	}
	f(nil, "tombstone")
	f([]byte{}, "tombstone")
	f([]byte("null"), "tombstone")
	f([]byte(`{"schema":null,"payload":null}`), "tombstone")
	f(fixture(t, "dbz361_pg15_types_default_truncate.json"), "truncate") // captured from Debezium 3.6.1, PostgreSQL 15
	f([]byte(`{"op":"m","ts_ms":1,"source":{"connector":"postgresql","lsn":5},"message":{"prefix":"p","content":"aGk="}}`), "message")
}

func TestDebeziumBadRecords(t *testing.T) {
	f := func(value, key, want string) {
		t.Helper()
		r := &kgo.Record{Topic: "pg.public.customers", Partition: 2, Offset: 7, Value: []byte(value)}
		if key != "" {
			r.Key = []byte(key)
		}
		_, err := dbzRow(t, customerCols, nil, r)
		var re *RecordError
		if !errors.As(err, &re) {
			t.Errorf("%s: error %v, want a *RecordError", value, err)
			return
		}
		if errors.Is(err, ErrSkip) {
			t.Errorf("%s: a bad record must not match ErrSkip", value)
		}
		if got := err.Error(); got != want {
			t.Errorf("%s:\n got %s\nwant %s", value, got, want)
		}
	}
	const at = `decode topic "pg.public.customers" partition 2 offset 7: `
	f(`{"op":`, "", at+`invalid JSON: cannot parse JSON: cannot parse object: cannot parse object value: cannot parse empty string; unparsed tail: ""`)
	f(`[1]`, "", at+`invalid Debezium event: want a JSON object, got array`)
	f(`{"schema":{"fields":[},"payload":{"op":"c","after":{"id":1},"ts_ms":1}}`, "", at+`invalid JSON: cannot parse JSON: cannot parse object: cannot parse object value: cannot parse object: cannot parse object value: cannot parse array: cannot parse array value: cannot parse number: unexpected char: "}"; unparsed tail: "},\"payload\":{\"op\":\"c\",\"after\":{\"id\":1},\"ts_ms\":1}}"`)
	f(`{"schema":{},"payload":{"op":"c","after":{"id":1},"ts_ms":1}`, "", at+`invalid JSON: cannot parse JSON: cannot parse object: unexpected end of object; unparsed tail: ""`)
	f(`{"schema":{},"payload":[1]}`, "", at+`invalid Debezium event: payload is a JSON array, want an object`)
	f(`{"id":1,"name":"x"}`, "", at+`invalid Debezium event: no op field (is this topic a Debezium change topic?)`)
	f(`{"op":"x","after":{"id":1},"ts_ms":1}`, "", at+`invalid Debezium event: unknown op "x"`)
	f(`{"op":"c","after":null,"ts_ms":1}`, "", at+`invalid Debezium event: op c without an after image`)
	f(`{"op":"u","before":{"id":1},"ts_ms":1}`, "", at+`invalid Debezium event: op u without an after image`)
	f(`{"op":"d","before":null,"ts_ms":1}`, "", at+`invalid Debezium event: delete without a before image and without a record key`)
	f(`{"op":"d","before":null,"ts_ms":1}`, `{"id":`, at+`delete without a before image: record key is not JSON: cannot parse JSON: cannot parse object: cannot parse object value: cannot parse empty string; unparsed tail: ""`)
	f(`{"op":"d","before":null,"ts_ms":1}`, `42`, at+`delete without a before image: record key is a JSON number, want an object of key fields`)
	f(`{"op":"c","after":{"id":"x"},"ts_ms":1}`, "", at+`column "id": cannot parse "x" as Int32`)
}

// One column filled from one fixture field (or $ source), checked after the
// Debezium encodings and the column conversion.
func TestDebeziumTypes(t *testing.T) {
	f := func(value, colType, src string, want any) {
		t.Helper()
		row, err := dbzRow(t, []chschema.ColumnSchema{{Name: "c", Type: colType}}, map[string]string{"c": src},
			&kgo.Record{Topic: "pg.public.types", Offset: 3, Value: fixture(t, value)})
		if err != nil {
			t.Errorf("%s %s from %s: %v", value, colType, src, err)
			return
		}
		if got := row["c"]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s from %s = %#v, want %#v", value, colType, src, got, want)
		}
	}
	for _, fx := range []string{"pg_types.json", "pg_types_bare.json"} {
		// What both decode alike: numbers whose unit the magnitude
		// gives away, RFC 3339 text, day numbers into Date, and the
		// strings, booleans and decimals Debezium sends.
		f(fx, "Int32", "id", int32(7))
		f(fx, "DateTime64(3)", "created_ts", "2024-05-17T12:34:56.789Z")
		f(fx, "DateTime64(6)", "created_us", "2024-05-17T12:34:56.789012Z")
		f(fx, "DateTime64(9)", "created_ns", "2024-05-17T12:34:56.789012345Z")
		f(fx, "DateTime", "created_us", "2024-05-17 12:34:56")
		f(fx, "DateTime64(6)", "zoned", "2024-05-17T12:34:56.789012Z")
		f(fx, "DateTime", "zoned", "2024-05-17 12:34:56")
		f(fx, "Date", "birthday", "2024-05-17")
		f(fx, "Int64", "t_us", int64(45296789012))
		f(fx, "UInt32", "t_ms", uint32(45296789))
		f(fx, "Int64", "created_us", int64(1715949296789012))
		f(fx, "Decimal(10, 2)", "price", "1234.5")
		f(fx, "Decimal(38, 4)", "big", "12345678901234567890.1234")
		f(fx, "Decimal(10, 2)", "neg", "-42.07")
		f(fx, "Nullable(Decimal(10, 2))", "neg", "-42.07")
		f(fx, "Decimal(20, 5)", "var_num", "12.345")
		f(fx, "Float64", "var_num", 12.345)
		f(fx, "String", "doc", `{"a":1,"b":[true,null]}`)
		f(fx, "Array(String)", "tags", []any{"x", "y"})
		f(fx, "Map(String, String)", "doc", [][2]any{{"a", "1"}, {"b", "[true,null]"}})
		f(fx, "Tuple(a UInt8, b Array(Nullable(Bool)))", "doc", []any{uint8(1), []any{true, nil}})
		f(fx, "JSON(a UInt8)", "doc", `{"a":1,"b":[true,null]}`)
		f(fx, "Int128", "id", "7")
		f(fx, "UInt256", "created_us", "1715949296789012")
		f(fx, "UUID", "uid", "5f0c4e53-2e8a-4c55-9d1b-5b6a8a0e9c11")
		f(fx, "UInt8", "flag", uint8(1))
		f(fx, "Bool", "flag", true)
		f(fx, "Enum8('new' = 1, 'paid' = 2, 'shipped' = 3)", "status", int8(2))
		f(fx, "LowCardinality(String)", "status", "paid")
		f(fx, "Nullable(String)", "note", nil)
		f(fx, "String", "note", "")
		f(fx, "Nullable(DateTime64(6))", "missing_ts", nil)
		f(fx, "Nullable(Decimal(10, 2))", "absent", nil)
		f(fx, "String", "$source.table", "types")
		f(fx, "UInt64", "$source.lsn", uint64(4294967400))
		f(fx, "DateTime64(3)", "$source.ts_ms", "2024-05-17T12:34:56.8Z")
		f(fx, "String", "$op", "c")
		f(fx, "Int64", "$ts_ms", int64(1715949296912))
		f(fx, "UInt64", "$version", uint64(4294967400))
		f(fx, "Int64", "$version", int64(4294967400))
		f(fx, "Bool", "$deleted", false)
		f(fx, "String", "$topic", "pg.public.types")
		f(fx, "String", "transaction.id", "")
	}

	// With the schema, the semantic type decides what numbers and base64 mean.
	const s = "pg_types.json"
	f(s, "Date32", "old_day", "1969-07-20")
	f(s, "DateTime64(3)", "birthday", "2024-05-17T00:00:00Z")
	f(s, "DateTime", "birthday", "2024-05-17 00:00:00")
	f(s, "Date", "created_us", "2024-05-17")
	f(s, "String", "birthday", "2024-05-17")
	f(s, "String", "old_day", "1969-07-20")
	f(s, "String", "created_ts", "2024-05-17 12:34:56.789")
	f(s, "String", "created_us", "2024-05-17 12:34:56.789012")
	f(s, "String", "created_ns", "2024-05-17 12:34:56.789012345")
	f(s, "String", "t_ms", "12:34:56.789")
	f(s, "String", "t_us", "12:34:56.789012")
	f(s, "String", "t_ns", "12:34:56.789012345")
	f(s, "DateTime64(6)", "t_us", "1970-01-01T12:34:56.789012Z")
	f(s, "String", "price", "1234.50")
	f(s, "String", "neg", "-42.07")
	f(s, "String", "var_num", "12.345")
	f(s, "Float64", "price", 1234.5)
	f(s, "Float32", "neg", float32(-42.07))
	f(s, "Decimal(12, 4)", "price", "1234.5")
	f(s, "FixedString(3)", "raw", "\x00\x01\xfe")
	f(s, "String", "raw", "\x00\x01\xfe")
	f(s, "String", "zoned", "2024-05-17T12:34:56.789012Z")
	// Without it, the column type decides: raw numbers and base64 text.
	const b = "pg_types_bare.json"
	f(b, "Date32", "old_day", "1969-12-31") // -165 read as seconds: the documented schema-less limit
	f(b, "String", "birthday", "19860")
	f(b, "String", "created_us", "1715949296789012")
	f(b, "String", "t_ms", "45296789")
	f(b, "String", "price", "AeI6")
	f(b, "String", "raw", "AAH+")
	f(b, "Decimal(12, 4)", "price", "12.345") // the column's scale, not the source's: another reason to keep the schema

	// decimal.handling.mode=string and =double arrive as text and numbers.
	for _, fx := range []string{"pg_decimal_string.json", "pg_decimal_double.json"} {
		f(fx, "Decimal(10, 2)", "price", "1234.5")
		f(fx, "Decimal(10, 2)", "neg", "-42.07")
		f(fx, "Decimal(20, 5)", "var_num", "12.345")
		f(fx, "Float64", "price", 1234.5)
	}
	f("pg_decimal_string.json", "Decimal(38, 4)", "big", "12345678901234567890.1234")
	f("pg_decimal_string.json", "String", "price", "1234.50")
}

func TestDebeziumTypeErrors(t *testing.T) {
	f := func(schemaField, value, colType, want string) {
		t.Helper()
		env := `{"op":"c","ts_ms":1,"after":{"c":` + value + `}}`
		if schemaField != "" {
			env = `{"schema":{"type":"struct","fields":[{"type":"struct","field":"after","fields":[` + schemaField + `]}]},"payload":` + env + `}`
		}
		_, err := dbzRow(t, []chschema.ColumnSchema{{Name: "c", Type: colType}}, nil, &kgo.Record{Topic: "t", Value: []byte(env)})
		if want == "" {
			if err != nil {
				t.Errorf("%s %s into %s: %v", schemaField, value, colType, err)
			}
			return
		}
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s %s into %s: error %v, want ...%q", schemaField, value, colType, err, want)
		}
	}
	dec := `{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"},"field":"c"}`
	f(dec, `"%%%"`, "Decimal(10, 2)", `column "c": cannot decode "%%%" as Debezium Decimal bytes (base64 of the unscaled value)`)
	f(dec, `"AeI7"`, "Decimal(10, 1)", `column "c": cannot convert 1234.51 to Decimal(10, 1): more than 1 digits after the decimal point`)
	f(dec, `"AeI7"`, "Int32", `column "c": cannot convert 1234.51 to Int32: not an integer`)
	f(dec, `"AeI6"`, "Decimal(10, 1)", "") // 1234.50: trailing zeros do not count
	f(`{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"5000"},"field":"c"}`, `"AeI6"`, "Decimal(10, 2)",
		`column "c": Debezium decimal scale 5000 is out of range`)
	f(`{"type":"struct","name":"io.debezium.data.VariableScaleDecimal","field":"c"}`, `{"scale":"x","value":"AeI6"}`, "Decimal(10, 2)",
		`column "c": cannot read JSON object as a Debezium VariableScaleDecimal (want an integer scale and base64 value)`)
	f(`{"type":"struct","name":"io.debezium.data.VariableScaleDecimal","field":"c"}`, `{"value":"AeI6"}`, "Decimal(10, 2)",
		`column "c": cannot read JSON object as a Debezium VariableScaleDecimal (want scale and value)`)
	f(`{"type":"int32","name":"io.debezium.time.Date","field":"c"}`, `1.5`, "Date", `column "c": cannot read 1.5 as a Debezium Date value`)
	f(`{"type":"int32","name":"io.debezium.time.Date","field":"c"}`, `9999999999`, "Date", `column "c": Debezium Date value 9999999999 is out of range`)
	f(`{"type":"int64","name":"io.debezium.time.MicroTimestamp","field":"c"}`, `-1`, "DateTime", `column "c": cannot convert 1969-12-31T23:59:59.999999Z to DateTime: out of range`)
	f(`{"type":"string","name":"io.debezium.data.Json","field":"c"}`, `"{oops"`, "Map(String, String)", `column "c": io.debezium.data.Json value is not JSON: cannot parse JSON: cannot parse object: cannot find opening '"" for object key; unparsed tail: "oops"`)
	f(`{"type":"bytes","field":"c"}`, `"AA=B"`, "String", `column "c": cannot decode "AA=B" as base64 bytes`)
	f(``, `"not base64!"`, "Decimal(10, 2)", `column "c": cannot decode "not base64!" as Debezium Decimal bytes (base64 of the unscaled value)`)
	f(``, `"[1,"`, "Array(UInt8)", `column "c": io.debezium.data.Json value is not JSON: cannot parse JSON: cannot parse array: cannot parse array value: cannot parse empty string; unparsed tail: ""`)
}

func TestDebeziumDecimalText(t *testing.T) {
	var d connect.Decimals
	f := func(unscaled string, scale int, want string) {
		t.Helper()
		n, ok := new(big.Int).SetString(unscaled, 10)
		if !ok {
			t.Fatal(unscaled)
		}
		raw := twosComplement(n)
		// Round-trip through base64 the way the JSON converter sends it.
		in := column.Value{Kind: column.String, Bytes: []byte(base64.StdEncoding.EncodeToString(raw))}
		if err := d.FromBase64(&in, in.Bytes, scale); err != nil {
			t.Fatalf("%s scale %d: %v", unscaled, scale, err)
		}
		if got := string(in.Bytes); got != want || in.Kind != column.Number {
			t.Errorf("%s scale %d = %q (kind %d), want %q", unscaled, scale, got, in.Kind, want)
		}
	}
	f("0", 0, "0")
	f("0", 2, "0.00")
	f("0", -2, "0")
	f("123450", 2, "1234.50")
	f("-4207", 2, "-42.07")
	f("5", 3, "0.005")
	f("-5", 3, "-0.005")
	f("12", -2, "1200")
	f("-1", 0, "-1")
	f("127", 0, "127")
	f("128", 0, "128")
	f("-128", 0, "-128")
	f("-129", 0, "-129")
	f("255", 1, "25.5")
	f("-256", 0, "-256")
	f("9223372036854775807", 0, "9223372036854775807")
	f("-9223372036854775808", 0, "-9223372036854775808")
	f("18446744073709551615", 0, "18446744073709551615")
	f("18446744073709551616", 0, "18446744073709551616")
	f("-18446744073709551616", 4, "-1844674407370955.1616")
	f("99999999999999999999999999999999999999", 10, "9999999999999999999999999999.9999999999")
	f("10000000000000000000000000000000000000", 0, "10000000000000000000000000000000000000")
	f("100000000000000000000000000000000000001", 0, "100000000000000000000000000000000000001")
	f("170141183460469231731687303715884105727", 0, "170141183460469231731687303715884105727")
	f("-170141183460469231731687303715884105728", 0, "-170141183460469231731687303715884105728")
	f("10000000000000000000000000000000000000000", 0, "10000000000000000000000000000000000000000") // 17 bytes: big.Int
	f("-10000000000000000000000000000000000000000", 38, "-100.00000000000000000000000000000000000000")
}

// twosComplement is Java's BigInteger.toByteArray: minimal big-endian two's
// complement, what Kafka Connect's Decimal carries.
func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n = 2^k - |n| for the smallest k that keeps the sign bit set.
	for k := 8; ; k += 8 {
		m := new(big.Int).Lsh(big.NewInt(1), uint(k))
		m.Add(m, n)
		if m.Sign() >= 0 && m.BitLen() == k {
			return m.FillBytes(make([]byte, k/8))
		}
	}
}

func TestCompileDebezium(t *testing.T) {
	f := func(cols []chschema.ColumnSchema, mapping map[string]string, want string) {
		t.Helper()
		_, err := Compile(route.Debezium, cols, mapping)
		if err == nil || err.Error() != want {
			t.Errorf("Compile(%v, %v) = %v, want %q", cols, mapping, err, want)
		}
	}
	base := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}
	with := func(extra ...chschema.ColumnSchema) []chschema.ColumnSchema {
		return append(append([]chschema.ColumnSchema(nil), base...), extra...)
	}

	f(base[:1], nil, `no column receives the row version: add a column "_version UInt64" (or map one to $version) so that ReplacingMergeTree keeps the latest change`)
	f(base[:2], nil, `no column receives the delete marker: add a column "_deleted UInt8" (or map one to $deleted) so that deletes are not read as live rows`)
	f(base[:1], map[string]string{"ver": "$version"}, `mapping names column "ver" (the version column; add it as UInt64), which is not in the table`)
	f(base[:2], map[string]string{"gone": "$deleted"}, `mapping names column "gone" (the delete marker column; add it as UInt8), which is not in the table`)
	f(with(chschema.ColumnSchema{Name: "m", Type: "UInt64", DefaultKind: "MATERIALIZED"}), map[string]string{"m": "$version"},
		`mapping names column "m" (the version column; add it as UInt64), which is MATERIALIZED and cannot be inserted`)
	f(with(chschema.ColumnSchema{Name: "a", Type: "String"}), map[string]string{"a": "$foo"},
		`column "a": unknown source "$foo" (want a path into the row image or $topic, $partition, $offset, $timestamp, $key, $header.NAME, $version, $deleted, $op, $ts_ms, $source.PATH)`)
	f(with(chschema.ColumnSchema{Name: "a", Type: "String"}), map[string]string{"a": "$source."}, `column "a": invalid source "$source."`)
	f(with(chschema.ColumnSchema{Name: "a", Type: "String"}), map[string]string{"a": "$source.a..b"}, `column "a": invalid source "$source.a..b"`)
	f(with(chschema.ColumnSchema{Name: "a", Type: "String"}), map[string]string{"a": "x..y"}, `column "a": invalid JSON path "x..y"`)
	f(with(chschema.ColumnSchema{Name: "a", Type: "Array(String)"}), map[string]string{"a": "$op"}, `column "a": source $op cannot fill type Array(String)`)
	f(with(chschema.ColumnSchema{Name: "a", Type: "AggregateFunction(uniq, UInt64)"}), nil, `column "a" has type AggregateFunction(uniq, UInt64) which the debezium-json format cannot fill`)
	f([]chschema.ColumnSchema{{Name: "a", Type: "String"}, {Name: "a", Type: "String"}}, nil, `column "a" is listed twice`)

	// Other names work once mapped; _version/_deleted then read the image.
	p, err := Compile(route.Debezium, []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "ver", Type: "UInt64"}, {Name: "is_deleted", Type: "UInt8"}},
		map[string]string{"ver": "$version", "is_deleted": "$deleted"})
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	if err := p.Append(blk, &kgo.Record{Value: fixture(t, "pg_customers_delete.json")}); err != nil {
		t.Fatal(err)
	}
	if v, del := blk.ColumnData(1).([]uint64)[0], blk.ColumnData(2).([]uint8)[0]; v != 46523128 || del != 1 {
		t.Fatalf("ver=%d is_deleted=%d, want 46523128 and 1", v, del)
	}
}

// A json plan and a debezium plan of the same columns fill interchangeable
// blocks (the pipeline shares one block layout per table).
func TestDebeziumSharesBlockLayout(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}
	pj, err := Compile("json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := Compile(route.Debezium, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := pj.NewBlock()
	if err := pd.Append(blk, &kgo.Record{Value: fixture(t, "pg_customers_insert.json")}); err != nil {
		t.Fatal(err)
	}
	if err := pj.Append(blk, &kgo.Record{Value: []byte(`{"id":5,"_version":1,"_deleted":0}`)}); err != nil {
		t.Fatal(err)
	}
	if got := blk.ColumnData(0).([]int32); !reflect.DeepEqual(got, []int32{1, 5}) {
		t.Fatalf("ids %v", got)
	}
}

// Decoding a realistic wrapped event allocates nothing per record once the
// buffers are warm.
func TestDebeziumAppendDoesNotAllocate(t *testing.T) {
	p, err := Compile(route.Debezium, InsertColumns(dbzBenchCols), nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := dbzBenchRecords(256, true)
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
	for j := 0; j < 6000; j++ {
		next()
	}
	if allocs := testing.AllocsPerRun(2000, next); allocs > 0.1 {
		t.Fatalf("%.2f allocations per record", allocs)
	}
}

// The schema block is described once and reused while it stays the same
// bytes; a changed schema (a migration changed a column's scale) takes
// effect with the first message that carries it, whatever the layout.
func TestDebeziumSchemaCache(t *testing.T) {
	p, err := Compile(route.Debezium, []chschema.ColumnSchema{{Name: "c", Type: "String"}, {Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema := func(scale string) string {
		return `{"type":"struct","doc":"a } tricky ] \" doc {","fields":[{"type":"struct","field":"after","fields":[` +
			`{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"` + scale + `"},"field":"c"}]}]}`
	}
	const payload = `{"op":"c","ts_ms":1,"after":{"c":"AeI6"}}`
	blk := p.NewBlock()
	f := func(value, want string) {
		t.Helper()
		if err := p.Append(blk, &kgo.Record{Value: []byte(value)}); err != nil {
			t.Fatalf("%s: %v", value, err)
		}
		if got := blk.ColumnData(0).([]string)[blk.Rows()-1]; got != want {
			t.Errorf("%s: c = %q, want %q", value, got, want)
		}
	}
	f(`{"schema":`+schema("2")+`,"payload":`+payload+`}`, "1234.50")
	f(`{"schema":`+schema("2")+`,"payload":`+payload+`}`, "1234.50")
	f(`{"schema":`+schema("3")+`,"payload":`+payload+`}`, "123.450")
	f("{\n \"schema\" : "+schema("1")+" ,\n \"payload\" :\t"+payload+"\n}\n", "12345.0")
	f(`{"schema":null,"payload":`+payload+`}`, "AeI6")
	f(`{"payload":`+payload+`,"schema":`+schema("4")+`}`, "12.3450")
	f(`{"schema":`+schema("2")+`,"payload":`+payload+`,"extra":1}`, "1234.50")
	f(`{"schema":`+schema("5")+`,"payload":`+payload+`}`, "1.23450")
	f(payload, "AeI6")
	f(`{"schema":`+schema("5")+`,"payload":`+payload+`}`, "1.23450")
}

package decode

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/route"
)

// The servers' generations, as schema.create types columns for them.
var (
	connectModern = chschema.ServerTypes{Bool: true, DateTime64: true, JSON: true, Date32: true, Map: true}
	connectOld    = chschema.ServerTypes{}
)

// connectCreated is what schema.create does with records of format f: a
// plan that reads only the offset appends them, and each unmapped field
// gets the column its UnmappedField.Column gives on srv, in the order the
// fields were first seen.
func connectCreated(t *testing.T, f route.Format, srv chschema.ServerTypes, recs []*kgo.Record) []chschema.ColumnSchema {
	t.Helper()
	p, err := Compile(f, connectCols("_offset Int64"), nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for _, r := range recs {
		if err := p.Append(blk, r); err != nil && r.Value != nil {
			t.Fatalf("offset %d: %v", r.Offset, err)
		}
	}
	var seen []UnmappedField
	p.TakeUnmapped(func(u *UnmappedField) { seen = append(seen, *u) }, nil)
	sort.Slice(seen, func(a, b int) bool { return seen[a].Order < seen[b].Order })
	var cols []chschema.ColumnSchema
	for _, u := range seen {
		typ, err := u.Column(srv, false)
		if err != nil {
			t.Fatalf("%s: %v", u.Name, err)
		}
		cols = append(cols, chschema.ColumnSchema{Name: u.Name, Type: typ})
	}
	return cols
}

func colList(cols []chschema.ColumnSchema) string {
	var b []string
	for _, c := range cols {
		b = append(b, c.Name+" "+c.Type)
	}
	return strings.Join(b, ", ")
}

// TestConnectCreatedColumnsRoundTrip: the columns schema.create makes for
// the records the real JsonConverter wrote (TestConnectCaptured's table,
// unwrapped with Connect's Date, Time, Timestamp and Decimal) are typed by
// their schema, and the same records then fill those columns with the
// source's values: PostgreSQL's numeric(12,2) exact, the date, the
// timestamp to the millisecond, NaN and the infinities, NULLs.
func TestConnectCreatedColumnsRoundTrip(t *testing.T) {
	recs := readCaptures(t, "pg15_dbz361_unwrapped_connect_time.jsonl")
	cols := connectCreated(t, route.JSON, connectModern, recs)
	const want = "id Int64, i2 Nullable(Int16), i4 Nullable(Int32), f4 Nullable(Float32), f8 Nullable(Float64), b Nullable(Bool), " +
		"dec Nullable(Decimal(12, 2)), num Nullable(String), d Nullable(Date32), tm Nullable(String), tm3 Nullable(String), " +
		"ts Nullable(DateTime64(3)), ts3 Nullable(DateTime64(3)), tstz Nullable(DateTime64(9)), u Nullable(String), j Nullable(String), " +
		"ia Array(Nullable(Int32)), ta Array(Nullable(String)), ba Nullable(String), s Nullable(String), dd Array(Nullable(Decimal(5, 2))), " +
		"__deleted Nullable(String), __lsn Nullable(Int64), __op Nullable(String)"
	if got := colList(cols); got != want {
		t.Fatalf("created columns\n  %s\nwant\n  %s", got, want)
	}
	rows := appendAll(t, route.JSON, cols, nil, recs)
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5", len(rows))
	}
	// The source's values (TestConnectCaptured's INSERTs): Connect's Time
	// and Timestamp hold milliseconds, so µs are cut by the converter.
	check(t, rows[0], map[string]any{"id": int64(1), "i2": int16(7), "i4": int32(-42), "f4": float32(1.5), "b": true,
		"dec": "12345.67", "num": "3.14159265358979", "d": "2024-05-17", "tm": "13:14:15.123", "tm3": "01:02:03.456",
		"ts": "2024-05-17T12:34:56.789Z", "ts3": "1969-12-31T23:59:59.999Z", "tstz": "2024-05-17T10:34:56Z",
		"u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": `{"a": [1, 2, {"b": null}]}`, "ia": []any{int32(1), nil, int32(3)},
		"ta": []any{"x", nil, "y z"}, "ba": "\x00\xff\x10", "s": `héllo "q"`, "dd": []any{"1.5", "-2.25"},
		"__deleted": "false", "__op": "r"}, nil)
	if f8, ok := rows[0]["f8"].(float64); !ok || !math.IsNaN(f8) {
		t.Errorf("f8 = %#v, want NaN", rows[0]["f8"])
	}
	check(t, rows[1], map[string]any{"id": int64(2), "i2": nil, "f8": nil, "b": nil, "dec": nil, "num": nil, "d": nil, "tm": nil,
		"ts": nil, "tstz": nil, "ba": nil, "ia": []any{}, "dd": []any{}}, nil)
	check(t, rows[2], map[string]any{"id": int64(3), "i2": int16(-32768), "i4": int32(2147483647), "f4": float32(math.Inf(-1)),
		"f8": math.Inf(1), "b": false, "dec": "-0.01", "num": "-123456789012345678901234567890.123456789", "d": "1900-01-01",
		"tm": "24:00:00", "tm3": "23:59:59.999", "ts": "1900-01-01T00:00:00Z", "ts3": "2262-04-11T23:47:16.854Z",
		"tstz": "1970-01-01T00:00:00Z", "j": "[]", "ba": "", "s": ""}, nil)
	check(t, rows[3], map[string]any{"id": int64(1), "s": "upd", "dec": "0.5", "__op": "u"}, nil)
	check(t, rows[4], map[string]any{"id": int64(3), "__deleted": "true", "__op": "d"}, nil)
}

// TestConnectCreatedColumnsOldServer: on a server without Bool, Date32,
// DateTime64 and Map the same schema gives UInt8, Date and DateTime, and
// a record whose values those hold fills them (the timestamp to the
// second, which is all DateTime keeps).
func TestConnectCreatedColumnsOldServer(t *testing.T) {
	recs := readCaptures(t, "pg15_dbz361_unwrapped_connect_time.jsonl")
	cols := connectCreated(t, route.JSON, connectOld, recs)
	got := colList(cols)
	for _, c := range []string{"b Nullable(UInt8)", "d Nullable(Date)", "ts Nullable(DateTime)", "tstz Nullable(DateTime)", "dec Nullable(Decimal(12, 2))"} {
		if !strings.Contains(got, c) {
			t.Errorf("created columns %s lack %s", got, c)
		}
	}
	rows, err := connectRows(t, route.JSON, cols, nil, recs[1].Value)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%v, %d rows", err, len(rows))
	}
	check(t, rows[0], map[string]any{"id": int64(2), "b": nil, "d": nil, "ts": nil}, nil)
	// Record 1 with ts3 (1969) moved into DateTime's range.
	v := strings.Replace(string(recs[0].Value), `"ts3":-1`, `"ts3":1715949296000`, 1)
	rows, err = connectRows(t, route.JSON, cols, nil, []byte(v))
	if err != nil || len(rows) != 1 {
		t.Fatalf("%v, %d rows", err, len(rows))
	}
	check(t, rows[0], map[string]any{"b": uint8(1), "d": "2024-05-17", "ts": "2024-05-17 12:34:56", "ts3": "2024-05-17 12:34:56",
		"dec": "12345.67", "dd": []any{"1.5", "-2.25"}}, nil)
}

// TestConnectCreatedTypesEveryKind: a schema of every Connect type the
// captures lack (int8, a Decimal without precision, a map, a struct, an
// array of dates, a field with a default), through schema.create's typing
// and back: each column takes its field's value exactly, and a field's
// default rides along.
func TestConnectCreatedTypesEveryKind(t *testing.T) {
	const schema = `{"type":"struct","fields":[` +
		`{"type":"int8","optional":false,"field":"i1"},` +
		`{"type":"int16","optional":false,"default":7,"field":"i2"},` +
		`{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"3"},"field":"amount"},` +
		`{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"day"},` +
		`{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"at"},` +
		`{"type":"int64","optional":false,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"at_us"},` +
		`{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int64","optional":false},"optional":false,"field":"counts"},` +
		`{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"string","optional":false},"optional":false,"field":"names"},` +
		`{"type":"struct","fields":[{"type":"string","optional":false,"field":"city"},{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"since"}],"optional":true,"field":"addr"},` +
		`{"type":"array","items":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1},"optional":false,"field":"days"}` +
		`],"optional":false,"name":"t.Value"}`
	// amount 123456789.123 is 123456789123 unscaled: 0x1CBE991A83.
	const payload = `{"i1":-128,"i2":300,"amount":"HL6ZGoM=","day":19860,"at":1715949296789,"at_us":1715949296789012,` +
		`"counts":{"a":1,"b":-2},"names":[[1,"one"],[2,"two"]],"addr":{"city":"Köln","since":19000},"days":[0,19860]}`
	rec := &kgo.Record{Value: []byte(`{"schema":` + schema + `,"payload":` + payload + `}`)}
	cols := connectCreated(t, route.ConnectJSON, connectModern, []*kgo.Record{rec})
	const want = "i1 Int8, i2 Int16, amount Decimal(38, 3), day Nullable(Date32), at DateTime64(3), at_us DateTime64(6), " +
		"counts Map(String, Int64), names String, addr JSON, days Array(Date32)"
	if got := colList(cols); got != want {
		t.Fatalf("created columns\n  %s\nwant\n  %s", got, want)
	}
	// addr is read as its JSON text here (a JSON column's reading is the
	// JSON format's own, tested there).
	cols[8].Type = "String"
	rows, err := connectRows(t, route.ConnectJSON, cols, nil, rec.Value)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%v, %d rows", err, len(rows))
	}
	check(t, rows[0], map[string]any{"i1": int8(-128), "i2": int16(300), "amount": "123456789.123", "day": "2024-05-17",
		"at": "2024-05-17T12:34:56.789Z", "at_us": "2024-05-17T12:34:56.789012Z",
		"counts": [][2]any{{"a", int64(1)}, {"b", int64(-2)}}, "names": `{"1":"one","2":"two"}`,
		"addr": `{"city":"Köln","since":"2022-01-08"}`, "days": []any{"1970-01-01", "2024-05-17"}}, nil)

	p, err := Compile(route.ConnectJSON, connectCols("i1 Int8"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append(p.NewBlock(), rec); err != nil {
		t.Fatal(err)
	}
	p.TakeUnmapped(func(u *UnmappedField) {
		if u.Name != "i2" {
			return
		}
		typ, err := u.Column(connectModern, false)
		if err != nil || u.Default == nil {
			t.Fatalf("i2: %q, %v, default %v", typ, err, u.Default)
		}
		if lit, err := u.Default.Literal(typ); err != nil || lit != "7" {
			t.Errorf("i2's default: %q, %v; want 7", lit, err)
		}
	}, nil)
}

package decode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/registry"
	"sink/internal/route"
)

// fakeRegistry serves schemas from a map; down makes every lookup of an
// id fail as an unreachable registry does.
type fakeRegistry struct {
	mu      sync.Mutex
	schemas map[int]*registry.Schema
	down    bool
	lookups int
}

func newFakeRegistry() *fakeRegistry { return &fakeRegistry{schemas: map[int]*registry.Schema{}} }

func (r *fakeRegistry) Schema(_ context.Context, id int) (*registry.Schema, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	if r.down {
		return nil, fmt.Errorf("%w: schema id %d: connection refused", registry.ErrUnavailable, id)
	}
	s, ok := r.schemas[id]
	if !ok {
		return nil, fmt.Errorf("%w: schema id %d: the registry says it does not exist (40403)", registry.ErrBadRecord, id)
	}
	return s, nil
}

func (r *fakeRegistry) add(id int, typ sr.SchemaType, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.schemas[id] = &registry.Schema{ID: id, Type: typ, Text: text}
}

// avroFrame encodes v with schema text and frames it with id.
func avroFrame(t testing.TB, id int, schema string, v any) []byte {
	t.Helper()
	s, err := avro.Parse(schema)
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	b, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	return append(registry.AppendFrame(nil, id, false), b...)
}

// oneField is a record schema with one field c of type field.
func oneField(field string) string {
	return `{"type":"record","name":"R","fields":[{"name":"c","type":` + field + `}]}`
}

// avroOne decodes the record {c: v} of field type field into a one-column
// table of colType and returns the value (norm'd) or the error.
func avroOne(t *testing.T, field string, v any, colType string) (any, error) {
	t.Helper()
	reg := newFakeRegistry()
	schema := oneField(field)
	reg.add(7, sr.TypeAvro, schema)
	p, err := Compile(route.Avro, []chschema.ColumnSchema{{Name: "c", Type: colType}}, nil, WithRegistry(reg))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	blk := p.NewBlock()
	rec := &kgo.Record{Topic: "t", Offset: 5, Value: avroFrame(t, 7, schema, map[string]any{"c": v})}
	if err := p.Append(blk, rec); err != nil {
		if blk.Rows() != 0 {
			t.Fatal("failed Append left a row")
		}
		return nil, err
	}
	return firstRow(colType, blk.ColumnData(0)), nil
}

func TestAvroMappings(t *testing.T) {
	f := func(field string, v any, colType string, want any) {
		t.Helper()
		got, err := avroOne(t, field, v, colType)
		if err != nil {
			t.Errorf("%s %v -> %s: %v", field, v, colType, err)
			return
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s %v -> %s = %#v, want %#v", field, v, colType, got, want)
		}
	}
	ts := time.Date(2024, 5, 17, 12, 34, 56, 123456789, time.UTC)
	// Primitives.
	f(`"boolean"`, true, "UInt8", uint8(1))
	f(`"boolean"`, false, "Bool", false)
	f(`"int"`, int32(-7), "Int32", int32(-7))
	f(`"long"`, int64(math.MaxInt64), "Int64", int64(math.MaxInt64))
	f(`"long"`, int64(42), "String", "42")
	f(`"float"`, float32(1.5), "Float32", float32(1.5))
	f(`"double"`, 0.1, "Float64", 0.1)
	f(`"double"`, math.Inf(1), "Float64", math.Inf(1))
	f(`"double"`, 2.5, "Decimal(9, 2)", "2.5")
	f(`"string"`, "héllo", "String", "héllo")
	f(`"string"`, "", "String", "")
	f(`"string"`, "2024-05-17 12:34:56", "DateTime", "2024-05-17 12:34:56")
	f(`"bytes"`, []byte{0, 1, 'a'}, "String", "\x00\x01a")
	f(`{"type":"fixed","name":"F","size":3}`, [3]byte{'a', 'b', 'c'}, "FixedString(3)", "abc")
	f(`{"type":"enum","name":"E","symbols":["RED","GREEN"]}`, "GREEN", "String", "GREEN")
	f(`{"type":"enum","name":"E","symbols":["RED","GREEN"]}`, "GREEN", "Enum8('RED' = 1, 'GREEN' = 2)", int8(2))
	// Logical types.
	dec := `{"type":"bytes","logicalType":"decimal","precision":18,"scale":4}`
	f(dec, big.NewRat(-123456789, 10000), "Decimal(18, 4)", "-12345.6789")
	f(dec, big.NewRat(5, 10000), "Decimal(18, 4)", "0.0005")
	f(dec, big.NewRat(5, 10000), "String", "0.0005")
	f(`{"type":"bytes","logicalType":"decimal","precision":38,"scale":10}`, new(big.Rat).SetFrac(new(big.Int).Exp(big.NewInt(10), big.NewInt(37), nil), big.NewInt(1e10)), "Decimal(38, 10)", "1000000000000000000000000000")
	f(`{"type":"fixed","name":"D","size":8,"logicalType":"decimal","precision":18,"scale":2}`, big.NewRat(31415, 100), "Decimal(18, 2)", "314.15")
	f(`{"type":"string","logicalType":"uuid"}`, "6f2b8a52-4d7e-4a3c-9f1e-0c2d3b4a5e6f", "UUID", "6f2b8a52-4d7e-4a3c-9f1e-0c2d3b4a5e6f")
	f(`{"type":"int","logicalType":"date"}`, time.Date(2024, 5, 17, 0, 0, 0, 0, time.UTC), "Date", "2024-05-17")
	f(`{"type":"int","logicalType":"date"}`, time.Date(1960, 1, 2, 0, 0, 0, 0, time.UTC), "Date32", "1960-01-02")
	f(`{"type":"int","logicalType":"date"}`, time.Date(2024, 5, 17, 0, 0, 0, 0, time.UTC), "DateTime", "2024-05-17 00:00:00")
	f(`{"type":"int","logicalType":"date"}`, time.Date(1970, 1, 11, 0, 0, 0, 0, time.UTC), "Int32", int32(10))
	f(`{"type":"int","logicalType":"time-millis"}`, 1500*time.Millisecond, "UInt32", uint32(1500))
	f(`{"type":"long","logicalType":"time-micros"}`, 1500*time.Microsecond, "Int64", int64(1500))
	f(`{"type":"long","logicalType":"timestamp-millis"}`, ts, "DateTime", "2024-05-17 12:34:56")
	f(`{"type":"long","logicalType":"timestamp-millis"}`, ts, "DateTime64(3)", "2024-05-17T12:34:56.123Z")
	f(`{"type":"long","logicalType":"timestamp-micros"}`, ts, "DateTime64(6)", "2024-05-17T12:34:56.123456Z")
	f(`{"type":"long","logicalType":"timestamp-micros"}`, ts, "Int64", ts.UnixMicro())
	f(`{"type":"long","logicalType":"timestamp-micros"}`, time.Date(1950, 1, 1, 0, 0, 0, 1000, time.UTC), "DateTime64(6)", "1950-01-01T00:00:00.000001Z")
	f(`{"type":"long","logicalType":"local-timestamp-millis"}`, ts, "DateTime64(3, 'Europe/Berlin')", "2024-05-17T10:34:56.123Z")
	f(`{"type":"long","logicalType":"local-timestamp-micros"}`, ts, "DateTime64(6)", "2024-05-17T12:34:56.123456Z")
	f(`{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}`, avro.LogicalDuration{Months: 1, Days: 2, Milliseconds: 3}, "String", `{"months":1,"days":2,"milliseconds":3}`)
	f(`{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}`, avro.LogicalDuration{Months: 1, Days: 2, Milliseconds: 3}, "Tuple(months UInt32, days UInt32, milliseconds UInt32)", []any{uint32(1), uint32(2), uint32(3)})
	// Unions with null.
	f(`["null","long"]`, nil, "Nullable(Int64)", nil)
	f(`["null","long"]`, int64(3), "Nullable(Int64)", int64(3))
	f(`["long","null"]`, int64(3), "Nullable(Int64)", int64(3))
	f(`["null","string"]`, nil, "String", "")
	f(`["null",{"type":"long","logicalType":"timestamp-millis"}]`, ts, "Nullable(DateTime64(3))", "2024-05-17T12:34:56.123Z")
	// Complex values.
	f(`{"type":"array","items":"long"}`, []int64{1, 2, 3}, "Array(UInt32)", []any{uint32(1), uint32(2), uint32(3)})
	f(`{"type":"array","items":"string"}`, []string{}, "Array(String)", []any{})
	f(`{"type":"array","items":["null","string"]}`, []any{"a", nil}, "Array(Nullable(String))", []any{"a", nil})
	f(`{"type":"map","values":"long"}`, map[string]int64{"a": 1}, "Map(String, UInt64)", [][2]any{{"a", uint64(1)}})
	f(`{"type":"map","values":"double"}`, map[string]float64{"x": 1.5}, "String", `{"x":1.5}`)
	inner := `{"type":"record","name":"In","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"},{"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	f(inner, map[string]any{"a": 1, "b": "x", "t": ts}, "Tuple(a Int32, b String, t DateTime64(3))", []any{int32(1), "x", "2024-05-17T12:34:56.123Z"})
	f(inner, map[string]any{"a": 1, "b": "x", "t": ts}, "String", `{"a":1,"b":"x","t":"2024-05-17T12:34:56.123Z"}`)
	f(`{"type":"array","items":`+inner+`}`, []any{map[string]any{"a": 1, "b": "x", "t": ts}}, "Array(Tuple(a Int32, b String))", []any{[]any{int32(1), "x"}})
	// Other unions: Variant, or String.
	f(`["null","string","long"]`, map[string]any{"long": int64(5)}, "Variant(String, Int64)", [2]any{"Int64", int64(5)})
	f(`["null","string","long"]`, map[string]any{"string": "x"}, "Variant(String, Int64)", [2]any{"String", "x"})
	f(`["null","string","long"]`, nil, "Variant(String, Int64)", nil)
	f(`["string","long"]`, map[string]any{"long": int64(5)}, "String", "5")
}

func TestAvroMappingErrors(t *testing.T) {
	f := func(field string, v any, colType, want string) {
		t.Helper()
		_, err := avroOne(t, field, v, colType)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s %v -> %s: error %v, want it to contain %q", field, v, colType, err, want)
		}
	}
	f(`["string","long"]`, map[string]any{"long": int64(5)}, "Int64",
		`column "c": field c is the Avro union ["string","long"], which fills only a Variant (ClickHouse 26.9), Dynamic, JSON or String column, not Int64`)
	f(`{"type":"bytes","logicalType":"decimal","precision":18,"scale":4}`, big.NewRat(1, 10000), "Decimal(18, 2)", "more than 2 digits after the decimal point")
	f(`"long"`, int64(-1), "UInt8", `column "c"`)
	f(`"string"`, "x", "Int32", `cannot parse "x" as Int32`)
}

// TestAvroRecordPaths: columns read nested fields by dotted paths (unmapped
// columns by their dotted names), through unions with null; paths into
// arrays and maps read the JSON form; record attributes work as in json.
func TestAvroRecordPaths(t *testing.T) {
	schema := `{"type":"record","name":"Order","fields":[
		{"name":"id","type":"long"},
		{"name":"skipped","type":{"type":"array","items":{"type":"map","values":["null","string"]}}},
		{"name":"customer","type":["null",{"type":"record","name":"C","fields":[
			{"name":"name","type":"string"},
			{"name":"address","type":{"type":"record","name":"A","fields":[{"name":"city","type":"string"},{"name":"zip","type":"int"}]}}]}]},
		{"name":"items","type":{"type":"array","items":{"type":"record","name":"I","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
		{"name":"attrs","type":{"type":"map","values":"string"}}]}`
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, schema)
	cols := []chschema.ColumnSchema{
		{Name: "id", Type: "UInt64"},
		{Name: "customer.name", Type: "Nullable(String)"},
		{Name: "city", Type: "Nullable(String)"},
		{Name: "zip", Type: "UInt32"},
		{Name: "first_sku", Type: "String"},
		{Name: "color", Type: "String"},
		{Name: "items", Type: "Array(Tuple(sku String, qty UInt16))"},
		{Name: "_offset", Type: "UInt64"},
		{Name: "src", Type: "String"},
	}
	mapping := map[string]string{"city": "customer.address.city", "zip": "customer.address.zip", "first_sku": "items.0.sku", "color": "attrs.color", "src": "$topic"}
	p, err := Compile(route.Avro, cols, mapping, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	full := map[string]any{
		"id": int64(9), "skipped": []map[string]any{{"k": "v", "n": nil}},
		"customer": map[string]any{"C": map[string]any{"name": "Ann", "address": map[string]any{"city": "Oslo", "zip": 150}}},
		"items":    []map[string]any{{"sku": "A1", "qty": 2}, {"sku": "B2", "qty": 1}},
		"attrs":    map[string]string{"color": "red"},
	}
	noCustomer := map[string]any{"id": int64(10), "skipped": []map[string]any{}, "customer": nil, "items": []map[string]any{}, "attrs": map[string]string{}}
	for i, v := range []map[string]any{full, noCustomer} {
		if err := p.Append(blk, &kgo.Record{Topic: "orders", Offset: int64(100 + i), Value: avroFrame(t, 1, schema, v)}); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]string, 2)
	for r := range 2 {
		var parts []string
		for c, col := range blk.Columns() {
			parts = append(parts, fmt.Sprint(norm(chtype.Parse(col.Type), rowOf(blk.ColumnData(c), r))))
		}
		got[r] = strings.Join(parts, " | ")
	}
	// The second record has no customer (NULL: Nullable columns get NULL,
	// zip its default) and empty items and attrs (missing: defaults).
	want := []string{
		"9 | Ann | Oslo | 150 | A1 | red | [[A1 2] [B2 1]] | 100 | orders",
		"10 | <nil> | <nil> | 0 |  |  | [] | 101 | orders",
	}
	for r := range want {
		if got[r] != want[r] {
			t.Errorf("row %d:\n got %s\nwant %s", r, got[r], want[r])
		}
	}
}

func rowOf(data any, i int) any { return reflect.ValueOf(data).Index(i).Interface() }

// TestAvroSchemaEvolution: a record of a newer schema (an added optional
// field) decodes with its own program, and an older record still reads
// the new column as missing (its default), without a new Plan.
func TestAvroSchemaEvolution(t *testing.T) {
	v1 := `{"type":"record","name":"E","fields":[{"name":"id","type":"long"}]}`
	v2 := `{"type":"record","name":"E","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, v1)
	reg.add(2, sr.TypeAvro, v2)
	p, err := Compile(route.Avro, []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "note", Type: "Nullable(String)"}}, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for i, rec := range [][]byte{
		avroFrame(t, 1, v1, map[string]any{"id": int64(1)}),
		avroFrame(t, 2, v2, map[string]any{"id": int64(2), "note": "hi"}),
		avroFrame(t, 1, v1, map[string]any{"id": int64(3)}),
	} {
		if err := p.Append(blk, &kgo.Record{Offset: int64(i), Value: rec}); err != nil {
			t.Fatal(err)
		}
	}
	ids, notes := blk.ColumnData(0).([]uint64), blk.ColumnData(1).([]*string)
	if fmt.Sprint(ids) != "[1 2 3]" || notes[0] != nil || notes[1] == nil || *notes[1] != "hi" || notes[2] != nil {
		t.Fatalf("ids %v notes %v", ids, notes)
	}
	if reg.lookups != 2 {
		t.Fatalf("%d registry lookups, want 2 (one per schema id)", reg.lookups)
	}
}

// TestAvroBadRecords: malformed frames, unknown ids, payloads that do not
// match the schema and schemas that cannot fill the columns are bad
// records naming the cause; an unreachable registry is ErrUnavailable,
// and the same record decodes once it answers.
func TestAvroBadRecords(t *testing.T) {
	schema := `{"type":"record","name":"E","fields":[{"name":"id","type":"long"},{"name":"s","type":"string"}]}`
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, schema)
	reg.add(3, sr.TypeProtobuf, `syntax = "proto3"; message M {}`)
	reg.add(4, sr.TypeAvro, `"string"`)
	reg.add(5, sr.TypeAvro, `{"type":"record","name":"E","fields":[{"name":"id","type":{"type":"array","items":"long"}},{"name":"s","type":"int"}]}`)
	p, err := Compile(route.Avro, []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "s", Type: "String"}}, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	good := avroFrame(t, 1, schema, map[string]any{"id": int64(1), "s": "x"})
	f := func(value []byte, want string) {
		t.Helper()
		blk := p.NewBlock()
		err := p.Append(blk, &kgo.Record{Topic: "t", Offset: 1, Value: value})
		var re *RecordError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("% x: %v, want a RecordError containing %q", value, err, want)
		}
		if blk.Rows() != 0 {
			t.Error("a bad record left a row")
		}
	}
	f([]byte{}, "empty value where a registry-framed record")
	f([]byte("{}"), "first byte is 0x7b")
	f([]byte{0, 0, 0}, "shorter than the registry wire format's 5-byte header")
	f(append(registry.AppendFrame(nil, 99, false), good[5:]...), "schema id 99: the registry says it does not exist")
	f(append(registry.AppendFrame(nil, 3, false), good[5:]...), "schema id 3 is a PROTOBUF schema, not Avro")
	f(append(registry.AppendFrame(nil, 4, false), good[5:]...), "schema id 4 is an Avro string, not a record")
	f(good[:len(good)-1], "invalid Avro for schema id 1: the record ends early")
	f(append(good[:len(good):len(good)], 1), "bytes left after the record")
	f(append(registry.AppendFrame(nil, 1, false), 2, 0x7f), "string or bytes length -64")
	f(append(registry.AppendFrame(nil, 5, false), 0, 2), `column "id": cannot convert JSON array to UInt64`)

	// Unavailable: not a RecordError; the same record decodes later.
	reg.add(6, sr.TypeAvro, schema)
	reg.down = true
	rec := &kgo.Record{Value: append(registry.AppendFrame(nil, 6, false), good[5:]...)}
	blk := p.NewBlock()
	err = p.Append(blk, rec)
	var re *RecordError
	if !errors.Is(err, ErrUnavailable) || errors.As(err, &re) || blk.Rows() != 0 {
		t.Fatalf("registry down: %v (rows %d), want ErrUnavailable and no row", err, blk.Rows())
	}
	// Cached ids keep decoding while it is down.
	if err := p.Append(blk, &kgo.Record{Value: good}); err != nil {
		t.Fatalf("cached id while the registry is down: %v", err)
	}
	reg.down = false
	if err := p.Append(blk, rec); err != nil || blk.Rows() != 2 {
		t.Fatalf("after the registry is back: %v, rows %d", err, blk.Rows())
	}
}

// TestAvroNeedsRegistry: compiling a registry format without one fails in
// one line.
func TestAvroNeedsRegistry(t *testing.T) {
	_, err := Compile(route.Avro, []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}, nil)
	if err == nil || err.Error() != "format avro needs a schema registry (schema_registry.urls)" {
		t.Fatalf("Compile without a registry: %v", err)
	}
}

// TestAvroKey: $key reads a registry-framed key with its schema (a record
// key as JSON), and any other key as its bytes.
func TestAvroKey(t *testing.T) {
	value := `{"type":"record","name":"V","fields":[{"name":"id","type":"long"}]}`
	keyRec := `{"type":"record","name":"K","fields":[{"name":"id","type":"long"},{"name":"region","type":"string"}]}`
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, value)
	reg.add(2, sr.TypeAvro, keyRec)
	reg.add(3, sr.TypeAvro, `"long"`)
	p, err := Compile(route.Avro, []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "_key", Type: "Nullable(String)"}, {Name: "k", Type: "String"}},
		map[string]string{"k": "$key"}, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	v := avroFrame(t, 1, value, map[string]any{"id": int64(1)})
	f := func(key []byte, want string) {
		t.Helper()
		blk := p.NewBlock()
		if err := p.Append(blk, &kgo.Record{Key: key, Value: v}); err != nil {
			t.Errorf("key % x: %v", key, err)
			return
		}
		got := fmt.Sprint(norm(chtype.Parse("Nullable(String)"), rowOf(blk.ColumnData(1), 0)), "|", rowOf(blk.ColumnData(2), 0))
		if got != want {
			t.Errorf("key % x: %s, want %s", key, got, want)
		}
	}
	f(avroFrame(t, 2, keyRec, map[string]any{"id": int64(5), "region": "eu"}), `{"id":5,"region":"eu"}|{"id":5,"region":"eu"}`)
	f(avroFrame(t, 3, `"long"`, int64(-3)), "-3|-3")
	f([]byte("plain"), "plain|plain")
	f(nil, "<nil>|")
	blk := p.NewBlock()
	err = p.Append(blk, &kgo.Record{Key: registry.AppendFrame(nil, 42, false), Value: v})
	if err == nil || !strings.Contains(err.Error(), "record key: ") || !strings.Contains(err.Error(), "schema id 42: the registry says it does not exist") {
		t.Fatalf("unknown key schema: %v", err)
	}
}

package decode

import (
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/chschema"
	"sink/internal/decode/drift"
	"sink/internal/route"
)

// The servers' generations as EvolveTypes describes them.
var (
	types18 = chschema.ServerTypes{}
	types26 = chschema.ServerTypes{Bool: true, DateTime64: true, JSON: true, Date32: true, Map: true}
)

// driftAvro is a record schema with a field every type of the mapping
// has; only id has a column in the tests below. The avro reader's own
// tests seed their fuzz target with it too.
var driftAvro = strings.TrimSpace(testdataText("testdata/avro/drift.avsc"))

// testdataText is the text of a file under testdata.
func testdataText(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func driftAvroRecord(t testing.TB) []byte {
	return avroFrame(t, 1, driftAvro, map[string]any{
		"id": int64(1), "flag": true, "n": int32(-5), "fl": float32(1.5), "s": "text", "raw": []byte("raw"),
		"kind": "B", "uid": "0a1b2c3d-0000-4000-8000-000000000001", "price": big.NewRat(12345, 100),
		"day": time.Date(2024, 5, 17, 0, 0, 0, 0, time.UTC), "at": time.UnixMilli(1715949296123).UTC(),
		"at_us": time.UnixMicro(1715949296123456).UTC(),
		"maybe": map[string]any{"string": "m"}, "either": map[string]any{"long": int64(7)},
		"inner": map[string]any{"a": int32(3)}, "nums": []int64{1, 2}, "ins": []map[string]any{{"a": int32(4)}},
		"attrs": map[string]float64{"x": 0.5},
	})
}

// TestAvroSchemaColumnsFill: every column the schema's unmapped fields
// would get, on either server generation, is one the decoder then fills
// from the same record.
func TestAvroSchemaColumnsFill(t *testing.T) {
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, driftAvro)
	rec := &kgo.Record{Topic: "t", Value: driftAvroRecord(t)}
	checkSchemaColumnsFill(t, route.Avro, reg, rec, 17)
}

func TestProtobufSchemaColumnsFill(t *testing.T) {
	rec := &kgo.Record{Topic: "t", Value: protoRecord(t, "Event", `{"id":"1","i32":-2,"s64":"3","f64":"4","flag":true,"fl":1.5,"db":2.5,
		"name":"n","raw":"cmF3","kind":"VIEW","nums":["1","2"],"tags":["a"],"counts":{"x":"1"},"inner":{"a":"x","b":2,"k":"CLICK"},
		"text":"t","ts":"2024-05-17T12:34:56.123456789Z","dur":"1.5s","maybe":"9","attrs":{"k":[1,"v"]},"price":{"units":"5","cents":10},
		"opt":3,"items":[{"a":"y"}],"by_id":{"1":{"b":1}},"big":"18446744073709551615","label":"L"}`, 0)}
	checkSchemaColumnsFill(t, route.Protobuf, protoRegistry(), rec, 25)
}

// checkSchemaColumnsFill decodes rec with a plan whose only column is id,
// expects fields unmapped fields typed by the schema, then decodes rec
// again into a table with a column of each field's type, per server
// generation, and expects every column filled without error.
func checkSchemaColumnsFill(t *testing.T, format route.Format, reg Registry, rec *kgo.Record, fields int) {
	t.Helper()
	p, err := Compile(format, []chschema.ColumnSchema{{Name: "id", Type: "Int64"}}, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append(p.NewBlock(), rec); err != nil {
		t.Fatal(err)
	}
	un := unmappedOf(p)
	if len(un) != fields {
		t.Fatalf("%d unmapped fields, want %d: %v", len(un), fields, un)
	}
	for _, srv := range []chschema.ServerTypes{types18, types26} {
		for _, nullable := range []bool{false, true} {
			cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}}
			for name, u := range un {
				if u.Schema == nil || u.Count != 1 || !u.New() || !strings.HasPrefix(u.Example, "schema type ") {
					t.Errorf("%s: %+v: want typed by the schema, counted once", name, u)
				}
				typ, err := u.Column(srv, nullable)
				if err != nil {
					t.Errorf("%s (%s): %v", name, u.TypeName(), err)
					continue
				}
				cols = append(cols, chschema.ColumnSchema{Name: name, Type: typ})
			}
			full, err := Compile(format, cols, nil, WithRegistry(reg))
			if err != nil {
				t.Fatalf("%+v: %v", srv, err)
			}
			blk := full.NewBlock()
			if err := full.Append(blk, rec); err != nil {
				t.Errorf("server %+v, nullable %v: %v (columns %v)", srv, nullable, err, cols)
				continue
			}
			if got := unmappedOf(full); len(got) != 0 {
				t.Errorf("every field has a column, yet unmapped: %v", got)
			}
			if got := firstRow(cols[0].Type, blk.ColumnData(0)); got != int64(1) {
				t.Errorf("id = %v", got)
			}
		}
	}
}

// TestUnmappedSchemaFieldsCounted: a new schema id with an added field
// counts it from its first record; the records of the old schema count
// only the fields they have.
func TestUnmappedSchemaFieldsCounted(t *testing.T) {
	const v1 = `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"a","type":"string"}]}`
	const v2 = `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"a","type":"string"},` +
		`{"name":"b","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null}]}`
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, v1)
	reg.add(2, sr.TypeAvro, v2)
	p, err := Compile(route.Avro, []chschema.ColumnSchema{{Name: "id", Type: "Int64"}}, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	add := func(id int, schema string, v map[string]any) {
		t.Helper()
		if err := p.Append(blk, &kgo.Record{Value: avroFrame(t, id, schema, v)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		add(1, v1, map[string]any{"id": int64(i), "a": "x"})
	}
	add(2, v2, map[string]any{"id": int64(3), "a": "y", "b": nil})
	add(2, v2, map[string]any{"id": int64(4), "a": "y", "b": map[string]any{"long.timestamp-micros": time.UnixMicro(5).UTC()}})
	// A record that does not decode is not counted.
	if err := p.Append(blk, &kgo.Record{Value: append(avroFrame(t, 2, v2, map[string]any{"id": int64(5), "a": "z", "b": nil}), 0)}); err == nil {
		t.Fatal("a record with trailing bytes decoded")
	}
	got := unmappedOf(p)
	if len(got) != 2 || got["a"].Count != 5 || got["b"].Count != 2 {
		t.Fatalf("unmapped %+v; want a: 5, b: 2", got)
	}
	if typ, _ := got["b"].Column(types26, false); typ != "Nullable(DateTime64(6))" || got["b"].TypeName() == "" {
		t.Errorf("b: %q (%s), want Nullable(DateTime64(6))", typ, got["b"].TypeName())
	}
	// Taken: the counts start over, and a field is new only once.
	add(2, v2, map[string]any{"id": int64(6), "a": "y", "b": nil})
	got = unmappedOf(p)
	if got["b"].Count != 1 || got["b"].New() {
		t.Errorf("after a take: %+v; want b counted once, not new", got["b"])
	}
}

// TestUnmappedSchemaFieldsBounded: past MaxUnmappedFields distinct names,
// the schema's other fields count as OverflowField.
func TestUnmappedSchemaFieldsBounded(t *testing.T) {
	var fields []string
	rec := map[string]any{"id": int64(1)}
	for i := 0; i < drift.MaxUnmappedFields+3; i++ {
		name := "f" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		fields = append(fields, `{"name":"`+name+`","type":"int"}`)
		rec[name] = int32(i)
	}
	schema := `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},` + strings.Join(fields, ",") + `]}`
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, schema)
	p, err := Compile(route.Avro, []chschema.ColumnSchema{{Name: "id", Type: "Int64"}}, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for i := 0; i < 2; i++ {
		if err := p.Append(blk, &kgo.Record{Value: avroFrame(t, 1, schema, rec)}); err != nil {
			t.Fatal(err)
		}
	}
	got := unmappedOf(p)
	if len(got) != drift.MaxUnmappedFields+1 || got[drift.OverflowField].Count != 2*3 {
		t.Fatalf("%d fields, overflow %d; want %d and 6", len(got), got[drift.OverflowField].Count, drift.MaxUnmappedFields+1)
	}
}

// TestUnmappedSchemaFieldsNoAllocs: counting the fields of a schema that
// no column reads costs a record no allocation (payload and session have
// no column here).
func TestUnmappedSchemaFieldsNoAllocs(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "user_id", Type: "UInt64"}, {Name: "ts", Type: "DateTime"}}
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, benchAvroSchema)
	reg.schemas[benchProtoSchema.ID] = benchProtoSchema
	for _, c := range []struct {
		format route.Format
		values [][]byte
	}{{route.Avro, benchAvroEvents(t, 64)}, {route.Protobuf, benchProtoEvents(t, 64)}} {
		p, err := Compile(c.format, cols, nil, WithRegistry(reg))
		if err != nil {
			t.Fatal(err)
		}
		requireZeroAllocs(t, p, c.values)
		got := unmappedOf(p)
		for _, f := range []string{"event_type", "channel", "cost", "payload", "session"} {
			if got[f].Count < 8000 {
				t.Errorf("%s: %s counted %d times, want every record", c.format, f, got[f].Count)
			}
		}
	}
}

// TestUnmappedDebeziumAvroImage: debezium-avro counts the row image's
// fields that no column reads (by the after record's schema, for creates
// and deletes alike), not the envelope's; a delete read from the key is
// not counted. Counting allocates nothing.
func TestUnmappedDebeziumAvroImage(t *testing.T) {
	var cols []chschema.ColumnSchema
	for _, c := range customerAvroCols {
		if c.Name != "email" && c.Name != "signup" {
			cols = append(cols, c)
		}
	}
	reg := newFakeRegistry()
	reg.add(11, sr.TypeAvro, dbzAvroEnvelope)
	reg.add(12, sr.TypeAvro, dbzAvroKey)
	p, err := Compile(route.DebeziumAvro, cols, map[string]string{"op": "$op", "tbl": "$source.table", "ts": "$ts_ms"}, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	row := dbzAvroImage(5, "Ann", "ann@example.com", -12345)
	key := avroFrame(t, 12, dbzAvroKey, map[string]any{"id": int32(5)})
	blk := p.NewBlock()
	for i, v := range [][]byte{
		dbzAvroEvent(t, "c", nil, row, "postgresql", int64(33)),
		dbzAvroEvent(t, "d", row, nil, "postgresql", int64(34)),
		dbzAvroEvent(t, "d", nil, nil, "postgresql", int64(35)), // from the key
	} {
		if err := p.Append(blk, &kgo.Record{Value: v, Key: key, Offset: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := unmappedOf(p)
	if len(got) != 2 || got["email"].Count != 2 || got["signup"].Count != 2 {
		t.Fatalf("unmapped %+v; want email and signup, 2 each", got)
	}
	if typ, _ := got["signup"].Column(types26, false); typ != "Nullable(Date32)" {
		t.Errorf("signup: %s (%s), want Nullable(Date32)", typ, got["signup"].TypeName())
	}
	requireZeroAllocs(t, p, [][]byte{dbzAvroEvent(t, "u", row, row, "postgresql", int64(40))})
}

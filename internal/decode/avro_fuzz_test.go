package decode

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/chschema"
	"sink/internal/registry"
	"sink/internal/route"
)

// avroFuzzSchema has a field of every kind the avro format reads
// differently: scalars, logical types, unions, enums, fixed, nested
// records, arrays and maps (read as JSON), and a recursive type (skipped).
const avroFuzzSchema = `{"type":"record","name":"F","fields":[
	{"name":"id","type":"long"},
	{"name":"ok","type":"boolean"},
	{"name":"f","type":"float"},
	{"name":"d","type":"double"},
	{"name":"s","type":["null","string"]},
	{"name":"b","type":"bytes"},
	{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
	{"name":"fx","type":{"type":"fixed","name":"FX","size":4}},
	{"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":4}},
	{"name":"day","type":{"type":"int","logicalType":"date"}},
	{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
	{"name":"u","type":["string","long"]},
	{"name":"rec","type":{"type":"record","name":"In","fields":[{"name":"a","type":"int"},{"name":"m","type":{"type":"map","values":"string"}}]}},
	{"name":"arr","type":{"type":"array","items":["null","long"]}},
	{"name":"list","type":["null",{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}]}]}`

var avroFuzzCols = []chschema.ColumnSchema{
	{Name: "id", Type: "Int64"},
	{Name: "ok", Type: "Bool"},
	{Name: "f", Type: "Float32"},
	{Name: "d", Type: "Float64"},
	{Name: "s", Type: "Nullable(String)"},
	{Name: "b", Type: "String"},
	{Name: "e", Type: "LowCardinality(String)"},
	{Name: "fx", Type: "FixedString(4)"},
	{Name: "dec", Type: "Decimal(20, 4)"},
	{Name: "day", Type: "Date32"},
	{Name: "ts", Type: "DateTime64(6)"},
	{Name: "u", Type: "String"},
	{Name: "rec", Type: "String"},
	{Name: "a", Type: "Int32"},
	{Name: "color", Type: "String"},
	{Name: "arr", Type: "Array(Nullable(Int64))"},
}

// FuzzAvroAppend: no payload makes the avro format panic; a payload is a
// row or a *RecordError, and a failed Append leaves the block unchanged.
func FuzzAvroAppend(f *testing.F) {
	reg := newFakeRegistry()
	reg.add(1, sr.TypeAvro, avroFuzzSchema)
	p, err := Compile(route.Avro, avroFuzzCols, map[string]string{"a": "rec.a", "color": "rec.m.color"}, WithRegistry(reg))
	if err != nil {
		f.Fatal(err)
	}
	schema := avro.MustParse(avroFuzzSchema)
	good, err := avro.Marshal(schema, map[string]any{
		"id": int64(-5), "ok": true, "f": float32(1.5), "d": 2.25, "s": "x", "b": []byte{1, 2}, "e": "B",
		"fx": [4]byte{'a', 'b', 'c', 'd'}, "dec": big.NewRat(12345, 10000), "day": time.Date(2024, 5, 17, 0, 0, 0, 0, time.UTC),
		"ts": time.Date(2024, 5, 17, 1, 2, 3, 4000, time.UTC), "u": map[string]any{"long": int64(7)},
		"rec": map[string]any{"a": 3, "m": map[string]string{"color": "red"}}, "arr": []any{int64(1), nil},
		"list": map[string]any{"Node": map[string]any{"v": 1, "next": map[string]any{"Node": map[string]any{"v": 2, "next": nil}}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, payload []byte) {
		blk := p.NewBlock()
		r := &kgo.Record{Value: append(registry.AppendFrame(nil, 1, false), payload...)}
		if err := p.Append(blk, r); err != nil {
			noPanic(t, err)
			if _, ok := err.(*RecordError); !ok {
				t.Fatalf("error %T %v, want a *RecordError", err, err)
			}
			if blk.Rows() != 0 || blk.Bytes() != 0 {
				t.Fatalf("failed Append left rows=%d bytes=%d", blk.Rows(), blk.Bytes())
			}
			return
		}
		if blk.Rows() != 1 {
			t.Fatalf("Rows() = %d", blk.Rows())
		}
		for i := range blk.Columns() {
			_ = blk.ColumnData(i)
		}
	})
}

// FuzzDebeziumAvroAppend: no envelope or key payload makes debezium-avro
// panic; each is a row, a skip or a *RecordError, and a failed Append
// leaves the block unchanged.
func FuzzDebeziumAvroAppend(f *testing.F) {
	reg := newFakeRegistry()
	reg.add(11, sr.TypeAvro, dbzAvroEnvelope)
	reg.add(12, sr.TypeAvro, dbzAvroKey)
	p, err := Compile(route.DebeziumAvro, customerAvroCols, map[string]string{"op": "$op", "tbl": "$source.table", "ts": "$ts_ms"}, WithRegistry(reg))
	if err != nil {
		f.Fatal(err)
	}
	row := dbzAvroImage(5, "Ann", "ann@example.com", -12345)
	for _, v := range [][]byte{
		dbzAvroEvent(f, "u", row, row, "postgresql", int64(40)),
		dbzAvroEvent(f, "d", nil, nil, "postgresql", int64(41)),
		dbzAvroEvent(f, "c", nil, row, "mysql", nil),
	} {
		f.Add(v[5:], []byte{2, 10})
	}
	f.Fuzz(func(t *testing.T, value, key []byte) {
		blk := p.NewBlock()
		r := &kgo.Record{Value: append(registry.AppendFrame(nil, 11, false), value...), Key: append(registry.AppendFrame(nil, 12, false), key...)}
		err := p.Append(blk, r)
		if err != nil {
			noPanic(t, err)
			if _, ok := err.(*RecordError); !ok && !errors.Is(err, ErrSkip) {
				t.Fatalf("error %T %v, want a *RecordError or ErrSkip", err, err)
			}
			if blk.Rows() != 0 || blk.Bytes() != 0 {
				t.Fatalf("failed Append left rows=%d bytes=%d", blk.Rows(), blk.Bytes())
			}
			return
		}
		if blk.Rows() != 1 {
			t.Fatalf("Rows() = %d", blk.Rows())
		}
	})
}

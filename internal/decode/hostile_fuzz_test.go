package decode

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/chschema"
	"sink/internal/registry"
	"sink/internal/route"
)

// Fuzz targets whose schema is fuzzed with the record: hostile schemas
// (huge fixed, deep nesting, recursion without a base case, wide
// messages) are input too. Seeded with the hostile tests' cases.

// fuzzRowBytes is the row bound the schema fuzz targets decode under,
// small enough for the fuzzer to reach.
const fuzzRowBytes = 64 << 10

// fuzzSchemaAppend compiles a plan of cols for schema (id 1, of typ),
// appends value twice (the second with the schema compiled) and checks
// what any record must give: a row within the row bound, or a bad record
// (never a recovered panic) that leaves the block as it was.
func fuzzSchemaAppend(t *testing.T, format route.Format, typ sr.SchemaType, schema string, cols []chschema.ColumnSchema, value []byte) {
	reg := newFakeRegistry()
	reg.add(1, typ, schema)
	p, err := Compile(format, cols, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(Policy{MaxRowBytes: fuzzRowBytes})
	blk := p.NewBlock()
	r := &kgo.Record{Topic: "t", Value: value}
	for range 2 {
		rows, bytes := blk.Rows(), blk.Bytes()
		err := p.Append(blk, r)
		if err != nil {
			noPanic(t, err)
			var re *RecordError
			if !errors.As(err, &re) && !errors.Is(err, ErrSkip) {
				t.Fatalf("error %T %v, want a *RecordError or ErrSkip", err, err)
			}
			if blk.Rows() != rows || blk.Bytes() != bytes {
				t.Fatalf("failed Append changed the block: rows %d→%d bytes %d→%d", rows, blk.Rows(), bytes, blk.Bytes())
			}
			continue
		}
		if blk.Rows() != rows+1 || blk.Bytes()-bytes > fuzzRowBytes {
			t.Fatalf("Append made %d rows of %d bytes, want one of at most %d", blk.Rows()-rows, blk.Bytes()-bytes, fuzzRowBytes)
		}
	}
}

// FuzzAvroSchemaAppend: no Avro schema and payload make the avro format
// panic, allocate past the record, or make a row past the bound.
func FuzzAvroSchemaAppend(f *testing.F) {
	for _, c := range avroHostileCases() {
		f.Add(c.schema, c.value)
	}
	f.Add(avroFuzzSchema, []byte{0x02, 0x01})
	f.Add(`{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"next","type":["null","R"]}]}`, hostileAvroChain(200))
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "a", Type: "String"}, {Name: "f", Type: "Nullable(String)"}}
	f.Fuzz(func(t *testing.T, schema string, payload []byte) {
		fuzzSchemaAppend(t, route.Avro, sr.TypeAvro, schema, cols, append(registry.AppendFrame(nil, 1, false), payload...))
	})
}

// FuzzProtobufSchemaAppend: likewise for .proto texts and payloads of
// their first message.
func FuzzProtobufSchemaAppend(f *testing.F) {
	// 300 empty messages of 30 fields: past the row bound as JSON (the
	// 300-field message of the tests slows the fuzzer to a crawl).
	wide := "syntax = \"proto3\";\nmessage Outer { repeated Wide items = 1; }\nmessage Wide {"
	for i := range 30 {
		wide += fmt.Sprintf(" int32 field_%03d = %d;", i, i+1)
	}
	var empties []byte
	for range 300 {
		empties = append(empties, 0x0a, 0x00)
	}
	f.Add(wide+" }\n", empties)
	f.Add("syntax = \"proto3\";\nmessage N { N next = 1; int32 v = 2; }\n", hostileProtoChain(200))
	f.Add(hostileProtoOption(70), []byte{0x08, 0x01})
	f.Add("syntax = \"proto3\";\nmessage M { repeated int64 items = 1; map<string, M> next = 2; int64 id = 3; }\n", []byte{0x0a, 0x03, 0x01, 0x02, 0x03, 0x18, 0x05})
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "items", Type: "String"}, {Name: "next", Type: "Nullable(String)"}}
	f.Fuzz(func(t *testing.T, schema string, payload []byte) {
		fuzzSchemaAppend(t, route.Protobuf, sr.TypeProtobuf, schema, cols, append(registry.AppendFrame(nil, 1, true, 0), payload...))
	})
}

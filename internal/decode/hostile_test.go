package decode

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/decode/format"
	"sink/internal/registry"
	"sink/internal/route"
)

// Hostile input: records and schemas written to take the decoder down or
// make one small record into a huge row. Each case must end as a bad
// record (a *RecordError with its reason), allocate no more than a stated
// bound while it is decoded, and leave the block unchanged. The bounds
// they pin are the "Limits on input" of docs/operations.md (limits.go).

// hostileCase is one hostile record for one plan.
type hostileCase struct {
	name    string
	format  route.Format
	schema  string        // the registry's schema id 1 (avro, protobuf, json-schema)
	typ     sr.SchemaType // of schema
	cols    []chschema.ColumnSchema
	mapping map[string]string
	policy  Policy
	value   []byte // the record value; registry formats: the payload after the frame
	want    string // in the bad record's reason
	alloc   uint64 // the most bytes one Append of it may allocate
}

// avroVarint is Avro's zigzag varint of n (an int, long or length).
func avroVarint(n int64) []byte { return binary.AppendVarint(nil, n) }

// hostilePlan compiles c's plan, its schema registered as id 1.
func hostilePlan(t *testing.T, c hostileCase) *Plan {
	t.Helper()
	reg := newFakeRegistry()
	if c.schema != "" {
		reg.add(1, c.typ, c.schema)
	}
	p, err := Compile(c.format, c.cols, c.mapping, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	p.SetPolicy(c.policy)
	return p
}

// hostileRecord frames c's value as its format's records are framed.
func hostileRecord(c hostileCase) *kgo.Record {
	v := c.value
	switch c.format {
	case route.Avro, route.JSONSchema, route.DebeziumAvro:
		v = append(registry.AppendFrame(nil, 1, false), c.value...)
	case route.Protobuf:
		v = append(registry.AppendFrame(nil, 1, true, 0), c.value...)
	}
	return &kgo.Record{Topic: "hostile", Partition: 3, Offset: 42, Value: v}
}

// appendAlloc appends r to a new block of p and returns the error and the
// bytes the Append allocated.
func appendAlloc(p *Plan, blk *column.Block, r *kgo.Record) (error, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := p.Append(blk, r)
	runtime.ReadMemStats(&after)
	return err, after.TotalAlloc - before.TotalAlloc
}

func runHostile(t *testing.T, c hostileCase) {
	t.Helper()
	p := hostilePlan(t, c)
	r := hostileRecord(c)
	blk := p.NewBlock()
	// The first Append compiles the schema (its cost is the schema's, and
	// cached); the second is what each further such record costs.
	for i := range 2 {
		err, alloc := appendAlloc(p, blk, r)
		var re *RecordError
		if !errors.As(err, &re) {
			t.Fatalf("Append %d: %v (%T), want a bad record with %q", i, err, err, c.want)
		}
		if !strings.Contains(re.Reason, c.want) {
			t.Fatalf("Append %d: reason %q, want %q in it", i, re.Reason, c.want)
		}
		if re.Topic != "hostile" || re.Partition != 3 || re.Offset != 42 {
			t.Fatalf("bad record names %s[%d]@%d, want hostile[3]@42", re.Topic, re.Partition, re.Offset)
		}
		if blk.Rows() != 0 || blk.Bytes() != 0 {
			t.Fatalf("failed Append left rows=%d bytes=%d", blk.Rows(), blk.Bytes())
		}
		if i == 1 && alloc > c.alloc {
			t.Fatalf("Append allocated %d bytes for a %d-byte record, want at most %d", alloc, len(r.Value), c.alloc)
		}
	}
}

const (
	kib = 1 << 10
	mib = 1 << 20
)

var idCol = []chschema.ColumnSchema{{Name: "id", Type: "Int64"}}

// avroHostileCases are Avro schemas and records past the limits.
func avroHostileCases() []hostileCase {
	emptyArray := func(items string) string {
		return `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"a","type":{"type":"array","items":` + items + `}}]}`
	}
	// id 1, then one block of a million items, then the end of the
	// array; and three blocks of 50,000 items.
	million := append(append(avroVarint(1), avroVarint(1_000_000)...), 0)
	var blocks []byte
	blocks = append(blocks, avroVarint(1)...)
	for range 3 {
		blocks = append(blocks, avroVarint(50_000)...)
	}
	blocks = append(blocks, 0)
	var deep strings.Builder
	deep.WriteString(`{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"a","type":`)
	for range 200 {
		deep.WriteString(`{"type":"array","items":`)
	}
	deep.WriteString(`"long"`)
	deep.WriteString(strings.Repeat("}", 200) + `}]}`)
	decimal := func(n int) []byte {
		b := append(avroVarint(1), avroVarint(int64(n))...)
		start := len(b)
		b = append(b, make([]byte, n)...)
		b[start] = 0x7f
		return b
	}
	decimalSchema := `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"a","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}}]}`
	strCols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "a", Type: "String"}}
	return []hostileCase{{
		name:   "fixed larger than the record",
		schema: `{"type":"record","name":"R","fields":[{"name":"f","type":{"type":"fixed","name":"F","size":2000000000}}]}`,
		cols:   []chschema.ColumnSchema{{Name: "f", Type: "String"}},
		value:  make([]byte, 20),
		want:   "fixed of 2000000000 bytes in a 20-byte record",
		alloc:  64 * kib,
	}, {
		name:   "fixed larger than the record, read as JSON",
		schema: `{"type":"record","name":"R","fields":[{"name":"r","type":{"type":"record","name":"In","fields":[{"name":"f","type":{"type":"fixed","name":"F","size":2000000000}}]}}]}`,
		cols:   []chschema.ColumnSchema{{Name: "r", Type: "String"}},
		value:  make([]byte, 20),
		want:   "fixed of 2000000000 bytes in a 20-byte record",
		alloc:  64 * kib,
	}, {
		name:   "150,000 null items, read as JSON",
		schema: emptyArray(`"null"`),
		cols:   strCols,
		value:  blocks,
		want:   "more than 65536 values that take no bytes of the record",
		alloc:  2 * mib,
	}, {
		name:   "150,000 null items, skipped",
		schema: emptyArray(`"null"`),
		cols:   idCol,
		value:  blocks,
		want:   "more than 65536 values that take no bytes of the record",
		alloc:  64 * kib,
	}, {
		name:   "150,000 empty records, read as JSON",
		schema: emptyArray(`{"type":"record","name":"E","fields":[]}`),
		cols:   strCols,
		value:  blocks,
		want:   "more than 65536 values that take no bytes of the record",
		alloc:  2 * mib,
	}, {
		name:   "150,000 null fields of records, skipped",
		schema: emptyArray(`{"type":"record","name":"E","fields":[{"name":"n","type":"null"}]}`),
		cols:   idCol,
		value:  blocks,
		want:   "more than 65536 values that take no bytes of the record",
		alloc:  64 * kib,
	}, {
		name:   "a million null items in one block",
		schema: emptyArray(`"null"`),
		cols:   strCols,
		value:  million,
		want:   "block of 1000000 items in a 5-byte record",
		alloc:  64 * kib,
	}, {
		name:   "a million items of a byte each in a 5-byte record",
		schema: emptyArray(`"long"`),
		cols:   strCols,
		value:  million,
		want:   "block of 1000000 items in a 5-byte record",
		alloc:  64 * kib,
	}, {
		name:   "a record that always holds another",
		schema: `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"next","type":"R"}]}`,
		cols:   idCol,
		value:  avroVarint(1),
		want:   "record R always holds another record of its kind",
		alloc:  64 * kib,
	}, {
		name:   "a schema nesting 200 levels",
		schema: deep.String(),
		cols:   idCol,
		value:  append(avroVarint(1), 0),
		want:   "nests deeper than 128 levels",
		alloc:  64 * kib,
	}, {
		name:   "a 600 KiB decimal",
		schema: decimalSchema,
		cols:   strCols,
		value:  decimal(600 * kib),
		want:   "decimal of 614400 bytes, more than 65536",
		alloc:  64 * kib,
	}, {
		name:   "a 1 KiB decimal of precision 10",
		schema: decimalSchema,
		cols:   strCols,
		value:  decimal(kib),
		want:   "decimal with more digits than its precision 10",
		alloc:  64 * kib,
	}}
}

func TestHostileAvro(t *testing.T) {
	for _, c := range avroHostileCases() {
		t.Run(c.name, func(t *testing.T) {
			c.format, c.typ = route.Avro, sr.TypeAvro
			runHostile(t, c)
		})
	}
}

// TestHostileAvroFixedPastAnyRecord: a fixed of 10^12 bytes. Compiled as
// the schema says, the first record would ask for that much memory, which
// ends the process ("fatal error: runtime: out of memory"); no recover
// catches it. So the record is decoded in a child process, which must
// exit normally with the bad record's reason.
func TestHostileAvroFixedPastAnyRecord(t *testing.T) {
	const schema = `{"type":"record","name":"R","fields":[{"name":"f","type":{"type":"fixed","name":"F","size":1000000000000}}]}`
	if os.Getenv("SINK_TEST_HOSTILE_CHILD") == "1" {
		for _, cols := range [][]chschema.ColumnSchema{{{Name: "f", Type: "String"}}, {{Name: "other", Type: "String"}}} {
			c := hostileCase{format: route.Avro, typ: sr.TypeAvro, schema: schema, cols: cols, value: make([]byte, 20)}
			err := hostilePlan(t, c).Append(hostilePlan(t, c).NewBlock(), hostileRecord(c))
			fmt.Printf("column %s: %v\n", cols[0].Name, err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileAvroFixedPastAnyRecord$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "SINK_TEST_HOSTILE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, col := range []string{"f", "other"} {
		want := fmt.Sprintf("column %s: decode topic \"hostile\" partition 3 offset 42: schema id 1: invalid Avro schema: fixed F is 1000000000000 bytes, more than any record holds (2147483647)", col)
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}

// protoWide is a message of 300 int32 fields and a message repeating it.
func protoWide() string {
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\nmessage Outer { repeated Wide items = 1; }\nmessage Wide {")
	for i := range 300 {
		fmt.Fprintf(&b, " int32 field_%03d = %d;", i, i+1)
	}
	b.WriteString(" }\n")
	return b.String()
}

func TestHostileProtobuf(t *testing.T) {
	// 20,000 empty Wide items, two bytes each: as JSON, every one of
	// their 300 fields at its default, 6,000,000 values.
	var empties []byte
	for range 20_000 {
		empties = append(empties, 0x0a, 0x00)
	}
	for _, c := range []hostileCase{{
		name:   "an option value nested 8,000 deep",
		schema: hostileProtoOption(8000),
		cols:   []chschema.ColumnSchema{{Name: "a", Type: "Int32"}},
		value:  []byte{0x08, 0x01},
		want:   "the .proto text nests deeper than 64 levels",
		alloc:  64 * kib,
	}, {
		name:   "20,000 empty messages of 300 fields",
		schema: protoWide(),
		cols:   []chschema.ColumnSchema{{Name: "items", Type: "String"}},
		value:  empties,
		want:   "more than 65536 values that take no bytes of the record",
		// The text of 65,536 defaults ("field_123":0), with its growth.
		alloc: 8 * mib,
	}} {
		t.Run(c.name, func(t *testing.T) {
			c.format, c.typ = route.Protobuf, sr.TypeProtobuf
			runHostile(t, c)
		})
	}
}

func TestHostileDebeziumDecimal(t *testing.T) {
	raw := make([]byte, 560*kib)
	raw[0] = 0x7f
	b64 := base64.StdEncoding.EncodeToString(raw)
	value := []byte(`{"op":"c","ts_ms":1,"after":{"id":1,"total":"` + b64 + `"}}`)
	small := []byte(`{"op":"c","ts_ms":1,"after":{"id":1,"total":"` + b64[:2800] + `"}}`)
	for _, c := range []hostileCase{{
		name:  "750 KB into Decimal(12, 2)",
		cols:  []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "total", Type: "Decimal(12, 2)"}},
		value: value,
		want:  "decimal of 573440 bytes, more than 65536",
		alloc: 2 * uint64(len(value)),
	}, {
		name:  "2 KB into Decimal(12, 2)",
		cols:  []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "total", Type: "Decimal(12, 2)"}},
		value: small,
		want:  "decimal with more digits than Decimal(12, 2) holds",
		alloc: 64 * kib,
	}, {
		name: "750 KB with a schema, into String",
		cols: []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "total", Type: "String"}},
		value: []byte(`{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[{"field":"id","type":"int64"},` +
			`{"field":"total","type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}}]}]},` +
			`"payload":{"op":"c","ts_ms":1,"after":{"id":1,"total":"` + b64 + `"}}}`),
		want:  "decimal of 573440 bytes, more than 65536",
		alloc: 2 * uint64(len(value)),
	}} {
		t.Run(c.name, func(t *testing.T) {
			c.format = route.Debezium
			c.cols = append(c.cols, chschema.ColumnSchema{Name: "_version", Type: "UInt64"}, chschema.ColumnSchema{Name: "_deleted", Type: "UInt8"})
			runHostile(t, c)
		})
	}
}

// TestHostileRowSize: a row is refused when it would hold more than
// Policy.MaxRowBytes, and a nested value stops being rendered there.
func TestHostileRowSize(t *testing.T) {
	big := strings.Repeat("x", 300*kib)
	mapSchema := `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"a","type":{"type":"map","values":"string"}}]}`
	var m []byte
	m = append(m, avroVarint(1)...)
	m = append(m, avroVarint(4)...)
	for i := range 4 {
		k := fmt.Sprintf("k%d", i)
		m = append(m, avroVarint(int64(len(k)))...)
		m = append(m, k...)
		m = append(m, avroVarint(int64(len(big)))...)
		m = append(m, big...)
	}
	m = append(m, 0)
	for _, c := range []hostileCase{{
		name:   "json",
		format: route.JSON,
		cols:   []chschema.ColumnSchema{{Name: "a", Type: "String"}, {Name: "b", Type: "String"}},
		value:  []byte(`{"a":"` + big + `","b":"` + big + `"}`),
		policy: Policy{MaxRowBytes: 512 * kib},
		want:   "the row would hold more than 524288 bytes decoded (batch.max_bytes)",
		alloc:  2 * mib,
	}, {
		name:   "avro map read as JSON",
		format: route.Avro, typ: sr.TypeAvro, schema: mapSchema,
		cols:   []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "a", Type: "String"}},
		value:  m,
		policy: Policy{MaxRowBytes: 512 * kib},
		want:   "more than 524288 bytes as JSON (batch.max_bytes)",
		alloc:  4 * mib,
	}} {
		t.Run(c.name, func(t *testing.T) { runHostile(t, c) })
	}
}

// TestHostileNesting pins the nesting bounds of each format's records.
func TestHostileNesting(t *testing.T) {
	deepJSON := `{"id":1,"a":` + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000) + `}`
	for _, c := range []hostileCase{{
		name: "json", format: route.JSON, cols: idCol,
		value: []byte(deepJSON), want: "nested deeper than 300 levels", alloc: 64 * kib,
	}, {
		name: "json-schema", format: route.JSONSchema, typ: sr.TypeJSON, schema: `{"type":"object"}`, cols: idCol,
		value: []byte(deepJSON), want: "nested deeper than 300 levels", alloc: 64 * kib,
	}, {
		name: "debezium envelope", format: route.Debezium,
		cols:  append(append([]chschema.ColumnSchema(nil), idCol...), chschema.ColumnSchema{Name: "_version", Type: "UInt64"}, chschema.ColumnSchema{Name: "_deleted", Type: "UInt8"}),
		value: []byte(`{"op":"c","ts_ms":1,"after":` + deepJSON + `}`), want: "it exceeds 300",
		// fastjson's error at depth 300 is built at each of the 300
		// levels: about 4.5 MB, whatever the record's size.
		alloc: 8 * mib,
	}, {
		name: "avro", format: route.Avro, typ: sr.TypeAvro, cols: idCol,
		schema: `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"next","type":["null","R"]}]}`,
		value:  hostileAvroChain(200), want: "nest deeper than 128", alloc: 64 * kib,
	}, {
		name: "protobuf", format: route.Protobuf, typ: sr.TypeProtobuf, cols: []chschema.ColumnSchema{{Name: "next", Type: "String"}},
		schema: "syntax = \"proto3\";\nmessage N { N next = 1; int32 v = 2; }\n",
		value:  hostileProtoChain(200), want: "nest deeper than 100", alloc: 64 * kib,
	}} {
		t.Run(c.name, func(t *testing.T) { runHostile(t, c) })
	}
}

// hostileProtoOption is a .proto text whose message M has an option
// value nested n levels deep (protocompile takes time growing with the
// square of n: 1 s for 8,000).
func hostileProtoOption(n int) string {
	return "syntax = \"proto3\";\nimport \"google/protobuf/descriptor.proto\";\nmessage O { O o = 1; int32 v = 2; }\n" +
		"extend google.protobuf.MessageOptions { O opt = 50000; }\nmessage M { option (opt) = " +
		strings.Repeat("{o: ", n) + "{v: 1}" + strings.Repeat("}", n) + "; int32 a = 1; }\n"
}

// hostileAvroChain is a record R {id, next: [null, R]} nesting n deep.
func hostileAvroChain(n int) []byte {
	var b []byte
	for range n {
		b = append(b, avroVarint(1)...) // id
		b = append(b, avroVarint(1)...) // next: the R branch
	}
	b = append(b, avroVarint(1)...)
	return append(b, avroVarint(0)...) // the last next is null
}

// hostileProtoChain is a message N {next: N} nesting n deep.
func hostileProtoChain(n int) []byte {
	b := []byte{0x10, 0x01}
	for range n {
		b = append(binary.AppendUvarint([]byte{0x0a}, uint64(len(b))), b...)
	}
	return b
}

// panicky is a format that panics reading column at, on records whose
// value is "boom" (a stand-in for a decoder bug some record exposes).
type panicky struct {
	format.Reader
	at    int
	value []byte
}

func (f *panicky) Begin(r format.Record) error {
	f.value = r.Value
	return f.Reader.Begin(r)
}

func (f *panicky) Read(col int, in *column.Value) error {
	if col == f.at && string(f.value) == `{"id":3,"s":"boom"}` {
		var m map[string]int
		m["x"]++ // assignment to entry in nil map
	}
	return f.Reader.Read(col, in)
}

// TestAppendRecoversPanic: a panic while a record is decoded, after some
// of its columns were appended, is that record's *RecordError matching
// ErrPanic, naming where it was raised; the block keeps exactly the rows
// before it, and the plan decodes the records after it.
func TestAppendRecoversPanic(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "s", Type: "String"}, {Name: "t", Type: "Nullable(String)"}}
	p, err := Compile(route.JSON, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.json = nil // read through the format, as the other formats are
	p.format = &panicky{Reader: p.format, at: 2}
	blk := p.NewBlock()
	rec := func(off int64, v string) *kgo.Record {
		return &kgo.Record{Topic: "t", Partition: 1, Offset: off, Value: []byte(v)}
	}
	for off, v := range []string{`{"id":1,"s":"a"}`, `{"id":2,"s":"b","t":"x"}`} {
		if err := p.Append(blk, rec(int64(off), v)); err != nil {
			t.Fatal(err)
		}
	}
	rows, bytes := blk.Rows(), blk.Bytes()
	err = p.Append(blk, rec(2, `{"id":3,"s":"boom"}`))
	var re *RecordError
	if !errors.As(err, &re) || !errors.Is(err, ErrPanic) {
		t.Fatalf("Append: %v (%T), want a *RecordError matching ErrPanic", err, err)
	}
	for _, want := range []string{"the decoder failed on this record", "assignment to entry in nil map", "hostile_test.go:", "panicky"} {
		if !strings.Contains(re.Reason, want) {
			t.Errorf("reason %q lacks %q", re.Reason, want)
		}
	}
	if re.Offset != 2 || re.Partition != 1 {
		t.Errorf("error names offset %d partition %d, want 2 and 1", re.Offset, re.Partition)
	}
	if blk.Rows() != rows || blk.Bytes() != bytes {
		t.Fatalf("block has rows=%d bytes=%d after the panic, want %d and %d", blk.Rows(), blk.Bytes(), rows, bytes)
	}
	if err := p.Append(blk, rec(3, `{"id":4,"s":"d"}`)); err != nil {
		t.Fatalf("the record after the panic: %v", err)
	}
	if got := fmt.Sprint(blk.ColumnData(0), blk.ColumnData(1)); got != "[1 2 4] [a b d]" {
		t.Fatalf("columns %s, want [1 2 4] [a b d]", got)
	}
	if got := blk.ColumnData(2).([]*string); len(got) != 3 || got[0] != nil || *got[1] != "x" || got[2] != nil {
		t.Fatalf("column t has %d rows, want NULL, x, NULL", len(got))
	}
}

// panicRegistry serves a schema whose compilation panics (a stand-in for
// a compiler bug some schema exposes).
type panicRegistry struct{ calls int }

func (r *panicRegistry) Schema(context.Context, int) (*registry.Schema, error) {
	r.calls++
	return nil, nil // compileSchema dereferences it
}

// TestSchemaCompilePanicIsBadRecord: a schema whose compilation panics
// makes its records bad, with the cause, and is not compiled again for
// each record.
func TestSchemaCompilePanicIsBadRecord(t *testing.T) {
	reg := &panicRegistry{}
	p, err := Compile(route.Avro, idCol, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Value: append(registry.AppendFrame(nil, 5, false), 2)}
	for range 3 {
		err := p.Append(p.NewBlock(), r)
		var re *RecordError
		if !errors.As(err, &re) || !errors.Is(err, ErrPanic) || !strings.Contains(re.Reason, "schema id 5: the decoder failed on this record") || !strings.Contains(re.Reason, "nil pointer dereference") {
			t.Fatalf("Append: %v, want the schema's panic as the reason", err)
		}
	}
	if reg.calls != 1 {
		t.Fatalf("schema looked up %d times, want once", reg.calls)
	}
}

// TestSubjectStrategy: under a subject strategy a record of a topic may
// name only schemas registered under that topic's subject (its key:
// TOPIC-key); any other is a bad record saying so, in every registry
// format, however the records of several topics interleave.
func TestSubjectStrategy(t *testing.T) {
	const avroRow = `{"type":"record","name":"R","fields":[{"name":"id","type":"long"}]}`
	reg := newFakeRegistry()
	add := func(id int, typ sr.SchemaType, text string, subjects ...string) {
		reg.add(id, typ, text)
		s := reg.schemas[id]
		s.Strategy, s.Subjects = "topic_name", subjects
	}
	add(1, sr.TypeAvro, avroRow, "orders-value", "audit-value")
	add(2, sr.TypeAvro, `"string"`, "orders-key")
	add(3, sr.TypeProtobuf, "syntax = \"proto3\";\nmessage R { int64 id = 1; }\n", "orders-value")
	add(4, sr.TypeJSON, `{"type":"object"}`, "orders-value")
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "k", Type: "String"}}
	values := map[route.Format][]byte{
		route.Avro:       append(registry.AppendFrame(nil, 1, false), 0x0e),
		route.Protobuf:   append(registry.AppendFrame(nil, 3, true, 0), 0x08, 0x07),
		route.JSONSchema: append(registry.AppendFrame(nil, 4, false), `{"id":7}`...),
	}
	key := append(registry.AppendFrame(nil, 2, false), 0x02, 'k')
	for format, value := range values {
		t.Run(string(format), func(t *testing.T) {
			p, err := Compile(format, cols, map[string]string{"k": "$key"}, WithRegistry(reg))
			if err != nil {
				t.Fatal(err)
			}
			blk := p.NewBlock()
			for _, c := range []struct {
				topic string
				key   []byte
				want  string
			}{
				{"orders", nil, ""},
				{"payments", nil, `schema id %d is registered under subject "orders-value"`},
				{"audit", nil, ""},
				{"orders", nil, ""},
				{"orders", key, ""},
				{"audit", key, `record key: bad record: schema id 2 is registered under subject "orders-key", not "audit-key"`},
			} {
				if format != route.Avro && c.key != nil {
					continue // an Avro key: the other formats' keys are their own
				}
				if format != route.Avro && c.topic == "audit" {
					continue // registered under orders-value only
				}
				err := p.Append(blk, &kgo.Record{Topic: c.topic, Value: value, Key: c.key})
				want := c.want
				if strings.Contains(want, "%d") {
					want = fmt.Sprintf(want, map[route.Format]int{route.Avro: 1, route.Protobuf: 3, route.JSONSchema: 4}[format])
				}
				switch {
				case want == "" && err != nil:
					t.Errorf("topic %s key %q: %v", c.topic, c.key, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("topic %s key %q: %v, want a bad record with %q", c.topic, c.key, err, want)
				}
			}
		})
	}
}

package decode

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"sink/internal/chschema"
	"sink/internal/decode/protofmt"
	"sink/internal/registry"
	"sink/internal/route"
)

// testCommonProto is imported by testProto through a registry reference.
var testCommonProto = testdataText("testdata/protobuf/common.proto")

// testProto has every mapping the protobuf format documents, and a second
// top-level message for message-index selection. The protobuf reader's own
// tests read it too.
var testProto = testdataText("testdata/protobuf/event.proto")

// testSchemas is a fake registry: id 1 is testProto (referencing
// t/common.proto), id 2 an Avro schema.
var testSchemas = map[int]*registry.Schema{
	1: {ID: 1, Type: sr.TypeProtobuf, Text: testProto, References: []registry.Reference{
		{Name: "t/common.proto", Subject: "common", Version: 1, Type: sr.TypeProtobuf, Text: testCommonProto}}},
	2: {ID: 2, Type: sr.TypeAvro, Text: `"string"`},
	3: {ID: 3, Type: sr.TypeProtobuf, Text: `syntax = "proto3"; message Broken { int32 a = 1`},
}

// protoRegistry is a fake registry holding testSchemas.
func protoRegistry() *fakeRegistry {
	r := newFakeRegistry()
	for id, sc := range testSchemas {
		r.schemas[id] = sc
	}
	return r
}

// testDescriptor compiles schema 1 and returns the named message.
func testDescriptor(t testing.TB, name string) protoreflect.MessageDescriptor {
	t.Helper()
	fd, err := protofmt.CompileSchema(testSchemas[1])
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("no message %s", name)
	}
	return md
}

// protoRecord encodes the protojson text js as message msg of schema 1
// (with protobuf-go, the maintained library) and frames it.
func protoRecord(t testing.TB, msg, js string, index int) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(testDescriptor(t, msg))
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatalf("protojson %s: %v", js, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(registry.AppendFrame(nil, 1, true, index), b...)
}

func protoPlan(t testing.TB, cols []chschema.ColumnSchema, mapping map[string]string, msgType string) *Plan {
	t.Helper()
	opts := []CompileOption{WithRegistry(protoRegistry())}
	if msgType != "" {
		opts = append(opts, WithMessage(msgType))
	}
	p, err := Compile(route.Protobuf, cols, mapping, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// protoOne decodes the Event js into one column c of colType reading src.
func protoOne(t *testing.T, colType, src, js string) (any, error) {
	t.Helper()
	p := protoPlan(t, []chschema.ColumnSchema{{Name: "c", Type: colType}}, map[string]string{"c": src}, "")
	blk := p.NewBlock()
	if err := p.Append(blk, &kgo.Record{Topic: "t", Value: protoRecord(t, "Event", js, 0)}); err != nil {
		return nil, err
	}
	return firstRow(colType, blk.ColumnData(0)), nil
}

func TestProtobufMappings(t *testing.T) {
	full := `{"id":"18446744073709551615","i32":-7,"s64":"-9000000000","f64":"42","flag":true,"fl":1.5,"db":0.1,
		"name":"héllo","raw":"AAEC","kind":"VIEW","nums":["1","-2","3"],"tags":["a","b"],"counts":{"x":"1"},
		"inner":{"a":"in","b":5,"k":"CLICK"},"text":"chosen","ts":"2024-05-17T12:34:56.789Z","dur":"-1.500s",
		"maybe":"0","attrs":{"k":[1,"two",null,true],"o":{"p":1.25}},"price":{"units":"12","cents":34},"opt":0,
		"items":[{"a":"x"},{"b":2}],"byId":{"7":{"a":"seven"}},"big":"9223372036854775808","label":"L"}`
	for _, c := range []struct {
		typ, src, js, want string
	}{
		{"UInt64", "id", full, "18446744073709551615"},
		{"String", "id", full, "18446744073709551615"},
		{"Int32", "i32", full, "-7"},
		{"Int64", "s64", full, "-9000000000"},
		{"UInt64", "f64", full, "42"},
		{"UInt8", "flag", full, "1"},
		{"Bool", "flag", full, "true"},
		{"Float32", "fl", full, "1.5"},
		{"Float64", "db", full, "0.1"},
		{"Decimal(9, 2)", "db", full, "0.1"},
		{"String", "name", full, "héllo"},
		{"String", "raw", full, "\x00\x01\x02"},
		{"FixedString(3)", "raw", full, "\x00\x01\x02"},
		{"String", "kind", full, "VIEW"},
		{"Enum8('KIND_UNSPECIFIED' = 0, 'CLICK' = 1, 'VIEW' = 2)", "kind", full, "2"},
		{"LowCardinality(String)", "kind", full, "VIEW"},
		{"UInt8", "kind", full, "2"},
		{"Array(Int64)", "nums", full, "[1 -2 3]"},
		{"Array(String)", "tags", full, "[a b]"},
		{"String", "tags", full, `["a","b"]`},
		{"Array(Int64)", "nums", `{}`, "[]"},
		{"Map(String, Int64)", "counts", full, "[[x 1]]"},
		{"Map(String, Int64)", "counts", `{}`, "[]"},
		{"Map(Int32, String)", "by_id", full, `[[7 {"a":"seven","b":0,"k":"KIND_UNSPECIFIED"}]]`},
		{"Tuple(a String, b Int32, k String)", "inner", full, "[in 5 CLICK]"},
		{"String", "inner", full, `{"a":"in","b":5,"k":"CLICK"}`},
		{"String", "inner.a", full, "in"},
		{"Int32", "inner.b", full, "5"},
		{"Int32", "inner.b", `{"inner":{}}`, "0"},
		{"Nullable(Int32)", "inner.b", `{}`, "<nil>"},
		{"Array(Tuple(a String, b Int32))", "items", full, "[[x 0] [ 2]]"},
		{"Nullable(String)", "choice", full, "chosen"},
		{"Nullable(String)", "choice", `{"number":"12"}`, "12"},
		{"Nullable(String)", "choice", `{}`, "<nil>"},
		{"Nullable(String)", "text", `{"number":"12"}`, "<nil>"},
		{"Nullable(Int64)", "number", `{"number":"12"}`, "12"},
		{"DateTime", "ts", full, "2024-05-17 12:34:56"},
		{"DateTime64(3)", "ts", full, "2024-05-17T12:34:56.789Z"},
		{"Date", "ts", full, "2024-05-17"},
		{"String", "ts", full, "2024-05-17T12:34:56.789Z"},
		{"Int64", "ts", full, "1715949296789"},
		{"Nullable(DateTime)", "ts", `{}`, "<nil>"},
		{"Decimal(18, 3)", "dur", full, "-1.5"},
		{"Float64", "dur", `{"dur":"3s"}`, "3"},
		{"Nullable(Int64)", "maybe", full, "0"},
		{"Nullable(Int64)", "maybe", `{}`, "<nil>"},
		{"Nullable(String)", "label", full, "L"},
		{"String", "attrs", full, `{"k":[1,"two",null,true],"o":{"p":1.25}}`},
		{"Tuple(units Int64, cents Int32)", "price", full, "[12 34]"},
		{"Int64", "price.units", full, "12"},
		{"Nullable(Int32)", "opt", full, "0"},
		{"Nullable(Int32)", "opt", `{}`, "<nil>"},
		{"Int32", "opt", `{}`, "0"},
		{"UInt64", "big", full, "9223372036854775808"},
		{"Nullable(String)", "no_such_field", full, "<nil>"},
		{"Nullable(String)", "name.deeper", full, "<nil>"},
		{"Int32", "i32", `{}`, "0"},
		{"String", "name", `{}`, ""},
	} {
		got, err := protoOne(t, c.typ, c.src, c.js)
		if err != nil {
			t.Errorf("%s from %s: %v", c.typ, c.src, err)
			continue
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("%s from %s: got %q, want %q", c.typ, c.src, s, c.want)
		}
	}
}

func TestProtobufJSONColumnOn26Types(t *testing.T) {
	// The JSON type is built from the same JSON text; the column checks it.
	got, err := protoOne(t, "JSON", "attrs", `{"attrs":{"a":{"b":1}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != `{"a":{"b":1}}` {
		t.Fatalf("got %s", s)
	}
}

func TestProtobufBadRecords(t *testing.T) {
	good := protoRecord(t, "Event", `{"i32":3}`, 0)
	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"not framed", []byte(`{"a":1}`), "magic byte"},
		{"short frame", []byte{0, 0, 0}, "shorter than"},
		{"unknown id", append(registry.AppendFrame(nil, 99, true), good[6:]...), "does not exist"},
		{"avro id", append(registry.AppendFrame(nil, 2, true), good[6:]...), "not Protobuf"},
		{"schema does not compile", append(registry.AppendFrame(nil, 3, true), good[6:]...), "does not compile"},
		{"no such message index", append(registry.AppendFrame(nil, 1, true, 5), good[6:]...), "no index 5"},
		{"truncated payload", good[:len(good)-1], "invalid Protobuf payload"},
		{"garbage payload", append(registry.AppendFrame(nil, 1, true), 0xff, 0xff, 0xff), "invalid Protobuf payload"},
		{"out of range", protoRecord(t, "Event", `{"i32":-3}`, 0), "out of range"},
	} {
		p := protoPlan(t, []chschema.ColumnSchema{{Name: "i32", Type: "UInt8"}}, nil, "")
		err := p.Append(p.NewBlock(), &kgo.Record{Topic: "t", Value: c.value})
		var re *RecordError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, c.want) {
			t.Errorf("%s: got %v, want a RecordError containing %q", c.name, err, c.want)
		}
	}
}

func TestProtobufRegistryUnavailableIsNotABadRecord(t *testing.T) {
	reg := protoRegistry()
	reg.down = true
	p, err := Compile(route.Protobuf, []chschema.ColumnSchema{{Name: "i32", Type: "Int32"}}, nil, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	err = p.Append(blk, &kgo.Record{Topic: "t", Value: protoRecord(t, "Event", `{"i32":3}`, 0)})
	var re *RecordError
	if !errors.Is(err, ErrUnavailable) || errors.As(err, &re) || blk.Rows() != 0 {
		t.Fatalf("got %v (rows %d), want ErrUnavailable, no RecordError, no row", err, blk.Rows())
	}
	// The registry back: the same record decodes (nothing bad was cached).
	reg.down = false
	if err := p.Append(blk, &kgo.Record{Topic: "t", Value: protoRecord(t, "Event", `{"i32":3}`, 0)}); err != nil || blk.Rows() != 1 {
		t.Fatalf("after the outage: %v, rows %d", err, blk.Rows())
	}
}

func TestProtobufMessageTypes(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}, {Name: "note", Type: "String"}}
	ev := protoRecord(t, "Event", `{"id":"7"}`, 0)
	other := protoRecord(t, "Other", `{"id":"8","note":"n"}`, 1)

	// Without a message setting every type fills the columns it has.
	p := protoPlan(t, cols, nil, "")
	blk := p.NewBlock()
	for _, v := range [][]byte{ev, other} {
		if err := p.Append(blk, &kgo.Record{Topic: "t", Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(blk.ColumnData(0), blk.ColumnData(1)); got != "[7 8] [ n]" {
		t.Fatalf("got %s", got)
	}

	// With one, other types are skipped (ErrSkip), not bad.
	p = protoPlan(t, cols, nil, "t.v1.Other")
	blk = p.NewBlock()
	if err := p.Append(blk, &kgo.Record{Topic: "t", Value: ev}); !errors.Is(err, ErrSkip) {
		t.Fatalf("Event under message t.v1.Other: got %v, want ErrSkip", err)
	}
	if err := p.Append(blk, &kgo.Record{Topic: "t", Value: other}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(blk.ColumnData(0), blk.ColumnData(1)); got != "[8] [n]" {
		t.Fatalf("got %s", got)
	}
}

// TestProtobufNestedMessageIndex: indexes [0, 0] select the first message
// nested in the first top-level one (Event.Inner).
func TestProtobufNestedMessageIndex(t *testing.T) {
	md := testDescriptor(t, "Event").Messages().ByName("Inner")
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(`{"a":"deep","b":9}`), m); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := protoPlan(t, []chschema.ColumnSchema{{Name: "a", Type: "String"}, {Name: "b", Type: "Int32"}}, nil, "t.v1.Event.Inner")
	blk := p.NewBlock()
	if err := p.Append(blk, &kgo.Record{Topic: "t", Value: append(registry.AppendFrame(nil, 1, true, 0, 0), b...)}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(blk.ColumnData(0), blk.ColumnData(1)); got != "[deep] [9]" {
		t.Fatalf("got %s", got)
	}
}

// TestProtobufKey: $key reads a registry-framed Protobuf key as its
// message's JSON, any other key as its bytes.
func TestProtobufKey(t *testing.T) {
	value := protoRecord(t, "Event", `{"id":"1"}`, 0)
	framedKey := protoRecord(t, "Other", `{"id":"8","note":"k"}`, 1)
	for _, c := range []struct {
		key  []byte
		want string
	}{
		{framedKey, `{"note":"k","id":8}`},
		{[]byte("plain-key"), "plain-key"},
		{nil, "<nil>"},
	} {
		p := protoPlan(t, []chschema.ColumnSchema{{Name: "k", Type: "Nullable(String)"}, {Name: "id", Type: "UInt64"}}, map[string]string{"k": "$key"}, "")
		blk := p.NewBlock()
		if err := p.Append(blk, &kgo.Record{Topic: "t", Key: c.key, Value: value}); err != nil {
			t.Fatalf("key %q: %v", c.key, err)
		}
		if got := fmt.Sprint(firstRow("Nullable(String)", blk.ColumnData(0))); got != c.want {
			t.Errorf("key %q: got %s, want %s", c.key, got, c.want)
		}
	}
	p := protoPlan(t, []chschema.ColumnSchema{{Name: "k", Type: "String"}}, map[string]string{"k": "$key"}, "")
	err := p.Append(p.NewBlock(), &kgo.Record{Topic: "t", Key: append(registry.AppendFrame(nil, 99, true), 1), Value: value})
	var re *RecordError
	if !errors.As(err, &re) || !strings.Contains(re.Reason, "record key:") {
		t.Fatalf("unknown key schema: got %v", err)
	}
}

func TestProtobufTombstone(t *testing.T) {
	p := protoPlan(t, []chschema.ColumnSchema{{Name: "id", Type: "UInt64"}}, nil, "")
	if err := p.Append(p.NewBlock(), &kgo.Record{Topic: "t"}); !errors.Is(err, ErrSkip) {
		t.Fatalf("got %v, want ErrSkip", err)
	}
}

func appendVarintField(b []byte, num int, v uint64) []byte {
	b = append(b, byte(num<<3))
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// protoFuzzCols reads every mapping of testProto's Event.
var protoFuzzCols = []chschema.ColumnSchema{
	{Name: "id", Type: "UInt64"}, {Name: "i32", Type: "Int32"}, {Name: "s64", Type: "Int64"},
	{Name: "f64", Type: "UInt64"}, {Name: "flag", Type: "Bool"}, {Name: "fl", Type: "Float32"},
	{Name: "db", Type: "Nullable(Decimal(38, 10))"}, {Name: "name", Type: "String"}, {Name: "raw", Type: "String"},
	{Name: "kind", Type: "Enum8('KIND_UNSPECIFIED' = 0, 'CLICK' = 1, 'VIEW' = 2)"},
	{Name: "nums", Type: "Array(Int64)"}, {Name: "tags", Type: "Array(String)"},
	{Name: "counts", Type: "Map(String, Int64)"}, {Name: "inner", Type: "Tuple(a String, b Int32, k String)"},
	{Name: "inner_b", Type: "Nullable(Int32)"}, {Name: "choice", Type: "Nullable(String)"},
	{Name: "ts", Type: "Nullable(DateTime64(3))"}, {Name: "dur", Type: "Nullable(String)"},
	{Name: "maybe", Type: "Nullable(Int64)"}, {Name: "attrs", Type: "String"},
	{Name: "price", Type: "Tuple(units Int64, cents Int32)"}, {Name: "opt", Type: "Nullable(Int32)"},
	{Name: "items", Type: "String"}, {Name: "by_id", Type: "Map(Int32, String)"},
	{Name: "big", Type: "String"}, {Name: "label", Type: "Nullable(String)"}, {Name: "note", Type: "String"},
}

// FuzzProtobufAppend: no payload, message index or schema makes Append
// panic; a record decodes the same in a fresh plan and in one that has
// read another record; a failed Append leaves the block empty; and where
// protobuf-go accepts the payload, the scalar columns hold what it reads.
func FuzzProtobufAppend(f *testing.F) {
	full := `{"id":"18446744073709551615","i32":-7,"s64":"-9000000000","flag":true,"fl":1.5,"db":0.1,
		"name":"x","raw":"AAEC","kind":"VIEW","nums":["1","-2"],"tags":["a"],"counts":{"x":"1"},
		"inner":{"a":"in","b":5},"text":"t","ts":"2024-05-17T12:34:56.789Z","dur":"-1.5s","maybe":"0",
		"attrs":{"k":[1,"two",null,true]},"price":{"units":"12"},"opt":0,"items":[{"a":"x"}],"byId":{"7":{}},"label":""}`
	for _, js := range []string{full, `{}`, `{"number":"3"}`, `{"inner":{}}`} {
		b := protoRecord(f, "Event", js, 0)
		f.Add(b[6:], uint8(0))
	}
	f.Add(protoRecord(f, "Other", `{"note":"n"}`, 1)[6:], uint8(1))
	f.Add([]byte{0x0a, 0x80}, uint8(0))
	f.Add([]byte{0xa2, 0x01, 0x02, 0x08, 0x01}, uint8(0)) // attrs with a bad Struct entry
	mapping := map[string]string{"inner_b": "inner.b"}
	md := testDescriptor(f, "Event")
	warmRec := &kgo.Record{Topic: "t", Value: protoRecord(f, "Event", full, 0)}
	f.Fuzz(func(t *testing.T, payload []byte, index uint8) {
		value := append(registry.AppendFrame(nil, 1, true, int(index%3)), payload...)
		r := &kgo.Record{Topic: "t", Value: value}
		outcome := func(p *Plan) string {
			blk := p.NewBlock()
			err := p.Append(blk, r)
			if err != nil {
				noPanic(t, err)
				var re *RecordError
				if !errors.As(err, &re) && !errors.Is(err, ErrSkip) {
					t.Fatalf("error %v is neither a RecordError nor ErrSkip", err)
				}
				if blk.Rows() != 0 || blk.Bytes() != 0 {
					t.Fatalf("failed Append left rows=%d bytes=%d", blk.Rows(), blk.Bytes())
				}
				return "error: " + err.Error()
			}
			var sb strings.Builder
			for i := range blk.Columns() {
				fmt.Fprintf(&sb, "%v|", firstRow(protoFuzzCols[i].Type, blk.ColumnData(i)))
			}
			return sb.String()
		}
		fresh := protoPlan(t, protoFuzzCols, mapping, "")
		first := outcome(fresh)
		if again := outcome(fresh); again != first {
			t.Fatalf("second Append differs:\n%s\n%s", first, again)
		}
		warm := protoPlan(t, protoFuzzCols, mapping, "")
		r0 := r
		r = warmRec
		outcome(warm)
		r = r0
		if got := outcome(warm); got != first {
			t.Fatalf("Append after another record differs:\nfresh %s\nwarm  %s", first, got)
		}
		if index%3 != 0 || strings.HasPrefix(first, "error") {
			return
		}
		m := dynamicpb.NewMessage(md)
		if !referenceUnmarshal(payload, m) {
			return
		}
		want := fmt.Sprintf("%d|%d|", m.Get(md.Fields().ByName("id")).Uint(), m.Get(md.Fields().ByName("i32")).Int())
		if !strings.HasPrefix(first, want) {
			t.Fatalf("protobuf-go reads %s, the plan %s", want, first)
		}
	})
}

// referenceUnmarshal is proto.Unmarshal into m, false where protobuf-go
// refuses the payload or panics on it: its map decoding panics on a map
// entry whose key comes again with another wire type (the second key is
// skipped as unknown, but the entry is stored under the value it left).
func referenceUnmarshal(b []byte, m proto.Message) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return proto.Unmarshal(b, m) == nil
}

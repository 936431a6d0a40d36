package protofmt

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/reflect/protoreflect"

	"sink/internal/chschema"
	"sink/internal/registry"
)

func TestProtobufSchemaColumnType(t *testing.T) {
	md := testDescriptor(t, "Event")
	f := func(field, want18, want26 string) {
		t.Helper()
		fd := md.Fields().ByName(protoreflect.Name(field))
		if fd == nil {
			t.Fatalf("no field %s", field)
		}
		st := protoSchemaType(fd)
		for _, c := range []struct {
			srv  chschema.ServerTypes
			want string
		}{{types18, want18}, {types26, want26}} {
			got, err := st.Column(c.srv, false)
			if err != nil || got != c.want {
				t.Errorf("%s (%s): Column(%+v) = %q, %v; want %q", field, st, c.srv, got, err, c.want)
			}
		}
	}
	f("id", "UInt64", "UInt64")
	f("i32", "Int32", "Int32")
	f("s64", "Int64", "Int64")
	f("f64", "UInt64", "UInt64")
	f("flag", "UInt8", "Bool")
	f("fl", "Float32", "Float32")
	f("db", "Float64", "Float64")
	f("name", "String", "String")
	f("raw", "String", "String")
	f("kind", "String", "String")
	f("nums", "Array(Int64)", "Array(Int64)")
	f("tags", "Array(String)", "Array(String)")
	f("counts", "String", "Map(String, Int64)")
	f("inner", "String", "JSON")
	f("text", "String", "String")
	f("number", "Int64", "Int64")
	f("ts", "DateTime", "DateTime64(9)")
	f("dur", "String", "String")
	f("maybe", "Nullable(Int64)", "Nullable(Int64)")
	f("attrs", "String", "JSON")
	f("price", "String", "JSON")
	f("opt", "Int32", "Int32")
	f("items", "Array(String)", "Array(String)")
	f("by_id", "String", "Map(String, String)")
	f("label", "Nullable(String)", "Nullable(String)")
}

func TestProtobufDurationText(t *testing.T) {
	for _, c := range []struct {
		sec   int64
		nanos int32
		want  string
	}{
		{0, 0, "0"}, {1, 500_000_000, "1.5"}, {-1, -500_000_000, "-1.5"}, {0, -1, "-0.000000001"},
		{315576000000, 999999999, "315576000000.999999999"}, {1, -1, "invalid"},
	} {
		var b []byte
		b = appendVarintField(b, 1, uint64(c.sec))
		b = appendVarintField(b, 2, uint64(int64(c.nanos)))
		got, err := durationText(nil, b)
		s := string(got)
		if err != nil {
			s = "invalid"
		}
		if s != c.want {
			t.Errorf("%d s %d ns: got %s, want %s", c.sec, c.nanos, s, c.want)
		}
	}
}

// TestCheckProtoNesting: braces, brackets and angle brackets count,
// those in comments and string literals do not.
func TestCheckProtoNesting(t *testing.T) {
	deep := strings.Repeat("{", 65) + strings.Repeat("}", 65)
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{testProto, true},
		{protoWide(), true},
		{hostileProtoOption(62), true}, // message M, 62 levels of o and {v: 1}: 64
		{hostileProtoOption(63), false},
		{deep, false},
		{"message M { map<string, int32> m = 1; }", true},
		{"// " + deep + "\nmessage M {}", true},
		{"/* " + deep + " */ message M {}", true},
		{`message M { option (o) = "` + deep + `\" still a string"; }`, true},
		{`message M { option (o) = '` + deep + `'; }`, true},
		{"message M {} /* unterminated " + deep, true},
		{strings.Repeat("[", 65), false},
		{strings.Repeat("<", 65), false},
		{strings.Repeat("{}", 10_000), true},
	} {
		if err := checkProtoNesting(c.text); (err == nil) != c.ok {
			t.Errorf("%.60q: %v, want ok=%v", c.text, err, c.ok)
		}
	}
}

// The servers' generations as EvolveTypes describes them.
var (
	types18 = chschema.ServerTypes{}
	types26 = chschema.ServerTypes{Bool: true, DateTime64: true, JSON: true, Date32: true, Map: true}
)

// testProto is the schema with every mapping the protobuf format
// documents that decode's protobuf tests read (schema id 1 there), and
// the file it imports.
var (
	testProto       = testdataText("../testdata/protobuf/event.proto")
	testCommonProto = testdataText("../testdata/protobuf/common.proto")
)

// testdataText is the text of a file under testdata.
func testdataText(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testDescriptor compiles testProto and returns the named message.
func testDescriptor(t testing.TB, name string) protoreflect.MessageDescriptor {
	t.Helper()
	fd, err := CompileSchema(&registry.Schema{ID: 1, Type: sr.TypeProtobuf, Text: testProto, References: []registry.Reference{
		{Name: "t/common.proto", Subject: "common", Version: 1, Type: sr.TypeProtobuf, Text: testCommonProto}}})
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("no message %s", name)
	}
	return md
}

func appendVarintField(b []byte, num int, v uint64) []byte {
	b = append(b, byte(num<<3))
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
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

// hostileProtoOption is a .proto text whose message M has an option
// value nested n levels deep (protocompile takes time growing with the
// square of n: 1 s for 8,000).
func hostileProtoOption(n int) string {
	return "syntax = \"proto3\";\nimport \"google/protobuf/descriptor.proto\";\nmessage O { O o = 1; int32 v = 2; }\n" +
		"extend google.protobuf.MessageOptions { O opt = 50000; }\nmessage M { option (opt) = " +
		strings.Repeat("{o: ", n) + "{v: 1}" + strings.Repeat("}", n) + "; int32 a = 1; }\n"
}

package avrofmt

import (
	"os"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

func TestAvroSchemaColumnType(t *testing.T) {
	f := func(field, want18, want26, nullable18 string) {
		t.Helper()
		s, err := avro.Parse(field)
		if err != nil {
			t.Fatalf("%s: %v", field, err)
		}
		st := avroSchemaType(s, 0)
		for _, c := range []struct {
			srv      chschema.ServerTypes
			nullable bool
			want     string
		}{{types18, false, want18}, {types26, false, want26}, {types18, true, nullable18}} {
			got, err := st.Column(c.srv, c.nullable)
			if c.want == "" {
				if err == nil {
					t.Errorf("%s: Column(%+v) = %q, want no type", field, c.srv, got)
				}
				continue
			}
			if err != nil || got != c.want {
				t.Errorf("%s: Column(%+v, nullable %v) = %q, %v; want %q", field, c.srv, c.nullable, got, err, c.want)
			}
			if pt := chtype.Parse(got); pt.Unsupported() {
				t.Errorf("%s: %s, which the decoder cannot fill", field, got)
			}
		}
	}
	f(`"boolean"`, "UInt8", "Bool", "Nullable(UInt8)")
	f(`"int"`, "Int32", "Int32", "Nullable(Int32)")
	f(`"long"`, "Int64", "Int64", "Nullable(Int64)")
	f(`"float"`, "Float32", "Float32", "Nullable(Float32)")
	f(`"double"`, "Float64", "Float64", "Nullable(Float64)")
	f(`"string"`, "String", "String", "Nullable(String)")
	f(`"bytes"`, "String", "String", "Nullable(String)")
	f(`{"type":"fixed","name":"F","size":4}`, "String", "String", "Nullable(String)")
	f(`{"type":"enum","name":"E","symbols":["A","B"]}`, "String", "String", "Nullable(String)")
	f(`{"type":"string","logicalType":"uuid"}`, "UUID", "UUID", "Nullable(UUID)")
	f(`{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}`, "UUID", "UUID", "Nullable(UUID)")
	f(`{"type":"bytes","logicalType":"decimal","precision":18,"scale":4}`, "Decimal(18, 4)", "Decimal(18, 4)", "Nullable(Decimal(18, 4))")
	f(`{"type":"fixed","name":"D","size":16,"logicalType":"decimal","precision":38,"scale":2}`, "Decimal(38, 2)", "Decimal(38, 2)", "Nullable(Decimal(38, 2))")
	f(`{"type":"bytes","logicalType":"decimal","precision":50,"scale":2}`, "String", "String", "Nullable(String)")
	f(`{"type":"int","logicalType":"date"}`, "Date", "Date32", "Nullable(Date)")
	f(`{"type":"int","logicalType":"time-millis"}`, "Int32", "Int32", "Nullable(Int32)")
	f(`{"type":"long","logicalType":"time-micros"}`, "Int64", "Int64", "Nullable(Int64)")
	f(`{"type":"long","logicalType":"timestamp-millis"}`, "DateTime", "DateTime64(3)", "Nullable(DateTime)")
	f(`{"type":"long","logicalType":"timestamp-micros"}`, "DateTime", "DateTime64(6)", "Nullable(DateTime)")
	f(`{"type":"long","logicalType":"timestamp-nanos"}`, "DateTime", "DateTime64(9)", "Nullable(DateTime)")
	f(`{"type":"long","logicalType":"local-timestamp-millis"}`, "DateTime", "DateTime64(3)", "Nullable(DateTime)")
	f(`["null","string"]`, "Nullable(String)", "Nullable(String)", "Nullable(String)")
	f(`["null",{"type":"long","logicalType":"timestamp-millis"}]`, "Nullable(DateTime)", "Nullable(DateTime64(3))", "Nullable(DateTime)")
	f(`["string","null"]`, "Nullable(String)", "Nullable(String)", "Nullable(String)")
	f(`["null","string","long"]`, "Nullable(String)", "Nullable(String)", "Nullable(String)")
	f(`["string","long"]`, "String", "String", "Nullable(String)")
	f(`"null"`, "", "", "")
	f(`{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`, "String", "JSON", "Nullable(String)")
	f(`["null",{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}]`, "Nullable(String)", "JSON", "Nullable(String)")
	f(`{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}`, "String", "JSON", "Nullable(String)")
	f(`{"type":"array","items":"long"}`, "Array(Int64)", "Array(Int64)", "Array(Int64)")
	f(`{"type":"array","items":["null","string"]}`, "Array(Nullable(String))", "Array(Nullable(String))", "Array(Nullable(String))")
	f(`["null",{"type":"array","items":"long"}]`, "Array(Int64)", "Array(Int64)", "Array(Int64)")
	f(`{"type":"array","items":{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}}`, "Array(String)", "Array(String)", "Array(String)")
	f(`{"type":"array","items":{"type":"array","items":"boolean"}}`, "Array(Array(UInt8))", "Array(Array(Bool))", "Array(Array(UInt8))")
	f(`{"type":"map","values":"double"}`, "String", "Map(String, Float64)", "Nullable(String)")
	f(`{"type":"map","values":["null","long"]}`, "String", "Map(String, Nullable(Int64))", "Nullable(String)")
	f(`{"type":"array","items":"null"}`, "", "", "")
}

// FuzzAvroSchemaType: any Avro schema that parses gives each field of a
// record a column type the decoder can fill, or a reason there is none;
// nothing panics or loops.
func FuzzAvroSchemaType(f *testing.F) {
	f.Add(driftAvroText(f))
	f.Add(avroMappingsSeed)
	f.Add(`{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]},{"name":"m","type":{"type":"map","values":{"type":"array","items":["null","L"]}}}]}`)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := avro.Parse(text)
		if err != nil {
			return
		}
		rs, ok := s.(*avro.RecordSchema)
		if !ok {
			return
		}
		for _, fld := range rs.Fields() {
			st := avroSchemaType(fld.Type(), 0)
			for _, srv := range []chschema.ServerTypes{types18, types26} {
				for _, nullable := range []bool{false, true} {
					typ, err := st.Column(srv, nullable)
					if err != nil {
						continue
					}
					if pt := chtype.Parse(typ); pt.Unsupported() {
						t.Fatalf("field %s (%s): %s, which the decoder cannot fill", fld.Name(), st, typ)
					}
				}
			}
		}
	})
}

const avroMappingsSeed = `{"type":"record","name":"R","fields":[{"name":"d","type":{"type":"fixed","name":"D","size":12,"logicalType":"duration"}},` +
	`{"name":"u","type":["null","string","long",{"type":"array","items":"int"}]},{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}}]}`

// driftAvroText is the record schema decode's drift tests use (a field of
// every type the mapping has), a seed of FuzzAvroSchemaType.
func driftAvroText(f *testing.F) string {
	b, err := os.ReadFile("../testdata/avro/drift.avsc")
	if err != nil {
		f.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The servers' generations as EvolveTypes describes them.
var (
	types18 = chschema.ServerTypes{}
	types26 = chschema.ServerTypes{Bool: true, DateTime64: true, JSON: true, Date32: true, Map: true}
)

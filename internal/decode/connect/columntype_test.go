package connect

import (
	"testing"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
)

// The two generations of servers the sink writes to: 26.9 has every type
// a schema's field is given, 18.16 none of the newer ones.
var (
	modernServer = chschema.ServerTypes{Bool: true, DateTime64: true, JSON: true, Date32: true, Map: true}
	oldServer    = chschema.ServerTypes{}
)

// TestColumnTypes: the column type each Connect type, each of Connect's
// logical types and each of Debezium's semantic types gets, on a modern
// server and on one without Bool, Date32, DateTime64, JSON and Map.
func TestColumnTypes(t *testing.T) {
	const dec = `"name":"org.apache.kafka.connect.data.Decimal"`
	for _, c := range []struct {
		schema      string
		modern, old string
	}{
		{`{"type":"int8"}`, "Int8", "Int8"},
		{`{"type":"int16"}`, "Int16", "Int16"},
		{`{"type":"int32"}`, "Int32", "Int32"},
		{`{"type":"int64"}`, "Int64", "Int64"},
		{`{"type":"float"}`, "Float32", "Float32"},
		{`{"type":"double"}`, "Float64", "Float64"},
		{`{"type":"boolean"}`, "Bool", "UInt8"},
		{`{"type":"string"}`, "String", "String"},
		{`{"type":"bytes"}`, "String", "String"},
		{`{"type":"int8","optional":true}`, "Nullable(Int8)", "Nullable(Int8)"},
		{`{"type":"boolean","optional":true}`, "Nullable(Bool)", "Nullable(UInt8)"},

		// Connect's logical types.
		{`{"type":"bytes",` + dec + `,"parameters":{"scale":"2"}}`, "Decimal(38, 2)", "Decimal(38, 2)"},
		{`{"type":"bytes",` + dec + `,"parameters":{"scale":"2","connect.decimal.precision":"12"}}`, "Decimal(12, 2)", "Decimal(12, 2)"},
		{`{"type":"bytes",` + dec + `,"optional":true,"parameters":{"scale":"4","connect.decimal.precision":"10"}}`, "Nullable(Decimal(10, 4))", "Nullable(Decimal(10, 4))"},
		{`{"type":"bytes",` + dec + `,"parameters":{"scale":"0","connect.decimal.precision":"38"}}`, "Decimal(38, 0)", "Decimal(38, 0)"},
		{`{"type":"bytes",` + dec + `,"parameters":{"scale":"2","connect.decimal.precision":"39"}}`, "String", "String"},
		{`{"type":"bytes",` + dec + `,"parameters":{"scale":"40"}}`, "String", "String"},
		{`{"type":"bytes",` + dec + `,"parameters":{"scale":"5","connect.decimal.precision":"2"}}`, "Decimal(5, 5)", "Decimal(5, 5)"},
		{`{"type":"bytes",` + dec + `,"parameters":{"scale":"-2","connect.decimal.precision":"3"}}`, "Decimal(5, 0)", "Decimal(5, 0)"},
		{`{"type":"bytes",` + dec + `,"parameters":{"scale":"2","connect.decimal.precision":"x"}}`, "Decimal(38, 2)", "Decimal(38, 2)"},
		{`{"type":"int32","name":"org.apache.kafka.connect.data.Date"}`, "Date32", "Date"},
		{`{"type":"int32","name":"org.apache.kafka.connect.data.Date","optional":true}`, "Nullable(Date32)", "Nullable(Date)"},
		{`{"type":"int32","name":"org.apache.kafka.connect.data.Time"}`, "String", "String"},
		{`{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp"}`, "DateTime64(3)", "DateTime"},
		{`{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp","optional":true}`, "Nullable(DateTime64(3))", "Nullable(DateTime)"},

		// Debezium's semantic types.
		{`{"type":"int32","name":"io.debezium.time.Date"}`, "Date32", "Date"},
		{`{"type":"int64","name":"io.debezium.time.Timestamp"}`, "DateTime64(3)", "DateTime"},
		{`{"type":"int64","name":"io.debezium.time.MicroTimestamp"}`, "DateTime64(6)", "DateTime"},
		{`{"type":"int64","name":"io.debezium.time.NanoTimestamp"}`, "DateTime64(9)", "DateTime"},
		{`{"type":"string","name":"io.debezium.time.ZonedTimestamp"}`, "DateTime64(9)", "DateTime"},
		{`{"type":"int32","name":"io.debezium.time.Time"}`, "String", "String"},
		{`{"type":"int64","name":"io.debezium.time.MicroTime"}`, "String", "String"},
		{`{"type":"int64","name":"io.debezium.time.NanoTime"}`, "String", "String"},
		{`{"type":"string","name":"io.debezium.time.ZonedTime"}`, "String", "String"},
		{`{"type":"int64","name":"io.debezium.time.MicroDuration"}`, "Int64", "Int64"},
		{`{"type":"struct","name":"io.debezium.data.VariableScaleDecimal","fields":[{"type":"int32","field":"scale"},{"type":"bytes","field":"value"}]}`, "String", "String"},
		{`{"type":"struct","name":"io.debezium.data.VariableScaleDecimal","optional":true,"fields":[{"type":"int32","field":"scale"},{"type":"bytes","field":"value"}]}`, "Nullable(String)", "Nullable(String)"},
		{`{"type":"string","name":"io.debezium.data.Json"}`, "String", "String"},
		{`{"type":"string","name":"io.debezium.data.Uuid"}`, "String", "String"},
		{`{"type":"int32","name":"io.debezium.time.Year"}`, "Int32", "Int32"},
		{`{"type":"bytes","name":"io.debezium.data.Bits"}`, "String", "String"},

		// Arrays, maps and structs.
		{`{"type":"array","items":{"type":"int32"}}`, "Array(Int32)", "Array(Int32)"},
		{`{"type":"array","optional":true,"items":{"type":"int32","optional":true}}`, "Array(Nullable(Int32))", "Array(Nullable(Int32))"},
		{`{"type":"array","items":{"type":"bytes",` + dec + `,"parameters":{"scale":"2","connect.decimal.precision":"5"}}}`, "Array(Decimal(5, 2))", "Array(Decimal(5, 2))"},
		{`{"type":"array","items":{"type":"int32","name":"org.apache.kafka.connect.data.Date"}}`, "Array(Date32)", "Array(Date)"},
		{`{"type":"array","items":{"type":"int32","name":"org.apache.kafka.connect.data.Time"}}`, "Array(String)", "Array(String)"},
		{`{"type":"array","items":{"type":"array","items":{"type":"string"}}}`, "Array(Array(String))", "Array(Array(String))"},
		{`{"type":"array","items":{"type":"struct","fields":[{"type":"int32","field":"a"}]}}`, "Array(String)", "Array(String)"},
		{`{"type":"map","keys":{"type":"string"},"values":{"type":"int64"}}`, "Map(String, Int64)", "String"},
		{`{"type":"map","keys":{"type":"string"},"values":{"type":"int64","optional":true}}`, "Map(String, Nullable(Int64))", "String"},
		{`{"type":"map","optional":true,"keys":{"type":"string"},"values":{"type":"string"}}`, "Map(String, String)", "Nullable(String)"},
		{`{"type":"map","keys":{"type":"int32"},"values":{"type":"string"}}`, "String", "String"},
		{`{"type":"map","optional":true,"keys":{"type":"int32"},"values":{"type":"string"}}`, "Nullable(String)", "Nullable(String)"},
		{`{"type":"struct","fields":[{"type":"int32","field":"a"}]}`, "JSON", "String"},
		{`{"type":"struct","optional":true,"fields":[{"type":"int32","field":"a"}]}`, "JSON", "Nullable(String)"},
	} {
		v := fastjson.MustParse(c.schema)
		n, err := compileConnect(v, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		st := n.columnType(0)
		for _, srv := range []struct {
			types chschema.ServerTypes
			want  string
		}{{modernServer, c.modern}, {oldServer, c.old}} {
			got, err := st.Column(srv.types, false)
			if err != nil || got != srv.want {
				t.Errorf("%s on %+v: %q, %v; want %q", c.schema, srv.types, got, err, srv.want)
			}
		}
	}
}

// TestColumnTypesNullable: schema.nullable makes every scalar Nullable,
// also a required one, as it does for a field typed by its values.
func TestColumnTypesNullable(t *testing.T) {
	n, err := compileConnect(fastjson.MustParse(`{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := n.columnType(0).Column(modernServer, true); err != nil || got != "Nullable(DateTime64(3))" {
		t.Errorf("%q, %v; want Nullable(DateTime64(3))", got, err)
	}
}

// TestEnvelopeFieldType: an envelope's reader types the payload's
// top-level fields by the record's schema (a struct's fields, a map's
// values), and nothing for a field the schema does not describe or a
// record without a schema; the label names the schema's type.
func TestEnvelopeFieldType(t *testing.T) {
	e := &Envelope{}
	if e.FieldType("a") != nil {
		t.Error("a type before any record")
	}
	struct_ := `{"type":"struct","fields":[{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","field":"at"},` +
		`{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"3"},"field":"p"}]}`
	e.cur = e.schemas.get([]byte(struct_), e.resolve)
	for name, want := range map[string]string{"at": "Nullable(DateTime64(3))", "p": "Decimal(38, 3)"} {
		st := e.FieldType(name)
		if st == nil {
			t.Fatalf("%s: no type", name)
		}
		if got, err := st.Column(modernServer, false); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if l := e.FieldType("at").String(); l != "optional int64 org.apache.kafka.connect.data.Timestamp" {
		t.Errorf("label %q", l)
	}
	if l := e.FieldType("p").String(); l != "bytes org.apache.kafka.connect.data.Decimal (scale 3)" {
		t.Errorf("label %q", l)
	}
	if e.FieldType("other") != nil {
		t.Error("a type for a field the schema does not name")
	}
	e.cur = e.schemas.get([]byte(`{"type":"map","keys":{"type":"string"},"values":{"type":"int16"}}`), e.resolve)
	if got, err := e.FieldType("any").Column(modernServer, false); err != nil || got != "Int16" {
		t.Errorf("a map's value: %q, %v; want Int16", got, err)
	}
}

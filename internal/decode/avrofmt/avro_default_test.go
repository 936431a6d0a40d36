package avrofmt

import (
	"testing"

	"github.com/hamba/avro/v2"
)

func TestAvroFieldDefault(t *testing.T) {
	date := avro.NewPrimitiveSchema(avro.Int, avro.NewPrimitiveLogicalSchema(avro.Date))
	ts := avro.NewPrimitiveSchema(avro.Long, avro.NewPrimitiveLogicalSchema(avro.TimestampMillis))
	null := avro.NewPrimitiveSchema(avro.Null, nil)
	str := avro.NewPrimitiveSchema(avro.String, nil)
	opt, _ := avro.NewUnionSchema([]avro.Schema{null, str})
	field := func(name string, s avro.Schema, def any) *avro.Field {
		f, err := avro.NewField(name, s, avro.WithDefault(def))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	noDef, _ := avro.NewField("n", str)
	tests := []struct {
		f    *avro.Field
		typ  string
		want string
	}{
		{field("tier", avro.NewPrimitiveSchema(avro.Int, nil), 7), "Int32", "7"},
		{field("s", str, "x'y"), "String", `'x\'y'`},
		{field("d", date, 18263), "Date32", "'2020-01-02'"},
		{field("t", ts, int64(1577934245123)), "DateTime64(3)", "toDateTime64('2020-01-02 03:04:05.123000000', 3, 'UTC')"},
		{field("b", avro.NewPrimitiveSchema(avro.Boolean, nil), true), "Bool", "true"},
		{field("bytes", avro.NewPrimitiveSchema(avro.Bytes, nil), "ab"), "String", ""},
	}
	for _, tt := range tests {
		d := avroDefault(tt.f)
		if d == nil {
			t.Errorf("%s: no default", tt.f.Name())
			continue
		}
		lit, err := d.Literal(tt.typ)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%s: literal %s; want it refused", tt.f.Name(), lit)
			}
			continue
		}
		if err != nil || lit != tt.want {
			t.Errorf("%s: literal %s, %v; want %s", tt.f.Name(), lit, err, tt.want)
		}
	}
	// Debezium's Avro schemas name a date by connect.name, without a
	// logicalType: the default is a day count all the same.
	rs := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"since","type":{"type":"int","connect.name":"io.debezium.time.Date"},"default":18263}]}`).(*avro.RecordSchema)
	if lit, err := avroDefault(rs.Fields()[0]).Literal("Date32"); err != nil || lit != "'2020-01-02'" {
		t.Errorf("a Debezium date's default: %s, %v; want '2020-01-02'", lit, err)
	}
	if d := avroDefault(field("o", opt, nil)); d != nil {
		t.Errorf("a null default: %+v; want none", d)
	}
	if d := avroDefault(noDef); d != nil {
		t.Errorf("no default: %+v; want none", d)
	}
}

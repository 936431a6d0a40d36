package decode

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/decode/drift"
)

func TestFieldDefaultLiteral(t *testing.T) {
	tests := []struct {
		json, unit, typ string
		want            string // "" : refused
	}{
		{"7", "", "Int32", "7"},
		{"7", "", "Nullable(Int64)", "7"},
		{"-7", "", "UInt8", ""},
		{"7.5", "", "Int64", ""},
		{"170141183460469231731687303715884105727", "", "Int128", "170141183460469231731687303715884105727"},
		{"18446744073709551615", "", "UInt64", "18446744073709551615"},
		{"1.25", "", "Float64", "1.25"},
		{"12345678901234567.89", "", "Decimal(38, 2)", "'12345678901234567.89'"},
		{"7", "", "String", "'7'"},
		{`"it's \\ x"`, "", "String", `'it\'s \\ x'`},
		{`"dflt"`, "", "LowCardinality(Nullable(String))", "'dflt'"},
		{`"dflt"`, "", "Int32", ""},
		{"true", "", "Bool", "true"},
		{"false", "", "UInt8", "0"},
		{"true", "", "String", ""},
		{"null", "", "Int32", ""},
		{"[1, 2]", "", "Array(Int64)", ""},
		{`{"a": 1}`, "", "String", ""},
		{`"2020-01-02"`, "", "Date", "'2020-01-02'"},
		{`"2020-01-02T03:04:05Z"`, "", "Date", ""},
		{`"2020-01-02T03:04:05Z"`, "", "DateTime", "toDateTime(1577934245)"},
		{`"2020-01-02T03:04:05.5+01:00"`, "", "DateTime64(3)", "toDateTime64('2020-01-02 02:04:05.500000000', 3, 'UTC')"},
		{`"2020-01-02T03:04:05.5Z"`, "", "DateTime", ""},
		{"18263", "days", "Date32", "'2020-01-02'"},
		{"-1", "days", "Date32", "'1969-12-31'"},
		{"1577934245123", "ms", "DateTime64(3)", "toDateTime64('2020-01-02 03:04:05.123000000', 3, 'UTC')"},
		{"1577934245123456", "us", "DateTime64(3)", ""},
		{"1577934245000", "ms", "DateTime", "toDateTime(1577934245)"},
		{"-1", "ms", "DateTime64(3)", "toDateTime64('1969-12-31 23:59:59.999000000', 3, 'UTC')"},
		{"18263", "", "Date", ""},
	}
	for _, tt := range tests {
		d := &column.FieldDefault{JSON: tt.json, Unit: tt.unit}
		got, err := d.Literal(tt.typ)
		if tt.want == "" {
			if err == nil {
				t.Errorf("Literal(%s %s, %s) = %s; want it refused", tt.json, tt.unit, tt.typ, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Literal(%s %s, %s) = %s, %v; want %s", tt.json, tt.unit, tt.typ, got, err, tt.want)
		}
	}
	if _, err := (&column.FieldDefault{JSON: "7", Skip: "why"}).Literal("Int32"); err == nil || err.Error() != "why" {
		t.Errorf("a skipped default: %v; want its reason", err)
	}
}

// The JSON converter's schema of a real Debezium 3.6.1 event from
// PostgreSQL 15, after ALTER TABLE … ADD COLUMN tier integer NOT NULL
// DEFAULT 7: the unmapped tier and c_text fields carry their declared
// defaults, which a column added for them writes as DEFAULT 7 and 'dflt'.
func TestDebeziumUnmappedFieldDefaults(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int32"}, {Name: "_version", Type: "UInt64"}, {Name: "_deleted", Type: "UInt8"}}
	p, err := Compile("debezium-json", cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	blk := p.NewBlock()
	for _, f := range []string{"pg15_dbz361_add_column_insert_row4.json", "pg15_dbz361_add_column_insert_row5.json"} {
		if err := p.Append(blk, &kgo.Record{Value: fixture(t, f)}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	got := map[string]*column.FieldDefault{}
	p.TakeUnmapped(func(u *drift.UnmappedField) { got[u.Name] = u.Default }, nil)
	for name, want := range map[string][2]string{"tier": {"Int64", "7"}, "c_text": {"String", "'dflt'"}} {
		d := got[name]
		if d == nil {
			t.Errorf("%s: no default", name)
			continue
		}
		if lit, err := d.Literal(want[0]); err != nil || lit != want[1] {
			t.Errorf("%s: literal %s, %v; want %s", name, lit, err, want[1])
		}
	}
	if d, ok := got["c_int4"]; !ok || d != nil {
		t.Errorf("c_int4 (no default in its schema): %v, seen %v; want seen without a default", d, ok)
	}
	// A date field's default is in Debezium's day count, which the format
	// converts: it is not written raw.
	if d := got["c_date"]; d != nil {
		if _, err := d.Literal("Int64"); err == nil {
			t.Errorf("c_date's default %s written raw", d.JSON)
		}
	}
}

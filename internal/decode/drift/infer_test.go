package drift

import (
	"strings"
	"testing"

	"sink/internal/chschema"
	"sink/internal/chtype"
)

func TestInferColumnType(t *testing.T) {
	old := chschema.ServerTypes{}                                         // 18.16
	cur := chschema.ServerTypes{Bool: true, DateTime64: true, JSON: true} // 26.x
	for _, tc := range []struct {
		values         []string // merged in order
		want18, want26 string   // "" : not known yet
		nullable18     string   // with schema.nullable, on 18.16
	}{
		{[]string{`1`}, "Int64", "Int64", "Nullable(Int64)"},
		{[]string{`-9223372036854775808`}, "Int64", "Int64", "Nullable(Int64)"},
		{[]string{`9223372036854775808`}, "String", "String", "Nullable(String)"}, // beyond Int64: kept exact
		{[]string{`1.5`}, "Float64", "Float64", "Nullable(Float64)"},
		{[]string{`1e3`}, "Float64", "Float64", "Nullable(Float64)"},
		{[]string{`1`, `2.5`}, "Float64", "Float64", "Nullable(Float64)"},
		{[]string{`2.5`, `1`}, "Float64", "Float64", "Nullable(Float64)"},
		{[]string{`true`}, "UInt8", "Bool", "Nullable(UInt8)"},
		{[]string{`false`, `null`}, "UInt8", "Bool", "Nullable(UInt8)"},
		{[]string{`"x"`}, "String", "String", "Nullable(String)"},
		{[]string{`"2024-05-17T12:00:00Z"`}, "String", "DateTime64(3)", "Nullable(String)"},
		{[]string{`"2024-05-17T12:00:00.123+02:00"`}, "String", "DateTime64(3)", "Nullable(String)"},
		{[]string{`"2024-05-17 12:00:00"`}, "String", "String", "Nullable(String)"}, // no zone: not RFC 3339
		{[]string{`"2024-05-17"`}, "String", "String", "Nullable(String)"},
		{[]string{`"2024-05-17T12:00:00Z"`, `"soon"`}, "String", "String", "Nullable(String)"},
		{[]string{`1`, `"x"`}, "String", "String", "Nullable(String)"},
		{[]string{`true`, `1`}, "String", "String", "Nullable(String)"},
		{[]string{`{"a":1}`}, "String", "JSON", "Nullable(String)"},
		{[]string{`{"a":1}`, `[1]`}, "String", "String", "Nullable(String)"},
		{[]string{`[1,2]`}, "Array(Int64)", "Array(Int64)", "Array(Int64)"},
		{[]string{`[1,2.5]`}, "Array(Float64)", "Array(Float64)", "Array(Float64)"},
		{[]string{`["a",null]`}, "Array(String)", "Array(String)", "Array(Nullable(String))"},
		{[]string{`[[1],[2,3]]`}, "Array(Array(Int64))", "Array(Array(Int64))", "Array(Array(Int64))"},
		{[]string{`[{"a":1}]`}, "Array(String)", "Array(String)", "Array(String)"},
		{[]string{`[true]`}, "Array(UInt8)", "Array(Bool)", "Array(UInt8)"},
		{[]string{`[]`, `[1]`}, "Array(Int64)", "Array(Int64)", "Array(Int64)"},
		{[]string{`[1]`, `[]`}, "Array(Int64)", "Array(Int64)", "Array(Int64)"},
		{[]string{`[1]`, `"x"`}, "String", "String", "Nullable(String)"},
		{[]string{`[]`}, "", "", ""},
		{[]string{`null`}, "", "", ""},
		{[]string{`null`, `7`}, "Int64", "Int64", "Nullable(Int64)"},
	} {
		name := strings.Join(tc.values, ",")
		var ft FieldType
		for _, v := range tc.values {
			one, err := InferJSON([]byte(v))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ft = MergeFieldTypes(ft, one)
		}
		for _, c := range []struct {
			srv      chschema.ServerTypes
			nullable bool
			want     string
		}{{old, false, tc.want18}, {cur, false, tc.want26}, {old, true, tc.nullable18}} {
			got, err := ft.Column(c.srv, c.nullable)
			if c.want == "" {
				if err == nil {
					t.Errorf("%s: Column(%+v) = %q, want not known yet", name, c.srv, got)
				}
				continue
			}
			if err != nil || got != c.want {
				t.Errorf("%s: Column(%+v, nullable %v) = %q, %v; want %q", name, c.srv, c.nullable, got, err, c.want)
			}
			// Every inferred type is one the decoder can fill.
			if pt := chtype.Parse(got); pt.Unsupported() {
				t.Errorf("%s: inferred %s, which the decoder cannot fill", name, got)
			}
		}
	}
	// JSON is never Nullable: ClickHouse has no Nullable(JSON).
	obj, _ := InferJSON([]byte(`{"a":1}`))
	if got, _ := obj.Column(cur, true); got != "JSON" {
		t.Errorf("object, nullable, 26.x: %q, want JSON", got)
	}
}

// FuzzInferType checks that no JSON value makes inference panic and that
// every type it settles on is one the decoder can fill, on both kinds of
// server.
func FuzzInferType(f *testing.F) {
	for _, s := range []string{`1`, `1.5`, `"2024-05-17T12:00:00Z"`, `[1,[2]]`, `{"a":[]}`, `[null]`, `true`, `"x"`, `[[[]]]`, `1e400`} {
		f.Add([]byte(s), []byte(`2`))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ta, err := InferJSON(a)
		if err != nil {
			return
		}
		tb, err := InferJSON(b)
		if err != nil {
			return
		}
		ft := MergeFieldTypes(ta, tb)
		for _, srv := range []chschema.ServerTypes{{}, {Bool: true, DateTime64: true, JSON: true}} {
			for _, nullable := range []bool{false, true} {
				typ, err := ft.Column(srv, nullable)
				if err != nil {
					continue
				}
				if pt := chtype.Parse(typ); pt.Unsupported() {
					t.Fatalf("%s + %s: inferred %s, which the decoder cannot fill", a, b, typ)
				}
			}
		}
	})
}

package drift

import (
	"strings"
	"testing"

	"sink/internal/chschema"
)

func TestJSONSchemaFields(t *testing.T) {
	const schema = `{"type":"object","properties":{
		"id":{"type":"integer"},"price":{"type":"number"},"ok":{"type":"boolean"},
		"at":{"type":"string","format":"date-time"},"name":{"type":"string"},"note":{"type":["null","string"]},
		"tags":{"type":"array","items":{"type":"string"}},"scores":{"type":"array","items":{"type":["integer","null"]}},
		"attrs":{"type":"object"},
		"any":{},"either":{"type":["string","integer"]},"ref":{"$ref":"#/definitions/x"},"loose":{"type":"array"}}}`
	got, err := JSONSchemaFields(schema)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range got {
		typ, err := f.Type.Column(chschema.ServerTypes{Bool: true, DateTime64: true, JSON: true}, f.Null)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		names = append(names, f.Name+" "+typ)
	}
	want := "id Int64, price Float64, ok Bool, at DateTime64(3), name String, note Nullable(String), tags Array(String), scores Array(Int64), attrs JSON" // a null element is Nullable only with schema.nullable, as for inferred arrays
	if strings.Join(names, ", ") != want {
		t.Fatalf("fields\n  %s\nwant\n  %s", strings.Join(names, ", "), want)
	}
	if f, err := JSONSchemaFields(`{"type":"string"}`); err != nil || f != nil {
		t.Fatalf("a schema without properties: %v, %v", f, err)
	}
	if _, err := JSONSchemaFields(`{"properties":`); err == nil {
		t.Fatal("a schema that is not JSON parsed")
	}
}

// No schema text makes JSONSchemaFields panic, and every field it returns
// has a type a column can be made of.
func FuzzJSONSchemaFields(f *testing.F) {
	f.Add(`{"properties":{"a":{"type":"array","items":{"type":"array"}}}}`)
	f.Add(`{"properties":{"a":{"type":["null"]},"b":{"type":[1,2]},"c":{"type":"array","items":[]}}}`)
	f.Add(`{"properties":[]}`)
	f.Fuzz(func(t *testing.T, s string) {
		fields, err := JSONSchemaFields(s)
		if err != nil {
			return
		}
		for _, fd := range fields {
			if _, err := fd.Type.Column(chschema.ServerTypes{}, fd.Null); err != nil {
				t.Fatalf("%s: field %s has no column type: %v", s, fd.Name, err)
			}
		}
	})
}

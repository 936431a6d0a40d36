package drift

import (
	"fmt"

	"github.com/valyala/fastjson"
)

// JSONSchemaField is a top-level property of a JSON Schema, typed the way
// the json inference types a value of that shape (FieldType), so that a
// column made from the schema takes the same values a column inferred
// from the records would.
type JSONSchemaField struct {
	Name string
	Type FieldType
	// Null: the schema admits null for the property ("type": ["null", T]).
	Null bool
}

// JSONSchemaFields returns the properties of an object JSON Schema, in the
// order the schema lists them, with the type each declares:
//
//	integer → int, number → float, boolean → bool, object → object,
//	string → string (time with "format": "date-time"),
//	array → array of its "items" type
//
// A property whose type the schema does not pin to one of these (no
// "type", several non-null types, a $ref, oneOf/anyOf, an array without a
// typed "items") is left out: its values decide its type, as they do for
// a field the schema does not declare.
func JSONSchemaFields(text string) ([]JSONSchemaField, error) {
	var p fastjson.Parser
	v, err := p.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("JSON Schema: %w", err)
	}
	props := v.GetObject("properties")
	if props == nil {
		return nil, nil
	}
	var out []JSONSchemaField
	props.Visit(func(k []byte, pv *fastjson.Value) {
		if t, null, ok := jsonSchemaType(pv, 0); ok {
			out = append(out, JSONSchemaField{Name: string(k), Type: t, Null: null})
		}
	})
	return out, nil
}

// jsonSchemaType maps one property's schema to a FieldType, reporting
// whether it admits null and whether the schema pins the type down.
func jsonSchemaType(v *fastjson.Value, depth int) (t FieldType, null, ok bool) {
	if v == nil || v.Type() != fastjson.TypeObject || depth > 8 {
		return t, false, false
	}
	var kinds []string
	switch tv := v.Get("type"); {
	case tv == nil:
		return t, false, false
	case tv.Type() == fastjson.TypeString:
		kinds = []string{string(tv.GetStringBytes())}
	case tv.Type() == fastjson.TypeArray:
		items, _ := tv.Array()
		for _, it := range items {
			s := string(it.GetStringBytes())
			if s == "null" {
				null = true
				continue
			}
			kinds = append(kinds, s)
		}
	}
	if len(kinds) != 1 {
		return t, null, false
	}
	switch kinds[0] {
	case "integer":
		t.Kind = FieldInt
	case "number":
		t.Kind = FieldFloat
	case "boolean":
		t.Kind = FieldBool
	case "object":
		t.Kind = FieldObject
	case "string":
		t.Kind = FieldString
		if string(v.GetStringBytes("format")) == "date-time" {
			t.Kind = FieldTime
		}
	case "array":
		elem, elemNull, ok := jsonSchemaType(v.Get("items"), depth+1)
		if !ok {
			return t, null, false
		}
		elem.Null = elemNull
		t = FieldType{Kind: FieldArray, Elem: &elem}
	default:
		return t, null, false
	}
	return t, null, true
}

package drift

import (
	"fmt"
	"math"
	"time"

	"github.com/valyala/fastjson"

	"sink/internal/chschema"
)

// Type inference for fields that have no column yet (schema evolution,
// `schema.evolve: add_columns`). A FieldType is the shape of the JSON values
// seen, independent of the server; FieldType.Column turns it into a
// ClickHouse type for one server. The rules are conservative: a type is
// chosen only when every value seen fits it, and a field whose values
// disagree becomes String, which takes any JSON value (as its text).

// FieldKind is the shape of a JSON value, as far as choosing a column goes.
type FieldKind uint8

// The kinds, from "nothing known yet" to the catch-all String.
const (
	FieldUnknown FieldKind = iota // only null (or empty arrays) seen
	FieldInt                      // integers that fit Int64
	FieldFloat                    // numbers with a fraction or exponent (or mixed with integers)
	FieldBool                     // true / false
	FieldTime                     // strings in RFC 3339 (2024-05-17T12:00:00Z, with a zone)
	FieldString                   // other strings, or values of disagreeing kinds
	FieldObject                   // JSON objects
	FieldArray                    // JSON arrays; Elem is the element type
)

// FieldType is the inferred type of a field. Null says a null was seen (for
// array elements: a null element), which matters only for arrays:
// Array(Nullable(T)) with schema.nullable.
type FieldType struct {
	Kind FieldKind
	Elem *FieldType // FieldArray only
	Null bool
}

// maxArrayInfer bounds the elements an inference looks at, so a record
// with a huge array costs a bounded amount.
const maxArrayInfer = 64

// inferValue returns the type of one JSON value.
func inferValue(v *fastjson.Value, depth int) FieldType {
	switch v.Type() {
	case fastjson.TypeNull:
		return FieldType{Null: true}
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return FieldType{Kind: FieldBool}
	case fastjson.TypeNumber:
		if _, err := v.Int64(); err == nil {
			return FieldType{Kind: FieldInt}
		}
		f, err := v.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return FieldType{Kind: FieldString}
		}
		if isIntegerText(v.String()) {
			// An integer beyond Int64: Float64 would round it, String keeps it.
			return FieldType{Kind: FieldString}
		}
		return FieldType{Kind: FieldFloat}
	case fastjson.TypeString:
		if isRFC3339(v.GetStringBytes()) {
			return FieldType{Kind: FieldTime}
		}
		return FieldType{Kind: FieldString}
	case fastjson.TypeObject:
		return FieldType{Kind: FieldObject}
	case fastjson.TypeArray:
		if depth >= 8 {
			return FieldType{Kind: FieldString}
		}
		items, _ := v.Array()
		var elem FieldType
		for i, it := range items {
			if i == maxArrayInfer {
				break
			}
			elem = mergeType(elem, inferValue(it, depth+1))
		}
		if elem.Kind == FieldUnknown && !elem.Null {
			return FieldType{Kind: FieldArray} // empty: the element type is not known yet
		}
		return FieldType{Kind: FieldArray, Elem: &elem}
	}
	return FieldType{Kind: FieldString}
}

func isIntegerText(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isRFC3339 reports a date-time with a time zone, as RFC 3339 writes it
// (a fraction of a second is optional). A date alone, or a time without a
// zone, stays a String: its meaning is ambiguous.
func isRFC3339(b []byte) bool {
	if len(b) < len("2006-01-02T15:04:05Z") || len(b) > 40 {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, string(b))
	return err == nil
}

// mergeType is the type that fits the values of both a and b.
func mergeType(a, b FieldType) FieldType {
	null := a.Null || b.Null
	switch {
	case a.Kind == FieldUnknown && a.Elem == nil:
		b.Null = null
		return b
	case b.Kind == FieldUnknown && b.Elem == nil:
		a.Null = null
		return a
	case a.Kind == b.Kind && a.Kind != FieldArray:
		a.Null = null
		return a
	case a.Kind == FieldArray && b.Kind == FieldArray:
		switch {
		case a.Elem == nil:
			b.Null = null
			return b
		case b.Elem == nil:
			a.Null = null
			return a
		}
		e := mergeType(*a.Elem, *b.Elem)
		return FieldType{Kind: FieldArray, Elem: &e, Null: null}
	case (a.Kind == FieldInt && b.Kind == FieldFloat) || (a.Kind == FieldFloat && b.Kind == FieldInt):
		return FieldType{Kind: FieldFloat, Null: null}
	}
	return FieldType{Kind: FieldString, Null: null}
}

// Known reports whether the type is settled enough to make a column of: not
// only nulls, and not an array whose elements were never seen.
func (t FieldType) Known() bool {
	switch t.Kind {
	case FieldUnknown:
		return false
	case FieldArray:
		return t.Elem != nil && t.Elem.Known()
	}
	return true
}

// String names the shape for logs: int, float, bool, time, string, object,
// array(int), unknown.
func (t FieldType) String() string {
	switch t.Kind {
	case FieldInt:
		return "int"
	case FieldFloat:
		return "float"
	case FieldBool:
		return "bool"
	case FieldTime:
		return "time"
	case FieldString:
		return "string"
	case FieldObject:
		return "object"
	case FieldArray:
		if t.Elem == nil {
			return "array(unknown)"
		}
		return "array(" + t.Elem.String() + ")"
	}
	return "unknown"
}

// Column returns the ClickHouse type for t on a server with srv, wrapped in
// Nullable when nullable (and the type can be: not arrays, not JSON). It
// fails for a type that is not Known.
//
//	int → Int64, float → Float64, bool → Bool (UInt8), string → String,
//	RFC 3339 → DateTime64(3) (String), object → JSON (String),
//	array → Array(T) of the element type (objects and nested disagreement:
//	String elements), Array(Nullable(T)) when nullable and a null element
//	was seen.
func (t FieldType) Column(srv chschema.ServerTypes, nullable bool) (string, error) {
	if !t.Known() {
		return "", fmt.Errorf("type not known yet (only %s values seen)", t)
	}
	if t.Kind == FieldArray {
		inner, err := t.Elem.element(srv, nullable)
		if err != nil {
			return "", err
		}
		return "Array(" + inner + ")", nil
	}
	typ := t.scalar(srv)
	if nullable && !(t.Kind == FieldObject && srv.JSON) {
		return "Nullable(" + typ + ")", nil
	}
	return typ, nil
}

// element is the type of an array's elements: objects are JSON text (a
// String), arrays nest, and a null element makes it Nullable when asked.
func (t FieldType) element(srv chschema.ServerTypes, nullable bool) (string, error) {
	switch t.Kind {
	case FieldArray:
		if !t.Known() {
			return "String", nil
		}
		inner, err := t.Elem.element(srv, nullable)
		if err != nil {
			return "", err
		}
		return "Array(" + inner + ")", nil
	case FieldObject:
		return "String", nil
	}
	typ := t.scalar(srv)
	if nullable && t.Null {
		return "Nullable(" + typ + ")", nil
	}
	return typ, nil
}

func (t FieldType) scalar(srv chschema.ServerTypes) string {
	switch t.Kind {
	case FieldInt:
		return "Int64"
	case FieldFloat:
		return "Float64"
	case FieldBool:
		if srv.Bool {
			return "Bool"
		}
		return "UInt8"
	case FieldTime:
		if srv.DateTime64 {
			return "DateTime64(3)"
		}
		return "String"
	case FieldObject:
		if srv.JSON {
			return "JSON"
		}
		return "String"
	}
	return "String"
}

// InferJSON returns the type of one JSON value given as text (for tests and
// `sink check`); merge several with MergeFieldTypes.
func InferJSON(text []byte) (FieldType, error) {
	var p fastjson.Parser
	v, err := p.ParseBytes(text)
	if err != nil {
		return FieldType{}, err
	}
	return inferValue(v, 0), nil
}

// MergeFieldTypes is the type that fits the values of both a and b.
func MergeFieldTypes(a, b FieldType) FieldType { return mergeType(a, b) }

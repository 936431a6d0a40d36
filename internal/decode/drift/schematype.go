package drift

import (
	"fmt"
	"strconv"

	"sink/internal/chschema"
)

// Column types for the fields of registry schemas (avro, protobuf) that
// no column takes. Unlike JSON, whose field types are inferred from the
// values seen (infer.go), a schema field's type is known the moment its
// schema is compiled: SchemaType is that type, independent of the server,
// and SchemaType.Column turns it into a ClickHouse type for one server,
// by the rules the readers fill (avrofmt's and protofmt's package comments
// list them):
//
//	Avro                           Protobuf                    column
//	boolean                        bool                        Bool (UInt8 before 21.12)
//	int, time-millis               int32, sint32, sfixed32     Int32
//	long, time-micros              int64, sint64, sfixed64     Int64
//	                               uint32, fixed32             UInt32
//	                               uint64, fixed64             UInt64
//	float / double                 float / double              Float32 / Float64
//	string, bytes, fixed, enum     string, bytes, enum         String
//	                               Duration                    String (decimal seconds)
//	uuid                                                       UUID
//	decimal(P ≤ 38, S)                                         Decimal(P, S) (String when P > 38)
//	date                                                       Date32 (Date before 21.9)
//	timestamp-millis/micros/nanos  Timestamp                   DateTime64(3/6/9; Timestamp 9)
//	  (and local-timestamp-*)                                  (DateTime, whole seconds, before 20.1)
//	record, duration               message, Struct             JSON (String, the JSON text, before 24.8)
//	                               Value, ListValue            String (the JSON text)
//	array                          repeated                    Array(T)
//	map                            map                         Map(String, T) (String before 21.8)
//	union of null and T            wrapper (Int64Value, …)     Nullable(T)
//	union of several types                                     String
//
// Elements of arrays and values of maps that are records or messages are
// String (the JSON text), as the JSON inference does for objects in
// arrays. Nullable wraps only the types ClickHouse allows it on (not
// Array, Map or JSON); schema.nullable wraps the other scalars too, as for
// JSON fields.
type SchemaType struct {
	kind  schemaKind
	name  string      // stPlain: the ClickHouse type on every server
	prec  int         // stTime: the DateTime64 precision
	elem  *SchemaType // stArray: the element; stMap: the value
	null  bool        // the schema admits null here
	why   string      // stNone: why no column is inferred
	label string      // the type as the schema names it, for logs
}

type schemaKind uint8

const (
	stNone   schemaKind = iota // no column is inferred (why says)
	stPlain                    // name on every server
	stBool                     // Bool, else UInt8
	stDate                     // Date32, else Date
	stTime                     // DateTime64(prec), else DateTime
	stObject                   // JSON, else String
	stArray                    // Array(elem)
	stMap                      // Map(String, elem), else String
)

// String is the type as the schema names it, for logs.
func (t *SchemaType) String() string { return t.label }

// Column returns the ClickHouse type of the field on a server with srv;
// nullable (schema.nullable) wraps scalars in Nullable even when the
// schema does not admit null. It fails for a type no column is inferred
// for, with the reason.
func (t *SchemaType) Column(srv chschema.ServerTypes, nullable bool) (string, error) {
	if t.kind == stNone {
		return "", fmt.Errorf("no column type for the schema's %s: %s", t.label, t.why)
	}
	typ, err := t.base(srv)
	if err != nil {
		return "", err
	}
	if (t.null || nullable) && t.wrappable(srv) {
		return "Nullable(" + typ + ")", nil
	}
	return typ, nil
}

// base is the type without the outer Nullable.
func (t *SchemaType) base(srv chschema.ServerTypes) (string, error) {
	switch t.kind {
	case stNone:
		return "", fmt.Errorf("no column type for the schema's %s: %s", t.label, t.why)
	case stBool:
		if srv.Bool {
			return "Bool", nil
		}
		return "UInt8", nil
	case stDate:
		if srv.Date32 {
			return "Date32", nil
		}
		return "Date", nil
	case stTime:
		if srv.DateTime64 {
			return "DateTime64(" + strconv.Itoa(t.prec) + ")", nil
		}
		return "DateTime", nil
	case stObject:
		if srv.JSON {
			return "JSON", nil
		}
		return "String", nil
	case stArray:
		e, err := t.elem.inner(srv)
		if err != nil {
			return "", err
		}
		return "Array(" + e + ")", nil
	case stMap:
		if !srv.Map {
			return "String", nil
		}
		e, err := t.elem.inner(srv)
		if err != nil {
			return "", err
		}
		return "Map(String, " + e + ")", nil
	}
	return t.name, nil
}

// inner is the type of an array's element or a map's value: records are
// their JSON text, and null makes it Nullable when it can be.
func (t *SchemaType) inner(srv chschema.ServerTypes) (string, error) {
	if t.kind == stObject {
		return "String", nil
	}
	typ, err := t.base(srv)
	if err != nil {
		return "", err
	}
	if t.null && t.wrappable(srv) {
		return "Nullable(" + typ + ")", nil
	}
	return typ, nil
}

// wrappable reports whether ClickHouse allows Nullable around the type.
func (t *SchemaType) wrappable(srv chschema.ServerTypes) bool {
	switch t.kind {
	case stArray:
		return false
	case stMap:
		return !srv.Map // a map is its JSON text without the Map type
	case stObject:
		return !srv.JSON
	}
	return true
}

// The column types a reader gives the fields of its schema: label is the
// type as the schema names it, for logs.

// NoColumn is a field no column type is inferred for, and why.
func NoColumn(why, label string) *SchemaType {
	return &SchemaType{why: why, label: label}
}

// PlainType is the ClickHouse type name on every server.
func PlainType(name, label string) *SchemaType {
	return &SchemaType{kind: stPlain, name: name, label: label}
}

// BoolType is Bool, or UInt8 on a server without it.
func BoolType(label string) *SchemaType { return &SchemaType{kind: stBool, label: label} }

// DateType is Date32, or Date on a server without it.
func DateType(label string) *SchemaType { return &SchemaType{kind: stDate, label: label} }

// TimeType is DateTime64(prec), or DateTime on a server without it.
func TimeType(prec int, label string) *SchemaType {
	return &SchemaType{kind: stTime, prec: prec, label: label}
}

// ObjectType is JSON, or String (the JSON text) on a server without it.
func ObjectType(label string) *SchemaType { return &SchemaType{kind: stObject, label: label} }

// ArrayType is Array(elem).
func ArrayType(elem *SchemaType, label string) *SchemaType {
	return &SchemaType{kind: stArray, elem: elem, label: label}
}

// MapType is Map(String, elem), or String on a server without Map.
func MapType(elem *SchemaType, label string) *SchemaType {
	return &SchemaType{kind: stMap, elem: elem, label: label}
}

// Null is t when the schema admits null for it too (a union with null, a
// wrapper), named label.
func (t *SchemaType) Null(null bool, label string) *SchemaType {
	st := *t
	st.null, st.label = null, label
	return &st
}

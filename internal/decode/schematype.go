package decode

import (
	"fmt"
	"strconv"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/reflect/protoreflect"

	"sink/internal/chschema"
)

// Column types for the fields of registry schemas (avro, protobuf) that
// no column takes. Unlike JSON, whose field types are inferred from the
// values seen (infer.go), a schema field's type is known the moment its
// schema is compiled: SchemaType is that type, independent of the server,
// and SchemaType.Column turns it into a ClickHouse type for one server,
// by the rules the decoder fills (avro.go, protobuf.go list them):
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

func plainType(name, label string) *SchemaType {
	return &SchemaType{kind: stPlain, name: name, label: label}
}

// maxDecimalPrecision is the widest Decimal(P, S) every supported server
// has (Decimal128); wider decimals are kept as their exact text.
const maxDecimalPrecision = 38

// maxSchemaDepth bounds the nesting SchemaType follows (a recursive
// schema would otherwise not end).
const maxSchemaDepth = 16

// avroSchemaType is the column type of an Avro field of schema s.
func avroSchemaType(s avro.Schema, depth int) *SchemaType {
	s = resolveRef(s)
	label := s.String()
	if len(label) > 64 {
		label = string(s.Type())
	}
	if depth > maxSchemaDepth {
		return &SchemaType{why: "nested too deep", label: label}
	}
	lt := logicalType(s)
	switch t := s.(type) {
	case *avro.UnionSchema:
		var branches []avro.Schema
		null := false
		for _, b := range t.Types() {
			if b.Type() == avro.Null {
				null = true
			} else {
				branches = append(branches, b)
			}
		}
		switch len(branches) {
		case 0:
			return &SchemaType{why: "only null", label: label}
		case 1:
			st := *avroSchemaType(branches[0], depth+1)
			st.null, st.label = null, label
			return &st
		}
		// Several types: the decoder fills a String with whichever comes.
		return &SchemaType{kind: stPlain, name: "String", null: null, label: label}
	case *avro.RecordSchema:
		return &SchemaType{kind: stObject, label: label}
	case *avro.ArraySchema:
		return &SchemaType{kind: stArray, elem: avroSchemaType(t.Items(), depth+1), label: label}
	case *avro.MapSchema:
		return &SchemaType{kind: stMap, elem: avroSchemaType(t.Values(), depth+1), label: label}
	case *avro.EnumSchema:
		return plainType("String", label)
	case *avro.FixedSchema:
		switch {
		case lt == string(avro.Decimal):
			return decimalType(t.Logical().(*avro.DecimalLogicalSchema), label)
		case lt == string(avro.UUID) && t.Size() == 16:
			return plainType("UUID", label)
		case isDuration(s):
			return &SchemaType{kind: stObject, label: label}
		}
		return plainType("String", label)
	}
	switch s.Type() {
	case avro.Boolean:
		return &SchemaType{kind: stBool, label: label}
	case avro.Int:
		if lt == string(avro.Date) {
			return &SchemaType{kind: stDate, label: label}
		}
		return plainType("Int32", label)
	case avro.Long:
		switch lt {
		case string(avro.TimestampMillis), string(avro.LocalTimestampMillis):
			return &SchemaType{kind: stTime, prec: 3, label: label}
		case string(avro.TimestampMicros), string(avro.LocalTimestampMicros):
			return &SchemaType{kind: stTime, prec: 6, label: label}
		case "timestamp-nanos", "local-timestamp-nanos":
			return &SchemaType{kind: stTime, prec: 9, label: label}
		}
		return plainType("Int64", label)
	case avro.Float:
		return plainType("Float32", label)
	case avro.Double:
		return plainType("Float64", label)
	case avro.String:
		if lt == string(avro.UUID) {
			return plainType("UUID", label)
		}
		return plainType("String", label)
	case avro.Bytes:
		if lt == string(avro.Decimal) {
			if d, ok := s.(avro.LogicalTypeSchema).Logical().(*avro.DecimalLogicalSchema); ok {
				return decimalType(d, label)
			}
		}
		return plainType("String", label)
	}
	return &SchemaType{why: "not a type the avro format reads", label: label}
}

func decimalType(d *avro.DecimalLogicalSchema, label string) *SchemaType {
	if d.Precision() > maxDecimalPrecision {
		return plainType("String", label)
	}
	return plainType(fmt.Sprintf("Decimal(%d, %d)", d.Precision(), d.Scale()), label)
}

// protoSchemaType is the column type of Protobuf field fd.
func protoSchemaType(fd protoreflect.FieldDescriptor) *SchemaType {
	switch {
	case fd.IsMap():
		return &SchemaType{kind: stMap, elem: protoKindType(fd.MapValue()), label: "map<" + protoLabel(fd.MapKey()) + ", " + protoLabel(fd.MapValue()) + ">"}
	case fd.IsList():
		return &SchemaType{kind: stArray, elem: protoKindType(fd), label: "repeated " + protoLabel(fd)}
	}
	return protoKindType(fd)
}

// protoKindType is the column type of one value of fd (an element, for a
// repeated field).
func protoKindType(fd protoreflect.FieldDescriptor) *SchemaType {
	label := protoLabel(fd)
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return &SchemaType{kind: stBool, label: label}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return plainType("Int32", label)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return plainType("Int64", label)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return plainType("UInt32", label)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return plainType("UInt64", label)
	case protoreflect.FloatKind:
		return plainType("Float32", label)
	case protoreflect.DoubleKind:
		return plainType("Float64", label)
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.EnumKind:
		return plainType("String", label)
	case protoreflect.MessageKind:
		md := fd.Message()
		switch wellKnown(md) {
		case wktTimestamp:
			return &SchemaType{kind: stTime, prec: 9, label: label}
		case wktDuration, wktValue, wktList:
			return plainType("String", label)
		case wktWrapper:
			st := *protoKindType(md.Fields().ByNumber(1))
			st.null, st.label = true, label
			return &st
		}
		return &SchemaType{kind: stObject, label: label}
	}
	return &SchemaType{why: "groups are not read", label: label}
}

func protoLabel(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return string(fd.Message().FullName())
	case protoreflect.EnumKind:
		return string(fd.Enum().FullName())
	}
	return fd.Kind().String()
}

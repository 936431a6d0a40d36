package connect

import (
	"strconv"

	"sink/internal/decode/drift"
)

// The column types that schema.create and schema.evolve give the payload
// fields of an envelope that no column reads: typed by the envelope's
// schema, as the avro format types its schema's fields, and chosen so
// that the Envelope fills each of them exactly (its Read converts by the
// same schema):
//
//	int8 / int16 / int32 / int64       Int8 / Int16 / Int32 / Int64
//	float / double                     Float32 / Float64
//	boolean                            Bool (UInt8 without it)
//	string, bytes                      String (bytes: the bytes themselves)
//	Decimal (scale S)                  Decimal(P, S), P from connect.decimal.precision, else 38
//	Date, io.debezium.time.Date        Date32 (Date without it)
//	Timestamp, io.debezium.time.Timestamp  DateTime64(3)
//	io.debezium.time.MicroTimestamp    DateTime64(6)
//	io.debezium.time.NanoTimestamp     DateTime64(9)
//	io.debezium.time.ZonedTimestamp   DateTime64(9)
//	                                   (DateTime, whole seconds, without DateTime64)
//	Time, MicroTime, NanoTime, ZonedTime  String ("13:14:15.123")
//	io.debezium.time.MicroDuration     Int64 (µs)
//	VariableScaleDecimal, Json         String (the exact number, the JSON text)
//	array                              Array(T)
//	map, string keys                   Map(String, T) (String without Map)
//	map, other keys                    String (the JSON text, keyed by the keys' text)
//	struct                             JSON (String, the JSON text, without it)
//	optional                           Nullable(T) where ClickHouse allows it
//
// Other names (io.debezium.data.Uuid, Enum, Bits, ...) are typed by their
// Connect type: the reader reads them as it reads that type.

// maxDecimalPrecision is the widest Decimal a created column gets: the
// widest every server the sink supports stores (Decimal128; 18.16 has no
// Decimal256).
const maxDecimalPrecision = 38

// FieldType is the column type the schema of the record read last gives
// its payload's top-level field name: nil for a record without a schema
// (a plain record, or an envelope whose schema is null) and for a name
// the schema does not describe.
func (e *Envelope) FieldType(name string) *drift.SchemaType {
	if e.cur == nil || e.cur.root == nil {
		return nil
	}
	n := e.cur.root.child(name)
	if n == nil {
		return nil
	}
	return n.columnType(0)
}

// columnType is the column type of a value of schema n (the table at the
// top of this file).
func (n *connNode) columnType(depth int) *drift.SchemaType {
	label := n.label()
	if depth > MaxSchemaDepth {
		return drift.NoColumn("nested too deep", label)
	}
	var t *drift.SchemaType
	if n.sem.Kind != SemPlain {
		t = n.semanticType(label)
	} else {
		t = n.plainType(label, depth)
	}
	return t.Null(n.optional, label)
}

// plainNames are the column types of Connect's scalar types.
var plainNames = map[connType]string{
	ctInt8: "Int8", ctInt16: "Int16", ctInt32: "Int32", ctInt64: "Int64",
	ctFloat: "Float32", ctDouble: "Float64", ctString: "String", ctBytes: "String",
}

// plainType is the column type of a schema without a semantic type.
func (n *connNode) plainType(label string, depth int) *drift.SchemaType {
	switch n.typ {
	case ctBoolean:
		return drift.BoolType(label)
	case ctArray:
		return drift.ArrayType(n.items.columnType(depth+1), label)
	case ctMap:
		if n.keys.typ != ctString {
			// The converter writes such a map as [key, value] pairs, which
			// the reader makes an object keyed by each key's text (the
			// Envelope's rewrite): a String column keeps that text whole,
			// whatever the keys are.
			return drift.PlainType("String", label)
		}
		return drift.MapType(n.vals.columnType(depth+1), label)
	case ctStruct:
		// As a plain JSON object is typed (drift.FieldType): the reader
		// gives a struct column its JSON, semantic values converted.
		return drift.ObjectType(label)
	}
	if name, ok := plainNames[n.typ]; ok {
		return drift.PlainType(name, label)
	}
	return drift.NoColumn("not a Connect type the sink reads", label)
}

// semanticType is the column type of a schema whose name is one of the
// semantic types the reader converts (SemNames), or of nameless bytes.
func (n *connNode) semanticType(label string) *drift.SchemaType {
	switch n.sem.Kind {
	case SemDate:
		return drift.DateType(label)
	case SemTsMillis:
		return drift.TimeType(3, label)
	case SemTsMicros:
		return drift.TimeType(6, label)
	case SemTsNanos, SemZonedTs:
		// A ZonedTimestamp's text carries as many digits of a second as
		// its source keeps (up to nanoseconds: SQL Server, Oracle), and a
		// DateTime64 of fewer digits would cut the others.
		return drift.TimeType(9, label)
	case SemTimeMillis, SemTimeMicros, SemTimeNanos, SemZonedTime:
		// The reader writes a time of day into a String column as
		// "13:14:15.123" (and "24:00:00"), in a struct or array too; a
		// Date column has no place for it and a DateTime would make it a
		// day in 1970.
		return drift.PlainType("String", label)
	case SemDuration:
		return drift.PlainType("Int64", label)
	case SemDecimal:
		return n.decimalType(label)
	}
	// SemVarDecimal (each value has its own scale: the exact number as
	// text), SemJSON (the JSON text), SemBytes (the bytes).
	return drift.PlainType("String", label)
}

// decimalType is the column type of a Connect Decimal: Decimal(P, S) of
// its scale S and the precision P Debezium declares in
// connect.decimal.precision. Connect's own Decimal declares no precision
// and carries any number of digits at its scale, so no Decimal holds every
// value; without one the widest every server has (38) is chosen, which
// also holds every DECIMAL or NUMERIC of declared precision in most
// databases (Oracle's and SQL Server's go to 38), and a value beyond it is
// a bad record naming the column, never a rounded one. A precision beyond
// 38 (or a scale beyond it) is String: the exact number as text.
func (n *connNode) decimalType(label string) *drift.SchemaType {
	p, s := n.precision, int(n.sem.Scale)
	if p <= 0 {
		p = maxDecimalPrecision
	}
	if s < 0 {
		// A negative scale counts tens: the values are integers of
		// P - S digits.
		p, s = p-s, 0
	}
	// A precision below the scale (Oracle's NUMBER(2, 5)) holds values
	// below 1: Decimal(S, S) holds them.
	p = max(p, s)
	if p > maxDecimalPrecision {
		return drift.PlainType("String", label)
	}
	return drift.PlainType("Decimal("+strconv.Itoa(p)+", "+strconv.Itoa(s)+")", label)
}

// label names schema n for logs and `sink check`: its type, its name and
// whether it is optional, as the schema writes them.
func (n *connNode) label() string {
	s := n.typ.String()
	if n.name != "" {
		s += " " + n.name
	}
	if n.sem.Kind == SemDecimal {
		s += " (scale " + strconv.Itoa(int(n.sem.Scale)) + ")"
	}
	if n.optional {
		s = "optional " + s
	}
	return s
}

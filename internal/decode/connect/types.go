package connect

import (
	"github.com/valyala/fastjson"

	"sink/internal/decode/column"
)

// SemKind is a field's semantic type (Debezium's or Kafka Connect's),
// from its schema.
type SemKind uint8

const (
	SemPlain SemKind = iota // nothing special (or not described)
	SemDate
	SemTsMillis
	SemTsMicros
	SemTsNanos
	SemTimeMillis
	SemTimeMicros
	SemTimeNanos
	SemDecimal
	SemVarDecimal
	SemJSON
	SemBytes
	SemZonedTs   // io.debezium.time.ZonedTimestamp: RFC 3339 text
	SemZonedTime // io.debezium.time.ZonedTime: "15:04:05.999999Z"
	SemDuration  // io.debezium.time.MicroDuration: µs
)

// SemNames are the semantic types that need a conversion; every other name
// (Uuid, Enum, EnumSet, Year, Bits, Xml, geometry structs, ...) arrives in
// a form the column converters read as is.
var SemNames = map[string]SemKind{
	"io.debezium.time.Date":                   SemDate,
	"org.apache.kafka.connect.data.Date":      SemDate,
	"io.debezium.time.Timestamp":              SemTsMillis,
	"org.apache.kafka.connect.data.Timestamp": SemTsMillis,
	"io.debezium.time.MicroTimestamp":         SemTsMicros,
	"io.debezium.time.NanoTimestamp":          SemTsNanos,
	"io.debezium.time.Time":                   SemTimeMillis,
	"org.apache.kafka.connect.data.Time":      SemTimeMillis,
	"io.debezium.time.MicroTime":              SemTimeMicros,
	"io.debezium.time.NanoTime":               SemTimeNanos,
	"org.apache.kafka.connect.data.Decimal":   SemDecimal,
	"io.debezium.data.VariableScaleDecimal":   SemVarDecimal,
	"io.debezium.data.Json":                   SemJSON,
	"io.debezium.time.ZonedTimestamp":         SemZonedTs,
	"io.debezium.time.ZonedTime":              SemZonedTime,
	"io.debezium.time.MicroDuration":          SemDuration,
}

// Sem is one field's semantic type, valid for the current record.
type Sem struct {
	Kind  SemKind
	Scale int32 // SemDecimal
}

// digit reports whether ch is an ASCII decimal digit.
func digit(ch byte) bool { return '0' <= ch && ch <= '9' }

// ScaleParam is the scale a Decimal's schema gives in parameters.scale
// (the JSON converter writes it as a string); ok is false when it gives
// none that is an integer.
func ScaleParam(schema *fastjson.Value) (int32, bool) {
	return atoi32(schema.GetStringBytes("parameters", "scale"))
}

func atoi32(b []byte) (int32, bool) {
	if len(b) == 0 || len(b) > 6 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n int32
	for _, ch := range b {
		if !digit(ch) {
			return 0, false
		}
		n = n*10 + int32(ch-'0')
	}
	if neg {
		n = -n
	}
	return n, len(b) > 0
}

// StructDefaults returns the defaults that the fields of the struct schema
// s declare (connectDefault), by field name; nil when none does.
func StructDefaults(s *fastjson.Value) map[string]*column.FieldDefault {
	var out map[string]*column.FieldDefault
	for _, g := range s.GetArray("fields") {
		if d := connectDefault(g); d != nil {
			if out == nil {
				out = map[string]*column.FieldDefault{}
			}
			out[string(g.GetStringBytes("field"))] = d
		}
	}
	return out
}

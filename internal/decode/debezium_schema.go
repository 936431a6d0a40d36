package decode

// The JSON converter's schema block: what it says about each image field
// (the Debezium semantic type that decides how a value converts), a cache
// of the last block so that a stream of one table describes its schema
// once, and the byte-level framing that finds the payload of a wrapped
// value without parsing the schema again.

import (
	"github.com/valyala/fastjson"
)

// semKind is a field's Debezium semantic type, from the schema block.
type semKind uint8

const (
	semPlain semKind = iota // nothing special (or not described)
	semDate
	semTsMillis
	semTsMicros
	semTsNanos
	semTimeMillis
	semTimeMicros
	semTimeNanos
	semDecimal
	semVarDecimal
	semJSON
	semBytes
	semZonedTs   // io.debezium.time.ZonedTimestamp: RFC 3339 text
	semZonedTime // io.debezium.time.ZonedTime: "15:04:05.999999Z"
	semDuration  // io.debezium.time.MicroDuration: µs
)

// semNames are the semantic types that need a conversion; every other name
// (Uuid, Enum, EnumSet, Year, Bits, Xml, geometry structs, ...) arrives in
// a form the column converters read as is.
var semNames = map[string]semKind{
	"io.debezium.time.Date":                   semDate,
	"org.apache.kafka.connect.data.Date":      semDate,
	"io.debezium.time.Timestamp":              semTsMillis,
	"org.apache.kafka.connect.data.Timestamp": semTsMillis,
	"io.debezium.time.MicroTimestamp":         semTsMicros,
	"io.debezium.time.NanoTimestamp":          semTsNanos,
	"io.debezium.time.Time":                   semTimeMillis,
	"org.apache.kafka.connect.data.Time":      semTimeMillis,
	"io.debezium.time.MicroTime":              semTimeMicros,
	"io.debezium.time.NanoTime":               semTimeNanos,
	"org.apache.kafka.connect.data.Decimal":   semDecimal,
	"io.debezium.data.VariableScaleDecimal":   semVarDecimal,
	"io.debezium.data.Json":                   semJSON,
	"io.debezium.time.ZonedTimestamp":         semZonedTs,
	"io.debezium.time.ZonedTime":              semZonedTime,
	"io.debezium.time.MicroDuration":          semDuration,
}

// fieldSem is one image field's semantic type, valid for the current record.
type fieldSem struct {
	kind  semKind
	scale int32 // semDecimal
}

// schemaCache describes the schema block of the last wrapped message,
// compared byte for byte with the next one: the after and before images'
// semantic types, per image slot.
type schemaCache struct {
	keyIdx        map[string]int // the image's field -> slot (jsonFields.keyIdx)
	key           []byte         // the schema block's exact bytes
	after, before []fieldSem
	// defaults: the after image's fields that declare a default, by name.
	defaults map[string]*FieldDefault
	ok       bool // key, after and before describe a block
	parser   fastjson.Parser
}

// describe fills dst (one entry per image slot) with the semantic type of
// each image field the plan reads: from the envelope schema's field named
// field ("after" or "before"), or, when field is "", from the schema itself
// (a key schema).
func (c *schemaCache) describe(dst []fieldSem, schema *fastjson.Value, field string) {
	clear(dst)
	fields := schema.GetArray("fields")
	if field != "" {
		st := fields
		fields = nil
		for _, f := range st {
			if string(f.GetStringBytes("field")) == field {
				fields = f.GetArray("fields")
				break
			}
		}
	}
	for _, f := range fields {
		name := f.GetStringBytes("name")
		var k semKind
		if len(name) > 0 {
			k = semNames[string(name)]
		} else if string(f.GetStringBytes("type")) == "bytes" {
			k = semBytes
		}
		if k == semPlain {
			continue
		}
		// Only now look the field up: most fields have no semantic type.
		slot, ok := c.slotOf(f.GetStringBytes("field"))
		if !ok {
			continue
		}
		fs := fieldSem{kind: k}
		if k == semDecimal {
			s, ok := atoi32(f.GetStringBytes("parameters", "scale"))
			if !ok {
				continue // a Decimal without a scale is not one we can read; the column decides
			}
			fs.scale = s
		}
		dst[slot] = fs
	}
}

// schemaSems makes the cache describe the schema block sch (its exact
// bytes): it parses sch and describes the after and before images. It
// returns false when sch is not a JSON object.
func (c *schemaCache) schemaSems(sch []byte) bool {
	c.ok = false
	v, err := c.parser.ParseBytes(sch)
	if err != nil || v.Type() != fastjson.TypeObject {
		return false
	}
	c.describe(c.after, v, "after")
	c.describe(c.before, v, "before")
	c.defaults = imageDefaults(v, "after")
	c.key = append(c.key[:0], sch...)
	c.ok = true
	return true
}

// splitWrapped returns the payload of a value in the JSON converter's
// layout, {"schema":S,"payload":P} (whitespace allowed), without parsing
// it, and whether the cache describes S (false when S is null). When S is
// the cached schema, a byte comparison is all it costs: a complete JSON
// object that prefixes the value is the value. Any other layout, or a
// schema that does not parse, gives ok false; the caller then parses the
// whole value. P is not checked here: parsing it does that.
func (c *schemaCache) splitWrapped(b []byte) (payload []byte, known, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false, false
	}
	i, ok = member(b, i+1, `"schema"`)
	if !ok {
		return nil, false, false
	}
	switch rest := b[i:]; {
	case c.ok && len(rest) >= len(c.key) && string(rest[:len(c.key)]) == string(c.key):
		i, known = i+len(c.key), true
	case len(rest) >= 4 && string(rest[:4]) == "null":
		i += 4
	default:
		end, ok := valueEnd(b, i)
		if !ok || !c.schemaSems(b[i:end]) {
			return nil, false, false
		}
		i, known = end, true
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ',' {
		return nil, false, false
	}
	if i, ok = member(b, i+1, `"payload"`); !ok {
		return nil, false, false
	}
	end := len(b)
	for end > i && (b[end-1] == ' ' || b[end-1] == '\n' || b[end-1] == '\t' || b[end-1] == '\r') {
		end--
	}
	if end <= i || b[end-1] != '}' {
		return nil, false, false
	}
	return b[i : end-1], known, true
}

// member skips `ws name ws : ws` from b[i] and returns where the value starts.
func member(b []byte, i int, name string) (int, bool) {
	i = skipSpace(b, i)
	if len(b)-i < len(name) || string(b[i:i+len(name)]) != name {
		return 0, false
	}
	if i = skipSpace(b, i+len(name)); i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return skipSpace(b, i+1), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the object, array or null starting at b[i]
// (brackets matched outside strings; the content is not validated — the
// payload is parsed afterwards and the schema on a cache miss).
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	if b[i] == 'n' {
		if len(b)-i >= 4 && string(b[i:i+4]) == "null" {
			return i + 4, true
		}
		return 0, false
	}
	if b[i] != '{' && b[i] != '[' {
		return 0, false
	}
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		}
	}
	return 0, false
}

// slotOf returns the image slot (index in jsonFields.keys) of a field name.
func (c *schemaCache) slotOf(name []byte) (int, bool) {
	i, ok := c.keyIdx[string(name)]
	return i, ok
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
		if !isDigit(ch) {
			return 0, false
		}
		n = n*10 + int32(ch-'0')
	}
	if neg {
		n = -n
	}
	return n, len(b) > 0
}

// imageDefaults returns the defaults that the fields of the envelope
// schema's field named field declare (connectDefault), by field name; nil
// when none does.
func imageDefaults(schema *fastjson.Value, field string) map[string]*FieldDefault {
	var out map[string]*FieldDefault
	for _, f := range schema.GetArray("fields") {
		if string(f.GetStringBytes("field")) == field {
			out = structDefaults(f)
		}
	}
	return out
}

// structDefaults returns the defaults that the fields of the struct schema
// s declare (connectDefault), by field name; nil when none does.
func structDefaults(s *fastjson.Value) map[string]*FieldDefault {
	var out map[string]*FieldDefault
	for _, g := range s.GetArray("fields") {
		if d := connectDefault(g); d != nil {
			if out == nil {
				out = map[string]*FieldDefault{}
			}
			out[string(g.GetStringBytes("field"))] = d
		}
	}
	return out
}

package decode

import (
	"github.com/valyala/fastjson"

	"sink/internal/decode/column"
	"sink/internal/decode/connect"
)

// The JSON converter's schema block: what it says about each image field
// (the Debezium semantic type that decides how a value converts), a cache
// of the last block so that a stream of one table describes its schema
// once, and the byte-level framing that finds the payload of a wrapped
// value without parsing the schema again.

// schemaCache describes the schema block of the last wrapped message,
// compared byte for byte with the next one: the after and before images'
// semantic types, per image slot.
type schemaCache struct {
	keyIdx        map[string]int // the image's field -> slot (jsonFields.keyIdx)
	key           []byte         // the schema block's exact bytes
	after, before []connect.Sem
	// defaults: the after image's fields that declare a default, by name.
	defaults map[string]*column.FieldDefault
	ok       bool // key, after and before describe a block
	parser   fastjson.Parser
}

// describe fills dst (one entry per image slot) with the semantic type of
// each image field the plan reads: from the envelope schema's field named
// field ("after" or "before"), or, when field is "", from the schema itself
// (a key schema).
func (c *schemaCache) describe(dst []connect.Sem, schema *fastjson.Value, field string) {
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
		var k connect.SemKind
		if len(name) > 0 {
			k = connect.SemNames[string(name)]
		} else if string(f.GetStringBytes("type")) == "bytes" {
			k = connect.SemBytes
		}
		if k == connect.SemPlain {
			continue
		}
		// Only now look the field up: most fields have no semantic type.
		slot, ok := c.slotOf(f.GetStringBytes("field"))
		if !ok {
			continue
		}
		fs := connect.Sem{Kind: k}
		if k == connect.SemDecimal {
			s, ok := connect.ScaleParam(f)
			if !ok {
				continue // a Decimal without a scale is not one we can read; the column decides
			}
			fs.Scale = s
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
	i := connect.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false, false
	}
	i, ok = connect.Member(b, i+1, `"schema"`)
	if !ok {
		return nil, false, false
	}
	switch rest := b[i:]; {
	case c.ok && len(rest) >= len(c.key) && string(rest[:len(c.key)]) == string(c.key):
		i, known = i+len(c.key), true
	case len(rest) >= 4 && string(rest[:4]) == "null":
		i += 4
	default:
		end, ok := connect.ValueEnd(b, i)
		if !ok || !c.schemaSems(b[i:end]) {
			return nil, false, false
		}
		i, known = end, true
	}
	if i = connect.SkipSpace(b, i); i >= len(b) || b[i] != ',' {
		return nil, false, false
	}
	if i, ok = connect.Member(b, i+1, `"payload"`); !ok {
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

// slotOf returns the image slot (index in jsonFields.keys) of a field name.
func (c *schemaCache) slotOf(name []byte) (int, bool) {
	i, ok := c.keyIdx[string(name)]
	return i, ok
}

// imageDefaults returns the defaults that the fields of the envelope
// schema's field named field declare (connectDefault), by field name; nil
// when none does.
func imageDefaults(schema *fastjson.Value, field string) map[string]*column.FieldDefault {
	var out map[string]*column.FieldDefault
	for _, f := range schema.GetArray("fields") {
		if string(f.GetStringBytes("field")) == field {
			out = connect.StructDefaults(f)
		}
	}
	return out
}

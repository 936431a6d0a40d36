package jsonscan

// Kafka Connect's JsonConverter with schemas.enable=true (its default)
// writes every record value as an envelope, {"schema": S, "payload": P}:
// S describes P in Connect's schema language, or is null for a value
// without a schema. Envelope recognizes one in a scanned text, the same
// way for the decoders (the json format reads the payload of such a
// record, the connect-json format requires it) and for the routes'
// field conditions, which then look into the payload.

// connectTypes are the type names of Connect's schema language.
var connectTypes = []string{"boolean", "int8", "int16", "int32", "int64", "float", "double",
	"string", "bytes", "array", "map", "struct"}

// Envelope reports whether the text Scan accepted last is a Kafka Connect
// JSON envelope, and where its schema and payload are: a top-level object
// of exactly two members whose keys are written "schema" and "payload" (in
// either order), where the schema is null or an object whose "type" member
// is a string naming one of Connect's types (boolean, int8, int16, int32,
// int64, float, double, string, bytes, array, map, struct). Anything else,
// also an object with a third member, is not one.
func (s *Scanner) Envelope() (schema, payload Span, ok bool) {
	if len(s.Members) != 2 {
		return Span{}, Span{}, false
	}
	si, pi := 0, 1
	if s.Key(0) == "payload" {
		si, pi = 1, 0
	}
	if s.Key(si) != "schema" || s.Key(pi) != "payload" {
		return Span{}, Span{}, false
	}
	schema, payload = s.Members[si].Val, s.Members[pi].Val
	switch s.Doc[schema.Start] {
	case 'n', 'N':
		if string(s.Doc[schema.Start:schema.End]) == "null" {
			return schema, payload, true
		}
	case '{':
		t, found := s.find(schema.Start, "type", false)
		if !found || s.Doc[t] != '"' {
			return Span{}, Span{}, false
		}
		end, _, _ := s.string(t + 1)
		name := s.Doc[t+1 : end-1]
		for _, c := range connectTypes {
			if string(name) == c {
				return schema, payload, true
			}
		}
	}
	return Span{}, Span{}, false
}

package decode

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/registry"
)

// jsonSchemaFormat is the json-schema route format: each record value is
// a JSON object framed in the Confluent wire format (magic byte 0, the
// 4-byte schema id, then the JSON text), as the JSON Schema serializers of
// Confluent and Apicurio write it. The frame is stripped and the payload
// read exactly as the json format reads a record (same paths, same
// conversions, same plan); the schema id must name a JSON Schema the
// registry has (looked up once per id and remembered, like the other
// registry formats), so a record framed with an unknown id, or with an
// Avro or Protobuf schema's id, is a bad record.
//
// The payload is not validated against the schema: every column already
// checks and converts its own value, and a validator (santhosh-tekuri's
// jsonschema, say) needs the payload as a Go value tree, which costs
// allocations per record that the json plan avoids.
type jsonSchemaFormat struct {
	*jsonFormat
	schemas *schemaReaders[struct{}]
}

func newJSONSchemaFormat(env formatEnv) *jsonSchemaFormat {
	return &jsonSchemaFormat{
		jsonFormat: newJSONFormat(env.st, env.pol),
		schemas:    newSchemaReaders(env.reg, checkJSONSchema),
	}
}

// checkJSONSchema accepts a registry schema of type JSON.
func checkJSONSchema(s *registry.Schema) (struct{}, error) {
	if s.Type != sr.TypeJSON {
		return struct{}{}, fmt.Errorf("schema id %d is a %s schema, not JSON Schema", s.ID, s.Type)
	}
	return struct{}{}, nil
}

func (f *jsonSchemaFormat) begin(r recordData) error {
	if r.value == nil {
		return f.jsonFormat.begin(r) // a tombstone, as the json format treats it
	}
	id, payload, err := frameID(r.value)
	if err != nil {
		return err
	}
	if _, err := f.schemas.get(id, r.topic, false); err != nil {
		return err
	}
	r.value = payload
	return f.jsonFormat.begin(r)
}

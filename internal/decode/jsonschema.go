package decode

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"

	"sink/internal/decode/format"
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
	schemas *format.Schemas[struct{}]
}

func newJSONSchemaFormat(env format.Env) *jsonSchemaFormat {
	return &jsonSchemaFormat{
		jsonFormat: newJSONFormat(env.State, env.Policy),
		schemas:    format.NewSchemas(env.Registry, checkJSONSchema),
	}
}

// checkJSONSchema accepts a registry schema of type JSON.
func checkJSONSchema(s *registry.Schema) (struct{}, error) {
	if s.Type != sr.TypeJSON {
		return struct{}{}, fmt.Errorf("schema id %d is a %s schema, not JSON Schema", s.ID, s.Type)
	}
	return struct{}{}, nil
}

func (f *jsonSchemaFormat) Begin(r format.Record) error {
	if r.Value == nil {
		return f.jsonFormat.Begin(r) // a tombstone, as the json format treats it
	}
	id, payload, err := format.Frame(r.Value)
	if err != nil {
		return err
	}
	if _, err := f.schemas.Get(id, r.Topic, false); err != nil {
		return err
	}
	r.Value = payload
	return f.jsonFormat.Begin(r)
}

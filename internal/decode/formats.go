package decode

import (
	"fmt"

	"sink/internal/decode/avrofmt"
	"sink/internal/decode/format"
	"sink/internal/decode/protofmt"
	"sink/internal/route"
)

// newFormat returns the rowFormat of format f, given env (the Plan's
// conversion scratch and policy, and the schema registry).
func newFormat(f route.Format, env format.Env) (format.Reader, error) {
	if f.Registry() && env.Registry == nil {
		return nil, fmt.Errorf("format %s needs a schema registry (schema_registry.urls)", f)
	}
	switch f {
	case route.JSON:
		return newJSONFormat(env.State, env.Policy), nil
	case route.ConnectJSON:
		return newConnectFormat(env.State, env.Policy), nil
	case route.Debezium:
		return newDebeziumFormat(env.State), nil
	case route.Avro:
		return avrofmt.New(env), nil
	case route.DebeziumAvro:
		return newDbzAvroFormat(env), nil
	case route.Protobuf:
		return protofmt.New(env), nil
	case route.JSONSchema:
		return newJSONSchemaFormat(env), nil
	}
	return nil, fmt.Errorf("unsupported format %q (supported: %s)", f, route.FormatNames())
}

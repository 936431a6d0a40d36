package decode

import (
	"fmt"

	"sink/internal/chschema"
	"sink/internal/route"
)

// rowFormat is the format-specific half of a Plan: how the records of one
// route format become the values of a row. Everything else — the columns,
// their types and conversions, the record attributes ($topic, $partition,
// $offset, $timestamp, $key, $header.NAME), the policy for missing and null
// values, the block — is shared, so a new format is one new file set that
// implements this interface and registers in newFormat.
//
// Compile parses each column's source with route.ParseSource and binds the
// ones that are not record attributes to the format, in column order
// (bind), then calls done. Append calls begin once per record and then,
// for each bound column, read.
//
// A format framed per schema (a schema registry's id in front of each
// value, as Avro and Protobuf are) keeps the bound paths from bind and, in
// begin, looks the record's schema id up in a cache of per-schema readers
// (schemaReaders in registry.go), building one on the first record of a
// schema; read then serves the column from the reader the record selected.
// Its begin returns a *badRecord for a malformed frame or an id the
// registry says does not exist, and an error wrapping ErrUnavailable when
// the schema cannot be fetched now. The debezium-json format does the
// same for the JSON converter's inline schema block (debezium_schema.go).
//
// A rowFormat is owned by one Plan and used from one goroutine.
type rowFormat interface {
	// role describes what a source means in this format, for Compile's
	// errors about a mapping key that is not an insertable column (e.g.
	// " (the version column; add it as UInt64)"); "" for nothing special.
	role(source string) string
	// want lists the sources the format accepts, for Compile's "unknown
	// source" error.
	want() string
	// bind tells the format that column col (the Plan's index, increasing
	// with each call) of type t reads src: a route.Field path or one of the
	// format's own sources. byName says the path is the column's own name,
	// not a mapping.
	bind(col int, c chschema.ColumnSchema, t *chType, src route.Source, byName bool) error
	// done is called after the last bind; it may refuse the plan (the
	// debezium-json format needs a version and a delete-marker column).
	done() error
	// begin decodes a record. It returns nil when the record has a row to
	// read, an error matching ErrSkip when it carries none by design, an
	// error matching ErrUnavailable when it must be tried again later, or
	// a *badRecord (which Append turns into a *RecordError).
	begin(r recordData) error
	// read sets in to bound column col's value in the record begin
	// accepted. An error is the reason the value is bad; the Plan names
	// the column.
	read(col int, in *input) error
	// lenient reports that the record begin accepted is one whose missing
	// and null values are not data (a Debezium delete): they get defaults
	// without the policy refusing or counting them.
	lenient() bool
}

// keyReader is a rowFormat that reads $key itself, because its keys may be
// registry-framed: Compile binds each $key column to it (bindKey) instead
// of reading the key's bytes as text, and read serves those columns too.
type keyReader interface {
	bindKey(col int, c chschema.ColumnSchema, t *chType)
}

// recordData is what a format reads of a Kafka record. It is passed by
// value rather than as the *kgo.Record so that a record the caller built on
// its stack stays there (a pointer handed to an interface method escapes).
type recordData struct {
	value, key []byte
	offset     int64
	topic      string // for the schema registry's subjects (Schema.CheckSubject)
}

// badRecord is a format's answer for a record it cannot decode: the column
// at fault ("" for the whole record) and why.
type badRecord struct {
	column, reason string
	cause          error // ErrPanic when a recovered panic is the reason
}

func (e *badRecord) Error() string { return e.reason }

func bad(column, reason string) error { return &badRecord{column: column, reason: reason} }

// newFormat returns the rowFormat of format f, given env (the Plan's
// conversion scratch and policy, and the schema registry).
func newFormat(f route.Format, env formatEnv) (rowFormat, error) {
	if f.Registry() && env.reg == nil {
		return nil, fmt.Errorf("format %s needs a schema registry (schema_registry.urls)", f)
	}
	switch f {
	case route.JSON:
		return newJSONFormat(env.st, env.pol), nil
	case route.ConnectJSON:
		return newConnectFormat(env.st, env.pol), nil
	case route.Debezium:
		return newDebeziumFormat(env.st), nil
	case route.Avro:
		return newAvroFormat(env), nil
	case route.DebeziumAvro:
		return newDbzAvroFormat(env), nil
	case route.Protobuf:
		return newProtoFormat(env), nil
	case route.JSONSchema:
		return newJSONSchemaFormat(env), nil
	}
	return nil, fmt.Errorf("unsupported format %q (supported: %s)", f, route.FormatNames())
}

// filler is a format whose records may lack values they do not carry
// (unavailable.go): it names the columns that identify a row, the
// row-version column and the delete-marker column. A format that sets appendState.unavailable
// implements it.
type filler interface {
	fillKeys() ([]int, error)
	// metaCols returns the row-version and delete-marker columns.
	metaCols() (version, deleted int)
}

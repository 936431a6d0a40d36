package decode

import (
	"sink/internal/decode/column"
	"sink/internal/decode/drift"
	"sink/internal/decode/format"
)

// The types and errors of the column builders (internal/decode/column)
// and the readers' contract (internal/decode/format) that a Plan's callers
// handle, under the names they have always had here.
type (
	// Block is a batch of rows in typed column buffers (column.Block).
	Block = column.Block
	// Cell names one value of a block (column.Cell).
	Cell = column.Cell
	// FieldDefault is a field's default as its schema declares it
	// (column.FieldDefault).
	FieldDefault = column.FieldDefault
)

// Registry is where the registry-framed formats find the schema a record's
// id names (format.Registry).
type Registry = format.Registry

var (
	// ErrSkip matches the error Append returns for a record that carries
	// no row by design (format.ErrSkip).
	ErrSkip = format.ErrSkip
	// ErrUnavailable matches the error Append returns for a record whose
	// schema cannot be fetched now (format.ErrUnavailable).
	ErrUnavailable = format.ErrUnavailable
	// ErrPanic matches the *RecordError of a record whose decoding
	// panicked (format.ErrPanic).
	ErrPanic = format.ErrPanic
)

// DefaultMaxRowBytes bounds a Plan's rows when its Policy sets no
// MaxRowBytes (format.DefaultMaxRowBytes).
const DefaultMaxRowBytes = format.DefaultMaxRowBytes

// Schema drift (internal/decode/drift): the fields no column reads, and
// the column types schema evolution gives them.
type (
	// UnmappedField is one record field that no column reads
	// (drift.UnmappedField).
	UnmappedField = drift.UnmappedField
	// FieldType is the type inferred from a field's JSON values
	// (drift.FieldType).
	FieldType = drift.FieldType
	// SchemaType is the column type of a field of a registry schema
	// (drift.SchemaType).
	SchemaType = drift.SchemaType
	// JSONSchemaField is a top-level property of a JSON Schema
	// (drift.JSONSchemaField).
	JSONSchemaField = drift.JSONSchemaField
)

const (
	// MaxUnmappedFields bounds the distinct unmapped fields a Plan tracks
	// by name (drift.MaxUnmappedFields).
	MaxUnmappedFields = drift.MaxUnmappedFields
	// MaxFieldName is the longest unmapped field name a Plan stores
	// (drift.MaxFieldName).
	MaxFieldName = drift.MaxFieldName
	// OverflowField names the fields beyond MaxUnmappedFields
	// (drift.OverflowField).
	OverflowField = drift.OverflowField
)

// JSONSchemaFields returns the properties of an object JSON Schema with
// the type each declares (drift.JSONSchemaFields).
func JSONSchemaFields(text string) ([]JSONSchemaField, error) { return drift.JSONSchemaFields(text) }

// MergeFieldTypes is the type that fits the values of both a and b
// (drift.MergeFieldTypes).
func MergeFieldTypes(a, b FieldType) FieldType { return drift.MergeFieldTypes(a, b) }

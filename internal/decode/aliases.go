package decode

import (
	"sink/internal/decode/column"
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

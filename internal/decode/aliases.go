package decode

import "sink/internal/decode/column"

// The types of the column builders (internal/decode/column) that a Plan's
// callers handle, under the names they have always had here.
type (
	// Block is a batch of rows in typed column buffers (column.Block).
	Block = column.Block
	// Cell names one value of a block (column.Cell).
	Cell = column.Cell
	// FieldDefault is a field's default as its schema declares it
	// (column.FieldDefault).
	FieldDefault = column.FieldDefault
)

package writer

import "sink/internal/chtable"

// The writer's Sink works in the vocabulary of internal/chtable, which the
// pipeline shares without importing the writer. These names keep the
// writer's other callers (cmd/sink, the commands, eos) writing writer.Table
// and the like.

type (
	Table       = chtable.Table
	TableName   = chtable.TableName
	TableSpec   = chtable.TableSpec
	Attempt     = chtable.Attempt
	Refresh     = chtable.Refresh
	Class       = chtable.Class
	LatestQuery = chtable.LatestQuery
)

// The classes of an insert error (chtable.Classify).
const (
	Permanent     = chtable.Permanent
	Retriable     = chtable.Retriable
	RefreshSchema = chtable.RefreshSchema
	Canceled      = chtable.Canceled
)

// ErrNoTable is in Describe's error when the table does not exist.
var ErrNoTable = chtable.ErrNoTable

// Package format is the contract between a Plan and its format readers:
// the Reader interface a format implements (and the optional ones it may),
// what a reader gets to read (Record, Env, Policy) and how it answers (a
// column.Value per column, BadRecord, ErrSkip, ErrTombstone,
// ErrUnavailable, ErrNotCarried), with the plumbing several readers share:
// the per-schema-id cache of the registry-framed formats (Schemas, Frame)
// and the limits on hostile input (limits.go).
//
// The readers live beside it: avrofmt and protofmt in packages of their
// own, Kafka Connect's schema language in connect, and json, connect-json,
// debezium-json, debezium-avro and json-schema in package decode, which
// picks the reader by route format (formats.go there).
//
// Concurrency: a Reader, and an Env's State, belong to one Plan and are
// used from one goroutine. A Schemas cache is a reader's.
package format

import (
	"errors"
	"fmt"

	"sink/internal/chschema"
	"sink/internal/chtype"
	"sink/internal/decode/column"
	"sink/internal/route"
)

// Reader is the format-specific half of a Plan: how the records of one
// route format become the values of a row. Everything else (the columns,
// their types and conversions, the record attributes $topic, $partition,
// $offset, $timestamp, $key, $header.NAME, the policy for missing and null
// values, the block) is the Plan's, so a new format is one new reader
// that implements this interface and one line in decode's table of
// formats.
//
// Compile parses each column's source with route.ParseSource and binds the
// ones that are not record attributes to the reader, in column order
// (Bind), then calls Done. Append calls Begin once per record and then,
// for each bound column, Read. On a block sharded by a key
// (Plan.NewShardedBlock) the key's column is read once more, first, to
// place the row: Read must give a column's value as often as it is asked,
// in any order, until the next Begin (every reader serves its columns from
// what Begin decoded).
//
// A format framed per schema (a schema registry's id in front of each
// value, as Avro and Protobuf are) keeps the bound paths from Bind and, in
// Begin, looks the record's schema id up in a cache of per-schema readers
// (Schemas), building one on the first record of a schema; Read then
// serves the column from the reader the record selected. Its Begin
// returns a *BadRecord for a malformed frame or an id the registry says
// does not exist, and an error wrapping ErrUnavailable when the schema
// cannot be fetched now. The debezium-json reader does the same for the
// JSON converter's inline schema block.
//
// A Reader is owned by one Plan and used from one goroutine.
type Reader interface {
	// Role describes what a source means in this format, for Compile's
	// errors about a mapping key that is not an insertable column (e.g.
	// " (the version column; add it as UInt64)"); "" for nothing special.
	Role(source string) string
	// Want lists the sources the format accepts, for Compile's "unknown
	// source" error.
	Want() string
	// Bind tells the reader that column col (the Plan's index, increasing
	// with each call) of type t reads src: a route.Field path or one of the
	// format's own sources. byName says the path is the column's own name,
	// not a mapping.
	Bind(col int, c chschema.ColumnSchema, t *chtype.Type, src route.Source, byName bool) error
	// Done is called after the last Bind; it may refuse the plan (the
	// debezium-json format needs a version and a delete-marker column).
	Done() error
	// Begin decodes a record. It returns nil when the record has a row to
	// read, an error matching ErrSkip when it carries none by design, an
	// error matching ErrUnavailable when it must be tried again later, or
	// a *BadRecord (which Append turns into a *RecordError).
	Begin(r Record) error
	// Read sets in to bound column col's value in the record Begin
	// accepted. An error is the reason the value is bad (the Plan names
	// the column), or ErrNotCarried.
	Read(col int, in *column.Value) error
	// Lenient reports that the record Begin accepted is one whose missing
	// and null values are not data (a Debezium delete): they get defaults
	// without the policy refusing or counting them.
	Lenient() bool
}

// KeyReader is a Reader that reads $key itself, because its keys may be
// registry-framed: Compile binds each $key column to it (BindKey) instead
// of reading the key's bytes as text, and Read serves those columns too.
type KeyReader interface {
	BindKey(col int, c chschema.ColumnSchema, t *chtype.Type)
}

// Record is what a reader reads of a Kafka record. It is passed by
// value rather than as the *kgo.Record so that a record the caller built on
// its stack stays there (a pointer handed to an interface method escapes).
type Record struct {
	Value, Key []byte
	Offset     int64
	Topic      string // for the schema registry's subjects (Schema.CheckSubject)
}

// BadRecord is a reader's answer for a record it cannot decode: the column
// at fault ("" for the whole record) and why.
type BadRecord struct {
	Column, Reason string
	Cause          error // ErrPanic when a recovered panic is the reason
}

// Error is the reason.
func (e *BadRecord) Error() string { return e.Reason }

// Bad is the *BadRecord of column ("" for the whole record) and reason.
func Bad(column, reason string) error { return &BadRecord{Column: column, Reason: reason} }

// ErrNotCarried is a reader's answer (Read's) for a value its record does
// not carry, only a placeholder in its place (Debezium's for an unchanged
// TOASTed value). The Plan appends the column's zero and lists the cell
// for the pipeline to fill (column.Block.Unfilled); the reader implements
// Filler.
var ErrNotCarried = errors.New("the record does not carry this value")

// Filler is a reader whose records may lack values they do not carry
// (ErrNotCarried): it names the columns that identify a row (FillKeys),
// the row-version column and the delete-marker column.
type Filler interface {
	FillKeys() ([]int, error)
	// MetaCols returns the row-version and delete-marker columns.
	MetaCols() (version, deleted int)
}

// PlaceholderReader is a Reader whose rows may hold placeholder values
// rather than data. A Debezium delete's before image under PostgreSQL's
// REPLICA IDENTITY DEFAULT carries only the primary key; Debezium fills
// every other NOT NULL column with a placeholder of its type ("" for text,
// enum and uuid, false, 0, [], the epoch for dates and times). The row is
// a delete marker: only its key and version matter, so a placeholder that
// does not convert to its column's type ("" into an Enum8 or a UUID) must
// not make the delete a bad record.
type PlaceholderReader interface {
	// Placeholder reports that column col's value, which failed to read
	// or convert, may take its type's default instead: the record begun
	// is a delete and col reads a field that is not part of the record
	// key (Debezium's Kafka key holds the primary key fields). A key
	// column that fails is still a bad record, and so is any column when
	// the key cannot be read.
	Placeholder(col int) bool
}

// ErrTombstone is a record without a value (a tombstone of a compacted
// topic): no row, unless the policy makes it bad (Policy.Tombstone).
var ErrTombstone = fmt.Errorf("%w: tombstone", ErrSkip)

// ErrSkip matches (errors.Is) the error Append returns for a record that
// carries no row by design: a tombstone, a Debezium truncate or message
// event, a Protobuf message of a type the route does not read.
// Such a record is handled, not bad: count it and mark its offset done.
var ErrSkip = errors.New("record carries no row")

// ErrPanic matches (errors.Is) the *RecordError of a record whose decoding
// panicked: the record is bad as far as the pipeline goes (dead-lettered,
// or the connector stops), and its reason says where the sink failed.
var ErrPanic = errors.New("decoder panic")

package decode

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/route"
)

// The row semantics every CDC format shares (debezium-json, debezium-avro;
// debeziumFormat in debezium.go documents them): the version and
// delete-marker columns a plan needs, which image an op writes, and the
// row version.

// cdcPlan checks that a CDC plan has its version and delete-marker
// columns.
type cdcPlan struct {
	versionCol string // a column filled from $version, for error messages
	hasDeleted bool   // some column is filled from $deleted
}

// note records column c's source.
func (p *cdcPlan) note(c chschema.ColumnSchema, src route.Source) {
	switch src.Kind {
	case route.Version:
		if p.versionCol == "" {
			p.versionCol = c.Name
		}
	case route.Deleted:
		p.hasDeleted = true
	}
}

// check refuses a plan without a version or a delete-marker column.
func (p *cdcPlan) check() error {
	if p.versionCol == "" {
		return fmt.Errorf("no column receives the row version: add a column \"_version UInt64\" (or map one to $version) so that ReplacingMergeTree keeps the latest change")
	}
	if !p.hasDeleted {
		return fmt.Errorf("no column receives the delete marker: add a column \"_deleted UInt8\" (or map one to $deleted) so that deletes are not read as live rows")
	}
	return nil
}

// cdcRole describes the CDC sources for Compile's mapping errors.
func cdcRole(source string) string {
	switch source {
	case route.VersionSource:
		return " (the version column; add it as UInt64)"
	case route.DeletedSource:
		return " (the delete marker column; add it as UInt8)"
	}
	return ""
}

// cdcWant lists the sources of the CDC formats, for Compile's errors.
var cdcWant = "a path into the row image or " + strings.Join(route.RecordSources(), ", ") + ", " + route.HeaderPrefix + "NAME, " +
	strings.Join(route.FormatSources(route.Debezium), ", ") + ", " + route.SourcePrefix + "PATH"

// cdcOp reads an event's op: del is true for a delete (the before image,
// or the key), false for c, r and u (the after image). Truncates and
// messages are ErrSkip; anything else is a bad record. present says the
// event has an op field at all.
func cdcOp(op []byte, present bool) (del bool, err error) {
	switch string(op) {
	case "c", "r", "u":
		return false, nil
	case "d":
		return true, nil
	case "t":
		return false, ErrTruncate
	case "m":
		return false, errMessage
	}
	if !present {
		return false, bad("", "invalid Debezium event: no op field (is this topic a Debezium change topic?)")
	}
	return false, bad("", "invalid Debezium event: unknown op "+strconv.Quote(column.Cut(op)))
}

// Bounds of the ts_ms-based version: ts_ms × 1e6 + offset mod 1e6 must fit
// in int64 (the year 2262).
const (
	versionOffsets = 1_000_000
	maxVersionTs   = (math.MaxInt64 - versionOffsets + 1) / versionOffsets
)

// Why an event has no version.
const (
	msgNoLSN = "PostgreSQL event without source.lsn, which is its version"
	msgNoTs  = "event has neither ts_ms nor source.ts_ms to version it by"
)

// cdcVersion is the row version: for PostgreSQL (postgres) the LSN, else
// ts_ms × 1,000,000 + offset mod 1,000,000. reason, when not "", says why
// the value cannot version a row (to follow the value in a message).
func cdcVersion(postgres bool, lsn, tsMs, offset int64) (version int64, reason string) {
	if postgres {
		if lsn < 0 {
			return 0, "source.lsn " + strconv.FormatInt(lsn, 10) + " is not an LSN"
		}
		return lsn, ""
	}
	if tsMs < 0 || tsMs > maxVersionTs {
		return 0, " is not a usable time in milliseconds"
	}
	return tsMs*versionOffsets + offset%versionOffsets, ""
}

// cdcMeta reads the change-event columns both Debezium formats serve alike
// (the version, the delete marker, the op) into in; false for any other
// source kind.
func cdcMeta(kind route.Kind, version int64, del bool, op []byte, in *column.Value) bool {
	switch kind {
	case route.Version:
		in.Kind, in.Int = column.Integer, version
	case route.Deleted:
		in.Kind, in.Int = column.Integer, 0
		if del {
			in.Int = 1
		}
	case route.Op:
		in.Kind, in.Bytes = column.String, op
	default:
		return false
	}
	return true
}

// placeholderFormat is a rowFormat whose rows may hold placeholder values
// rather than data. A Debezium delete's before image under PostgreSQL's
// REPLICA IDENTITY DEFAULT carries only the primary key; Debezium fills
// every other NOT NULL column with a placeholder of its type ("" for text,
// enum and uuid, false, 0, [], the epoch for dates and times). The row is
// a delete marker: only its key and version matter, so a placeholder that
// does not convert to its column's type ("" into an Enum8 or a UUID) must
// not make the delete a bad record.
type placeholderFormat interface {
	// placeholder reports that column col's value, which failed to read
	// or convert, may take its type's default instead: the record begun
	// is a delete and col reads a field that is not part of the record
	// key (Debezium's Kafka key holds the primary key fields). A key
	// column that fails is still a bad record, and so is any column when
	// the key cannot be read.
	placeholder(col int) bool
}

// zeroPlaceholder gives column i of the row being appended to b its type's
// default (NULL in a Nullable column), after its placeholder failed.
func (p *Plan) zeroPlaceholder(b *column.Block, i int) error {
	b.Drop(i) // what the failed add wrote, if anything
	in := &p.in
	*in = column.Value{Kind: column.Missing}
	return b.Add(&p.st, i, in)
}

package decode

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"sink/internal/chschema"
	"sink/internal/decode/column"
	"sink/internal/decode/format"
	"sink/internal/route"
)

// The row semantics every CDC format shares (debezium-json, debezium-avro;
// debeziumFormat in debezium.go documents them): the version and
// delete-marker columns a plan needs, which image an op writes, and the
// row version.

// ErrTruncate matches the error Append returns for a Debezium truncate
// event (op t); it matches ErrSkip too. The pipeline applies it or skips
// it as the route's truncate option says.
var ErrTruncate = fmt.Errorf("%w: truncate event (op t)", format.ErrSkip)

// errMessage is a logical decoding message (op m): no row.
var errMessage = fmt.Errorf("%w: logical decoding message (op m)", format.ErrSkip)

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
		return false, format.Bad("", "invalid Debezium event: no op field (is this topic a Debezium change topic?)")
	}
	return false, format.Bad("", "invalid Debezium event: unknown op "+strconv.Quote(column.Cut(op)))
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

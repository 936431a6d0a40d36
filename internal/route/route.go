// Package route owns the grammar of a route's text options: the format
// names, the column sources (a dotted path into the record, or a $ metadata
// source such as $topic, $header.NAME or $source.table), the sources that
// columns named _topic, _version, ... read by default, and the table
// templates (${topic}, ${topic.last}, ${N}) with their resolution against a
// topic name, and the when: conditions that choose a route per record
// (when.go), with the Evaluator that tests them.
//
// config validates a route with it and decode compiles a route with it, so
// the two cannot disagree about what a route means. The words of the error
// messages users see for a bad source or template are here too; decode
// words its own compile errors from the same classification.
//
// Concurrency: every function is safe for concurrent use; an Evaluator
// (per-record scratch) belongs to one goroutine.
package route

import (
	"fmt"
	"slices"
	"strings"
)

// Format is the encoding of a route's record values.
type Format string

// The supported formats.
const (
	// JSON: one JSON object per record value. A record in Kafka Connect's
	// JSON envelope ({"schema": ..., "payload": ...}, what its
	// JsonConverter writes with schemas.enable=true) is read by its
	// schema: the payload's fields are the record's (decode documents
	// the rule).
	JSON Format = "json"
	// ConnectJSON: Kafka Connect's JSON envelope in every record value, a
	// record without one is bad; otherwise read as JSON reads an envelope.
	ConnectJSON Format = "connect-json"
	// Debezium: Debezium change events in Kafka Connect's JSON converter
	// encoding, with or without the schema block (decode documents the
	// envelope and the added sources).
	Debezium Format = "debezium-json"
	// The registry-framed formats: each record value is the Confluent
	// wire format (magic byte 0, the 4-byte schema id, for Protobuf the
	// message indexes) in front of the payload, whose schema the
	// schema_registry serves.
	//
	// Avro: one Avro record per value.
	Avro Format = "avro"
	// Protobuf: one Protobuf message per value.
	Protobuf Format = "protobuf"
	// JSONSchema: one JSON object per value, described by a JSON Schema.
	JSONSchema Format = "json-schema"
	// DebeziumAvro: Debezium change events in Kafka Connect's Avro
	// converter encoding; the same rows, sources and defaults as
	// debezium-json.
	DebeziumAvro Format = "debezium-avro"
)

// formats lists the supported formats; the first is the default.
var formats = []Format{JSON, ConnectJSON, Debezium, Avro, Protobuf, JSONSchema, DebeziumAvro}

// Registry reports whether f's records are registry-framed, so that a
// route of format f needs schema_registry configured.
func (f Format) Registry() bool {
	switch f {
	case Avro, Protobuf, JSONSchema, DebeziumAvro:
		return true
	}
	return false
}

// CDC reports whether f carries Debezium change events (debezium-json,
// debezium-avro): such a route has the version and delete-marker columns
// and the sources $version, $deleted, $op, $ts_ms and $source.PATH.
func (f Format) CDC() bool { return f == Debezium || f == DebeziumAvro }

// DefaultFormat is the format of a route that names none.
const DefaultFormat = JSON

// Valid reports whether f is a supported format.
func (f Format) Valid() bool { return slices.Contains(formats, f) }

// FormatNames lists the supported formats for messages: "json, debezium-json".
func FormatNames() string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// family is the format a table of sources below names: Debezium stands for
// every CDC format.
func (f Format) family() Format {
	if f.CDC() {
		return Debezium
	}
	return f
}

// Kind is what a column source reads.
type Kind uint8

// The kinds of column source. Field is a path into the record value (json)
// or into the row image (debezium-json); the others are metadata.
const (
	Field     Kind = iota // Source.Path holds the path
	Topic                 // $topic
	Partition             // $partition
	Offset                // $offset
	Timestamp             // $timestamp, the record time
	Key                   // $key, the record key as text
	Header                // $header.NAME; Source.Header holds NAME
	// CDC formats only (Format.CDC).
	Version     // $version, the row version
	Deleted     // $deleted, 1 for a delete, else 0
	Op          // $op, the op letter
	TsMs        // $ts_ms, the envelope's ts_ms
	SourceBlock // $source.PATH; Source.Path holds PATH
)

// Record reports whether k reads an attribute of the Kafka record itself
// ($topic, $partition, $offset, $timestamp, $key, $header.NAME), which every
// format offers the same way.
func (k Kind) Record() bool { return k >= Topic && k <= Header }

// Prefixes of the sources that carry a name or path.
const (
	HeaderPrefix = "$header."
	SourcePrefix = "$source."
)

// The names of the sources a configuration writes out in full.
const (
	VersionSource = "$version"
	DeletedSource = "$deleted"
)

// named are the sources that are a fixed name, with the format that has
// them ("" for every format; Debezium for every CDC format), in the order
// messages list them.
var named = []struct {
	name   string
	kind   Kind
	format Format
}{
	{"$topic", Topic, ""},
	{"$partition", Partition, ""},
	{"$offset", Offset, ""},
	{"$timestamp", Timestamp, ""},
	{"$key", Key, ""},
	{VersionSource, Version, Debezium},
	{DeletedSource, Deleted, Debezium},
	{"$op", Op, Debezium},
	{"$ts_ms", TsMs, Debezium},
}

// RecordSources lists the fixed-name sources every format has:
// $topic, $partition, $offset, $timestamp, $key.
func RecordSources() []string { return namesOf("") }

// FormatSources lists the fixed-name sources only format f has
// (debezium-json and debezium-avro: $version, $deleted, $op, $ts_ms).
func FormatSources(f Format) []string {
	if f == "" {
		return nil
	}
	return namesOf(f.family())
}

func namesOf(f Format) []string {
	var out []string
	for _, n := range named {
		if n.format == f {
			out = append(out, n.name)
		}
	}
	return out
}

// defaultColumns are the columns that, when no mapping names them, read a
// metadata source instead of the record field of their own name.
var defaultColumns = []struct {
	column, source string
	format         Format
}{
	{"_topic", "$topic", ""},
	{"_partition", "$partition", ""},
	{"_offset", "$offset", ""},
	{"_timestamp", "$timestamp", ""},
	{"_key", "$key", ""},
	{"_version", VersionSource, Debezium},
	{"_deleted", DeletedSource, Debezium},
}

// DefaultSource returns the source an unmapped column named column reads in
// format f: $topic for _topic, $partition, $offset, $timestamp and $key
// likewise, and for the CDC formats $version for _version and $deleted for
// _deleted. ok is false for every other name: the column reads the record
// field of its own name (the whole name, dots included).
func DefaultSource(f Format, column string) (source string, ok bool) {
	for _, d := range defaultColumns {
		if d.column == column && (d.format == "" || d.format == f.family()) {
			return d.source, true
		}
	}
	return "", false
}

// Source is a parsed column source.
type Source struct {
	Kind   Kind
	Path   []string // Field: the path's elements; SourceBlock: the path below the source block
	Header string   // Header: the header name
}

// Problem classifies why a column source does not parse.
type Problem uint8

// The problems ParseSource reports.
const (
	Empty            Problem = iota + 1 // ""
	NoHeaderName                        // "$header."
	EmptyPathElement                    // "a..b", ".a", "a."
	NoSourceField                       // "$source.", "$source.a..b"
	Unknown                             // "$" and a name the format does not have
	EnvelopeField                       // connect-json: "payload.a", "schema" (EnvelopePath)
)

// SourceError is a column source that does not parse. Its message is the
// one a configuration check prints after the option's key.
type SourceError struct {
	Format  Format
	Spec    string // the source as written
	Problem Problem
}

func (e *SourceError) Error() string {
	switch e.Problem {
	case Empty:
		return "empty source"
	case NoHeaderName:
		return fmt.Sprintf("%q needs a header name, e.g. %strace_id", e.Spec, HeaderPrefix)
	case EmptyPathElement:
		return fmt.Sprintf("JSON path %q has an empty element", e.Spec)
	case NoSourceField:
		return fmt.Sprintf("%q needs a field of the source block, e.g. %stable", e.Spec, SourcePrefix)
	case EnvelopeField:
		return fmt.Sprintf("%q: %s", e.Spec, envelopePathProblem)
	}
	if e.Format.CDC() {
		return fmt.Sprintf("unknown source %q (want a path into the row image such as a.b, or one of %s, %s, %sNAME, %sPATH)",
			e.Spec, strings.Join(RecordSources(), ", "), strings.Join(FormatSources(Debezium), ", "), HeaderPrefix, SourcePrefix)
	}
	return fmt.Sprintf("unknown source %q (want a JSON path such as a.b.c, or one of %s, %sNAME)",
		e.Spec, strings.Join(RecordSources(), ", "), HeaderPrefix)
}

// ParseSource parses a column source of format f: a dotted path (dots
// descend objects; a numeric element indexes an array; no element may be
// empty; in format connect-json not one that names the envelope,
// EnvelopePath), $header.NAME, a fixed-name source the format has, or, for
// the CDC formats, $source.PATH. Names are case-sensitive. The error is a
// *SourceError.
func ParseSource(f Format, spec string) (Source, error) {
	fail := func(p Problem) (Source, error) { return Source{}, &SourceError{Format: f, Spec: spec, Problem: p} }
	switch {
	case spec == "":
		return fail(Empty)
	case strings.HasPrefix(spec, HeaderPrefix):
		if spec == HeaderPrefix {
			return fail(NoHeaderName)
		}
		return Source{Kind: Header, Header: spec[len(HeaderPrefix):]}, nil
	case strings.HasPrefix(spec, "$"):
		for _, n := range named {
			if n.name == spec && (n.format == "" || n.format == f.family()) {
				return Source{Kind: n.kind}, nil
			}
		}
		if path, ok := strings.CutPrefix(spec, SourcePrefix); ok && f.CDC() {
			parts, ok := splitPath(path)
			if !ok {
				return fail(NoSourceField)
			}
			return Source{Kind: SourceBlock, Path: parts}, nil
		}
		return fail(Unknown)
	}
	parts, ok := splitPath(spec)
	if !ok {
		return fail(EmptyPathElement)
	}
	if f == ConnectJSON && EnvelopePath(parts) {
		return fail(EnvelopeField)
	}
	return Source{Kind: Field, Path: parts}, nil
}

// splitPath splits a dotted path; ok is false when an element is empty.
func splitPath(path string) ([]string, bool) {
	parts := strings.Split(path, ".")
	for _, s := range parts {
		if s == "" {
			return nil, false
		}
	}
	return parts, true
}

// EnvelopePath reports whether a field path names Kafka Connect's JSON
// envelope itself ({"schema": ..., "payload": ...}): its first element is
// "schema" or "payload". In format json such a path reads the record as
// written, so a route whose columns name one reads envelopes literally
// (as it did before envelopes were read by their schema); any other path
// reads the envelope's payload. Format connect-json always reads the
// payload and refuses such a path in a mapping or condition (a column
// named payload reads the payload's field of that name).
func EnvelopePath(path []string) bool {
	return len(path) > 0 && (path[0] == "schema" || path[0] == "payload")
}

// envelopePathProblem is why format connect-json refuses an EnvelopePath.
const envelopePathProblem = "format " + string(ConnectJSON) + " reads the fields of the envelope's payload: write the path below it (a, not payload.a)"

// Package decode turns Kafka records into rows of typed ClickHouse column
// buffers. A route's Plan is compiled once from the table schema and the
// route's column mapping; appending a record walks that plan and writes
// straight into per-column buffers, with no map[string]any or reflection per
// record.
//
// Formats: the route's format is the only format-specific part of a Plan.
// Its reader implements one interface (format.Reader, in
// internal/decode/format, with what a reader gets and how it answers);
// formats.go picks the reader by route format, and the conversion of each
// value to its column is the column builders' (internal/decode/column).
// Readers that live here: json (jsonformat.go: one JSON object per record,
// its bytes scanned once without a tree by internal/jsonscan's scanner, and
// a record in Kafka Connect's JSON envelope read by its schema), connect-json
// (the envelope required in every record), debezium-json (debezium.go,
// debezium_schema.go: the envelope, its sources and encodings are
// documented on debeziumFormat), debezium-avro (debezium_avro.go), both
// Debezium formats sharing cdc.go's change-event semantics, and json-schema
// (jsonschema.go: the registry frame stripped, then read as json). Each has
// a package of its own where its grammar is large: avro (avrofmt),
// protobuf (protofmt), Kafka Connect's schema language and semantic types
// (connect). The registry-framed formats get their schemas from the
// Registry given to Compile. The grammar of sources and format names is
// package route's; of column types, package chtype's.
//
// Drift: a Plan also counts the record fields no column reads (the json
// and json-schema record's top-level keys, an envelope's payload's, the
// debezium-json row image's fields, inferring their types from the values;
// the top-level fields of an avro or protobuf record's schema and of a
// debezium-avro row image's, typed by the schema) for the pipeline's drift
// metric and schema evolution (internal/decode/drift; Plan.TakeUnmapped).
//
// Concurrency: a Plan owns reusable parsers and per-schema readers, so one
// Plan is used by one goroutine at a time; a registry-framed format's Append
// may ask the Registry for a schema it has not seen (bounded by a timeout).
// Compiled Protobuf schemas are shared between Plans behind a mutex
// (descriptors are immutable).
// A Block is owned by whoever appends to it; once handed to the writer it is
// read-only.
//
// # Conversions (JSON value -> column type)
//
// A missing field, and JSON null in a non-Nullable column, give the type's
// zero value: 0, "", N zero bytes for FixedString(N), the epoch for dates and
// times, the nil UUID, false, 0.0.0.0 / ::, empty Array and Map, and for an
// Enum its smallest element (ClickHouse's own default), counted per column
// (Plan.TakeDefaults); with Policy.MissingBad / NullBad they make the record
// bad instead. In Nullable(T) both give NULL. A DEFAULT column whose
// expression the server computed once (chschema.ColumnSchema.Default) gets
// that value instead, for a missing field and for null unless the column
// is Nullable: neither counted nor policed, since it is what the table
// asks for (see InsertColumns). Anything else that does not
// convert makes the record bad (*RecordError naming topic, partition,
// offset, column and reason). A bare NaN or Inf number (not JSON, though the
// parser takes it; Infinity it does not) is refused like any other value
// that does not convert. A null record value (tombstone) in the json format
// is skipped (ErrSkip) unless Policy.TombstoneBad. A key repeated in one
// object is read at its first occurrence (the later ones count toward
// neither a column nor drift's unmapped fields); a record nested deeper
// than 300 levels is not JSON here.
//
// How each column type takes a value (numbers, strings, dates and times,
// Decimals, UUIDs, Enums, IPs, Nullable, Array, Map, Tuple, Nested,
// Dynamic, Variant, JSON) and which types are not supported: the column
// builders' package comment (internal/decode/column) lists the rules.
//
// Meta sources: $topic, $key and $header.NAME (the first header of that name)
// are text and convert like a JSON string (so a numeric key fills an Int64
// column); a missing key or header is a missing value, a header with a null
// value is JSON null. $partition and $offset are integers. $timestamp fills
// Date/DateTime/DateTime64 with the record time, numeric columns with unix
// milliseconds, String with RFC 3339 UTC; a record without timestamp (zero or
// -1) counts as missing. Meta sources cannot fill Array or Map columns.
//
// Malformed JSON, an empty value and a top-level value that is not an object
// are bad records with an empty Column.
package decode

// Package decode turns Kafka records into rows of typed ClickHouse column
// buffers. A route's Plan is compiled once from the table schema and the
// route's column mapping; appending a record walks that plan and writes
// straight into per-column buffers, with no map[string]any or reflection per
// record.
//
// Formats: the route's format is the only format-specific part of a Plan,
// behind one interface (rowFormat in format.go); the column conversions
// below are shared. The json format reads one JSON object per record,
// scanning its bytes once without building a tree (jsonscan.go), and a
// record in Kafka Connect's JSON envelope by its schema (connectEnv in
// connect.go, which connect-json requires in every record);
// debezium-json reads Debezium change events (the envelope, its sources and
// encodings are documented on debeziumFormat in debezium.go); avro and
// debezium-avro read registry-framed Avro (avroFormat in avro.go,
// dbzAvroFormat in debezium_avro.go), protobuf reads registry-framed
// Protobuf (protoFormat in protobuf.go; schemas compiled in
// protobuf_schema.go, composite values as JSON in protobuf_json.go) and
// json-schema strips the frame and reads the JSON as json does
// (jsonschema.go), all with schemas from the Registry given to Compile. The
// grammar of sources and format names is package route's.
//
// Drift: a Plan also counts the record fields no column reads (the json
// and json-schema record's top-level keys, an envelope's payload's, the
// debezium-json row image's
// fields, inferring their types from the values; the top-level fields of
// an avro or protobuf record's schema and of a debezium-avro row image's,
// typed by the schema) for the pipeline's drift metric and schema
// evolution (drift.go, infer.go, schematype.go; Plan.TakeUnmapped).
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
//   - Int8..Int64, UInt8..UInt64: JSON numbers and numeric strings ("42",
//     "+42"); 1.0 and 1e3 are fine when integral; true/false are 1/0.
//     Rejected: fractions ("not an integer"), out of range, other text
//     (hex, spaces, "NaN").
//   - Float32/Float64: numbers and numeric strings, plus the strings NaN, Inf,
//     +Inf, -Inf, Infinity (any case), stored as is. Finite values beyond
//     Float32's range are rejected; underflow becomes 0. No hex, no "1_000".
//   - Decimal(P, S), Decimal32/64/128/256(S): numbers and numeric strings,
//     parsed exactly (never via float). More than S digits after the point
//     (trailing zeros don't count) or more than P-S before it is rejected —
//     nothing is rounded.
//   - String: JSON strings as is (unescaped); numbers as their JSON text
//     ("1.50" stays 1.50); true/false as "true"/"false"; objects and arrays
//     as compact JSON text (whitespace dropped). FixedString(N): the same,
//     rejected if longer than N bytes, zero-padded if shorter.
//   - Date, Date32: "YYYY-MM-DD"; a longer date-time string counts by its
//     date as written (its time and zone are validated, not applied); a day
//     number 0..65535; a larger number is a unix timestamp (rules below) and
//     gives its UTC date. Out of the type's range is rejected.
//   - DateTime, DateTime('tz'), DateTime64(p[, 'tz']): RFC 3339
//     ("2024-05-17T12:34:56.789+02:00", Z, ±hh:mm, ±hhmm, ±hh) and ClickHouse
//     text ("2024-05-17 12:34:56[.fff]", optionally with a zone); a string
//     without zone is wall time in the column's zone, or UTC when the column
//     names none (the server's default zone is not consulted); "YYYY-MM-DD"
//     alone is midnight. Numbers and numeric strings are unix timestamps
//     whose unit follows the magnitude: below 1e11 seconds, below 1e14
//     milliseconds, below 1e17 microseconds, else nanoseconds; fractions are
//     kept to the nanosecond (DateTime truncates to the second). Range:
//     DateTime 1970..2106-02-07 06:28:15, DateTime64 1900..2299 (DateTime64(9)
//     up to 2262-04-11).
//   - UUID: the string forms uuid.Parse accepts (canonical, upper case,
//     braces, urn:uuid:, 32 hex digits).
//   - Enum8/Enum16: an element name, or an element value (number, or a
//     numeric string that is not a name); anything else is rejected.
//   - Bool: true/false, 0/1, "true"/"false" (any case), "1"/"0".
//   - IPv4: dotted quad or the address as a number 0..2^32-1. IPv6: any IPv6
//     text, and IPv4 text stored as ::ffff:a.b.c.d. Zones (%eth0) are rejected.
//   - Nullable(T): null or missing is NULL, otherwise as T. An empty string is
//     not NULL (Nullable(Int64) rejects "").
//   - LowCardinality(T) and SimpleAggregateFunction(f, T): as T.
//   - Array(T): a JSON array, elements converted as T (recursively, so
//     Array(Nullable(T)) and Array(Array(T)) work); null or missing is [].
//   - Map(K, V): a JSON object in its key order (duplicate keys kept); keys
//     are converted from their text as K, values as V.
//   - Int128, Int256, UInt128, UInt256: like the smaller integers, exactly,
//     over the type's whole range (numbers beyond 64 bits may be JSON
//     numbers or numeric strings).
//   - Tuple(a T, b U): a JSON object by element name (missing names get
//     their default) or a JSON array by position; an unnamed Tuple(T, U)
//     takes an array of exactly its length. Null or missing: every element
//     its default.
//   - Nested(a T, b U): as the server lists it with flatten_nested=1 (the
//     default), columns n.a Array(T), n.b Array(U): each reads the field
//     "n.a" if present, else "n" as an array of objects (n[i].a) or as an
//     object of parallel arrays (n.a). With flatten_nested=0 one column
//     Nested(...) = Array(Tuple(...)) reads an array of objects. ClickHouse
//     18.16 lists Array(Tuple(T, U)) a as parts a.1, a.2: these read the
//     tuples of "a" written as arrays (or objects with fields "1", "2").
//   - Dynamic: null or missing is NULL; true/false Bool; integral numbers
//     written without fraction or exponent Int64 (UInt64 above Int64,
//     beyond UInt64 their text as String, as ClickHouse infers them); other
//     numbers Float64; strings String (no date inference); objects and
//     arrays their compact JSON text as String; $partition/$offset Int64,
//     $timestamp DateTime64(3).
//   - Variant(T1, ...): null or missing is NULL; any other value goes to the
//     first alternative, in the server's order, that converts it, trying
//     first those of the value's own kind (String/FixedString for a JSON
//     string, numeric types for a number, Bool for true/false, Array/Tuple
//     for an array, Map/Tuple for an object).
//   - JSON, JSON(path Type, ...): a JSON object, or a string holding one;
//     null or missing is {}. The object is sent as text and parsed by the
//     server; typed-path values are first converted here by the rules above
//     (a value that does not convert makes the record bad) and written as a
//     canonical literal (times as UTC RFC 3339, Enums by value, ...), so the
//     server's own, different, text rules never apply to them. Typed paths
//     may be scalar types, Nullable/LowCardinality of them and Arrays. What
//     the server would refuse for the whole INSERT makes the record bad
//     instead: a path written twice ({"a":1,"a":2}, {"a.b":1,"a":{"b":2}}),
//     strings or keys that are not valid UTF-8, numbers beyond Float64.
//
// Not supported (Compile refuses the column, naming it and its type):
// AggregateFunction, geo types, Object('json'), Nullable(Tuple/JSON),
// JSON/Dynamic/Variant inside another type, JSON typed paths of Map/Tuple
// type, and Enums whose element names clickhouse-go v2.51 cannot parse (a
// name with a quote, backslash or control character on any element but the
// highest-valued one; it would panic on the INSERT).
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

// Package column builds ClickHouse columns from the values the format
// readers find: a Value (text, a number's text, true, false, null, a JSON
// tree, an integer or an instant) is converted to its column's type by the
// rules below and appended to that column's typed buffer in a Block, which
// the writer hands to clickhouse-go as the slices its columns take
// (ColumnData) or as the driver's own column layout (Native). It knows no
// record format: Avro, Protobuf, Debezium and Kafka Connect are the readers'
// (internal/decode/...), which hand their values over as Values.
//
// A Layout is the columns of a table's blocks (their parsed types,
// internal/chtype) and makes the blocks; a Plan appends a row by adding
// each column's Value with one State (its scratch) and takes the row back
// whole when one value does not convert, so a block only ever holds whole
// rows. A sharded block (Layout.NewShardedBlock, shard.go) holds one part
// per shard of a cluster and takes each row into the part its sharding
// key's value names (chschema.Placer), as the row is appended. DefaultFill computes a DEFAULT column's value once,
// FieldDefault.Literal writes a schema's default as a DEFAULT expression,
// and a block lists the cells its records did not carry for the pipeline
// to fill (Unfilled, Fill).
//
// Concurrency: a Block is filled by one goroutine (with one State); once
// handed to the writer it is read-only until Reset. A Layout is shared by
// the blocks of one Plan, which are filled and reset on different
// goroutines: its capacity hints are atomic.
//
// # Conversions (value -> column type)
//
// A Missing or Null value is the type's zero value (the Plan applies its
// policy and the column's DEFAULT first); NULL in a Nullable column. Text
// values come as JSON strings, numbers as their text: a reader of a typed
// format hands over what JSON would write for its value.
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
package column

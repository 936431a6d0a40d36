// Package connect reads what Kafka Connect's JsonConverter writes: the
// envelope {"schema": S, "payload": P} that the json and connect-json
// formats read records in (Envelope; package decode has the formats),
// the schema language of S (schema.go: compiled once per text, and each
// payload checked against it), and the semantic types a schema gives a
// value (Debezium's io.debezium.* and Connect's own Date, Time,
// Timestamp, Decimal: SemNames), converted for the column that reads it
// (Conv, Decimals, timeofday.go), and the column type the schema gives a
// payload field no column reads, for schema.create and schema.evolve
// (Envelope.FieldType, columntype.go). The debezium-json reader (in package
// decode) converts its row images' fields with the same semantic types
// and finds the JSON converter's schema block with the same framing
// (framing.go).
//
// Concurrency: an Envelope, a Conv and a Decimals belong to one reader
// and are used from its goroutine.
package connect

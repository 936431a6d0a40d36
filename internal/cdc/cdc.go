// Package cdc is what change data capture needs of the pipeline beyond
// decoding a change event (internal/decode reads Debezium's envelopes):
// filling the values an event did not carry (Filler: Debezium's
// placeholder for an unchanged TOASTed column gets its row's earlier
// value, from the batch or from the table), and applying TRUNCATE events
// in order with the table's other rows (Truncations).
//
// Concurrency: a Filler keeps no state between calls and may be used from
// any goroutine. Truncations belongs to the pipeline's owner goroutine,
// which calls every method; the TRUNCATE TABLE it starts runs on a
// goroutine of its own (Owner.Spawn) and hands its end back through
// Owner.Truncated.
package cdc

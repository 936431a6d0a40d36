// Package cdc is what change data capture needs of the pipeline beyond
// decoding a change event (internal/decode reads Debezium's envelopes):
// filling the values an event did not carry (Filler: Debezium's
// placeholder for an unchanged TOASTed column gets its row's earlier
// value, from the batch or from the table).
//
// Concurrency: a Filler keeps no state between calls and may be used from
// any goroutine.
package cdc

// Package status is the operator's view of a running connector: the
// Snapshot of its state that the pipeline publishes, the per-table History
// of inserts it is built from, and the HTTP endpoints that serve it (GET
// /status, POST /pause and /resume, the status page at /) and Kafka
// Connect's REST API for it in Connect's JSON shapes (connect.go:
// /connectors, the connector's status, info, config and tasks, PUT pause,
// resume and stop, and its offsets: GET, PATCH, DELETE).
//
// Concurrency: a Snapshot is immutable once published. The pipeline's
// owner goroutine builds a new one from its own state (History included,
// which only the owner touches) and publishes it by pointer; HTTP handlers
// only read published snapshots and never touch the owner's state. Pause
// and Resume are requests to the owner (Controller), answered over its
// channels; Stop and the offsets go to the daemon's Lifecycle, which owns
// the pipeline's life. Handler's methods are safe for concurrent use.
package status

import "time"

// State is the connector's state, named as Kafka Connect names a
// connector's (RUNNING, PAUSED, FAILED, ...), plus the transitions the
// sink makes visible: PAUSING (flushing before it is paused) and STOPPING
// (flushing before it exits).
type State string

const (
	// Starting: the process serves HTTP but the pipeline is not running
	// yet (tables being resolved, the group being joined).
	Starting State = "STARTING"
	// Running: fetching and inserting.
	Running State = "RUNNING"
	// Pausing: POST /pause was accepted; fetching has stopped and the
	// open batches are being inserted and committed.
	Pausing State = "PAUSING"
	// Paused: nothing is fetched or inserted, every batch is committed,
	// and the sink is still a member of its consumer group.
	Paused State = "PAUSED"
	// Stopping: SIGTERM; the open batches are being flushed before exit.
	Stopping State = "STOPPING"
	// Stopped: the pipeline returned after a clean shutdown.
	Stopped State = "STOPPED"
	// Failed: a fatal error stopped the pipeline (Snapshot.Error says
	// which); the process exits once the flush after it ends.
	Failed State = "FAILED"
)

// States lists every state, for the state metric.
var States = []State{Starting, Running, Pausing, Paused, Stopping, Stopped, Failed}

// Snapshot is the connector's state at one instant, built by the owner.
type Snapshot struct {
	At    time.Time // when it was built
	State State
	Since time.Time // when State was entered
	Error string    // the fatal error, in state Failed
	// Backpressure: fetching is paused because the buffer budget is used
	// up or records wait for the schema registry.
	Backpressure bool
	// GroupProtocol is the protocol the consumer group runs as the broker
	// lists it (classic or consumer); "" until known.
	GroupProtocol string
	Tables        []Table
	Partitions    []Partition
	// Budgets is each server's budget of INSERTs per minute
	// (clickhouse.max_inserts_per_minute); empty without one.
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget is one server's budget of INSERTs per minute and what it got.
type Budget struct {
	Server     string  `json:"server"`
	PerMinute  float64 `json:"budget_per_minute"`
	LastMinute int     `json:"inserts_last_minute"`
	// OverBudget: latency bounds forced INSERTs past the budget within
	// the last minute; ExceededTotal counts such INSERTs since start.
	OverBudget    bool  `json:"over_budget"`
	ExceededTotal int64 `json:"exceeded_total"`
}

// Table is one target table's part of a Snapshot.
type Table struct {
	Table string `json:"table"` // db.table
	// Rows and successful INSERTs whose acknowledgement came in the last
	// 60 seconds and the last 15 minutes (to the second).
	Rows1m     int64 `json:"rows_1m"`
	Inserts1m  int64 `json:"inserts_1m"`
	Rows15m    int64 `json:"rows_15m"`
	Inserts15m int64 `json:"inserts_15m"`
	// LastInsert is when the last successful INSERT was acknowledged (nil:
	// none since start); SecondsSinceLastInsert is filled when served.
	LastInsert             *time.Time `json:"last_insert_at"`
	SecondsSinceLastInsert *float64   `json:"seconds_since_last_insert"`
	// Batches: open (accumulating rows), sealed and waiting for an insert
	// slot, and being inserted.
	OpenBatches     int `json:"open_batches"`
	OpenRows        int `json:"open_rows"`
	QueuedBatches   int `json:"queued_batches"`
	InFlightBatches int `json:"in_flight_batches"`
	// Target is what seals the table's batches now.
	Target Target `json:"target"`
	// LastError is the last INSERT attempt that failed (nil: none since
	// start); it stays after later inserts succeed, with its time.
	LastError *InsertError `json:"last_error"`
	// History is rows/min and inserts/min over the last 15 minutes.
	History Series `json:"history"`
	// DeadLettered is the records meant for this table sent to the
	// dead-letter topic or table since start (errors.tolerance: all).
	DeadLettered int64 `json:"dead_lettered"`
	// DeadLetterTable is set on a dead-letter table (errors.dlq_table):
	// its rows are bad records, not data.
	DeadLetterTable bool `json:"dead_letter_table,omitempty"`
	// Shards splits the INSERTs of a route with target: local per shard: its
	// batches go to the shards' local tables, one INSERT per shard a batch
	// has rows for, and the counts above are of those INSERTs. Empty for
	// any other table.
	Shards []ShardInserts `json:"shards,omitempty"`
}

// ShardInserts is one shard's part of a Table's INSERTs: rows and INSERTs
// acknowledged in the last minute and the last 15 minutes.
type ShardInserts struct {
	Shard      int   `json:"shard"`
	Rows1m     int64 `json:"rows_1m"`
	Inserts1m  int64 `json:"inserts_1m"`
	Rows15m    int64 `json:"rows_15m"`
	Inserts15m int64 `json:"inserts_15m"`
}

// Target is the batch size and wait a table's batches are sealed at: the
// configured max_rows and max_wait in fixed mode, the controller's
// decision in adaptive mode.
type Target struct {
	Mode        string  `json:"mode"` // fixed or adaptive
	Rows        int     `json:"rows"`
	WaitSeconds float64 `json:"wait_seconds"`
	// Reason is what decides the adaptive wait now (adaptive only).
	Reason string `json:"reason,omitempty"`
}

// InsertError is a failed INSERT attempt.
type InsertError struct {
	Message string    `json:"message"`
	Code    int32     `json:"code"` // ClickHouse exception code; 0: none (network, timeout)
	At      time.Time `json:"at"`
	// Retries counts the table's retried attempts since start.
	Retries int64 `json:"retries"`
}

// Partition is one assigned partition's part of a Snapshot.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset (the next record to
	// read); nil when the group has none for the partition.
	Committed *int64 `json:"committed_offset"`
	// LogEnd is the high watermark the last fetch of the partition saw,
	// and LagRecords the records after the last one fetched; nil before
	// the first fetch that returned records.
	LogEnd     *int64 `json:"log_end_offset"`
	LagRecords *int64 `json:"lag_records"`
	// LagSeconds is filled when served (metrics.LagSeconds: how old the
	// oldest record not fetched yet is at most); nil when unknown.
	LagSeconds *float64 `json:"lag_seconds"`
	// Backpressure: this partition is not fetched because the buffer is
	// full, or its records wait for the schema registry.
	Backpressure bool `json:"paused_by_backpressure"`
	// LastFetched is the Kafka timestamp of the last record fetched
	// (zero: none or unknown); LagSeconds is computed from it.
	LastFetched time.Time `json:"-"`
}

// Series is a rolling per-minute rate sampled every Step: point i is the
// sum over the 60 seconds that end at Start + i*Step.
type Series struct {
	StepSeconds   int       `json:"step_seconds"`
	Start         time.Time `json:"start"`
	RowsPerMin    []int64   `json:"rows_per_min"`
	InsertsPerMin []int64   `json:"inserts_per_min"`
}

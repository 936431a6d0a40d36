package chtable

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Class says what to do about a failed insert.
type Class uint8

const (
	// Permanent: retrying the same block cannot succeed (bad data, bad
	// mapping, no permission). The connector stops without committing past it.
	Permanent Class = iota
	// Retriable: the server or the network is temporarily unable; retry the
	// identical block after a backoff.
	Retriable
	// RefreshSchema: the table or a column is missing or changed; re-read the
	// table schema, then retry.
	RefreshSchema
	// Canceled: the process is stopping; the batch stays unacknowledged and
	// its records are consumed again after restart.
	Canceled
)

func (c Class) String() string {
	switch c {
	case Permanent:
		return "permanent"
	case Retriable:
		return "retriable"
	case RefreshSchema:
		return "refresh-schema"
	case Canceled:
		return "canceled"
	}
	return "unknown"
}

// retriableCodes are ClickHouse exception codes that describe a passing
// condition of the server, not of the data.
var retriableCodes = map[int32]string{
	3:   "UNEXPECTED_END_OF_FILE",
	107: "FILE_DOESNT_EXIST",
	159: "TIMEOUT_EXCEEDED",
	164: "READONLY",
	202: "TOO_MANY_SIMULTANEOUS_QUERIES",
	203: "NO_FREE_CONNECTION",
	209: "SOCKET_TIMEOUT",
	210: "NETWORK_ERROR",
	241: "MEMORY_LIMIT_EXCEEDED",
	// A cluster's passing conditions: a replica that lost its ZooKeeper
	// session is read-only until it has one again (242; 225 without any);
	// a quorum INSERT finds too few live replicas (285), or the previous
	// quorum write not yet on enough of them (286), or cannot tell whether
	// its quorum was reached (319; the identical block's retry is dropped
	// if it was); a synchronous Distributed INSERT reached no replica of
	// some shard (279, each replica's 210 inside). Each is retried with the
	// same block, on another replica.
	225: "NO_ZOOKEEPER",
	242: "TABLE_IS_READ_ONLY",
	252: "TOO_MANY_PARTS",
	279: "ALL_CONNECTION_TRIES_FAILED",
	285: "TOO_FEW_LIVE_REPLICAS",
	286: "UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE",
	319: "UNKNOWN_STATUS_OF_INSERT",
	425: "SYSTEM_ERROR",
	999: "KEEPER_EXCEPTION",
}

// refreshCodes mean the schema the block was built for may be stale.
var refreshCodes = map[int32]string{
	16: "NO_SUCH_COLUMN_IN_TABLE",
	47: "UNKNOWN_IDENTIFIER",
	60: "UNKNOWN_TABLE",
}

// Classify is the one place that decides whether an insert error is worth
// retrying, over either protocol: clickhouse-go returns a server exception as
// *clickhouse.Exception on the native protocol and as one wrapped in a
// *clickhouse.HTTPError over HTTP, and a network failure as a net.Error
// (over HTTP inside a *url.Error). parent is the caller's context: its cancellation means the
// process is stopping, while a deadline of the per-attempt context alone is
// a timeout worth retrying.
func Classify(parent context.Context, err error) Class {
	if err == nil {
		return Retriable // not reached by callers; a nil error is success
	}
	if parent != nil && parent.Err() != nil {
		return Canceled
	}
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		if _, ok := retriableCodes[ex.Code]; ok {
			return Retriable
		}
		if _, ok := refreshCodes[ex.Code]; ok {
			return RefreshSchema
		}
		return Permanent
	}
	// Over HTTP, ClickHouse's own errors carry their exception code and
	// are classified above. An HTTP error without one comes from something
	// in between (a proxy or load balancer): a gateway, overload or timeout
	// status passes, anything else (401, 404, 413 …) will repeat.
	var he *clickhouse.HTTPError
	if errors.As(err, &he) {
		if he.StatusCode >= 500 || he.StatusCode == http.StatusRequestTimeout || he.StatusCode == http.StatusTooManyRequests {
			return Retriable
		}
		return Permanent
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, driver.ErrBadConn),
		errors.Is(err, clickhouse.ErrAcquireConnTimeout),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed):
		return Retriable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return Retriable
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return Retriable
	}
	return Permanent
}

// CodeTooManyParts is ClickHouse's TOO_MANY_PARTS: the partition has
// parts_to_throw_insert active parts and the INSERT was refused.
const CodeTooManyParts = 252

// Code returns the ClickHouse exception code in err, or 0.
func Code(err error) int32 {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return ex.Code
	}
	return 0
}

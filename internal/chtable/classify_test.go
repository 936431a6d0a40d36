package chtable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestClassify(t *testing.T) {
	f := func(err error, want Class) {
		t.Helper()
		if got := Classify(context.Background(), err); got != want {
			t.Fatalf("Classify(%v) = %v, want %v", err, got, want)
		}
	}
	ex := func(code int32) error {
		return fmt.Errorf("insert: %w", &clickhouse.Exception{Code: code, Message: "x"})
	}
	for _, code := range []int32{3, 107, 159, 164, 202, 203, 209, 210, 225, 241, 242, 252, 279, 285, 286, 319, 425, 999} {
		f(ex(code), Retriable)
	}
	for _, code := range []int32{16, 47, 60} {
		f(ex(code), RefreshSchema)
	}
	// data and permission problems: retrying the same block cannot help
	for _, code := range []int32{6, 27, 53, 62, 81, 117, 192, 497} {
		f(ex(code), Permanent)
	}
	f(io.EOF, Retriable)
	f(fmt.Errorf("read: %w", io.ErrUnexpectedEOF), Retriable)
	f(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, Retriable)
	f(fmt.Errorf("write: %w", syscall.EPIPE), Retriable)
	f(syscall.ECONNRESET, Retriable)
	f(context.DeadlineExceeded, Retriable) // per-attempt timeout
	f(clickhouse.ErrAcquireConnTimeout, Retriable)
	f(errors.New("clickhouse [Append]: converting string to Int64 is unsupported"), Permanent)

	// Over HTTP: the server's exception inside an HTTPError decides by its
	// code, whatever the status; an HTTP error without one (a proxy's)
	// by its status.
	httpEx := func(status int, code int32) error {
		return fmt.Errorf("batch sendStreamQuery: %w", &clickhouse.HTTPError{StatusCode: status, Err: &clickhouse.Exception{Code: code}})
	}
	f(httpEx(500, 252), Retriable)
	f(httpEx(500, 241), Retriable)
	f(httpEx(404, 60), RefreshSchema)
	f(httpEx(400, 16), RefreshSchema)
	f(httpEx(500, 27), Permanent)
	f(httpEx(403, 497), Permanent)
	proxy := func(status int) error {
		return &clickhouse.HTTPError{StatusCode: status, Err: errors.New(`response body: "Bad Gateway"`)}
	}
	for _, status := range []int{500, 502, 503, 504, 408, 429} {
		f(proxy(status), Retriable)
	}
	for _, status := range []int{400, 401, 403, 404, 413} {
		f(proxy(status), Permanent)
	}
	// net/http wraps network failures in *url.Error
	f(&url.Error{Op: "Post", URL: "http://127.0.0.1:18123/", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, Retriable)
	f(&url.Error{Op: "Post", URL: "http://127.0.0.1:18123/", Err: io.EOF}, Retriable)
	if Code(httpEx(500, 252)) != 252 {
		t.Fatal("Code over HTTP")
	}

	// a stopping process is not a failure of the insert
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := Classify(ctx, io.EOF); got != Canceled {
		t.Fatalf("canceled parent: got %v", got)
	}
	if Code(ex(252)) != 252 || Code(io.EOF) != 0 {
		t.Fatal("Code")
	}
}

// TestClassifyClusterErrors: what a cluster answered on this machine while a
// node was down, ZooKeeper was away or a quorum was short (the messages as
// 18.16 sent them) is retried, with the identical block.
func TestClassifyClusterErrors(t *testing.T) {
	for _, tc := range []struct {
		code int32
		msg  string
	}{
		{999, "Cannot allocate block number in ZooKeeper: Coordination::Exception: Connection loss"},
		{242, "Table is in readonly mode"},
		{242, "Received from 127.0.0.1:9203. DB::Exception: Table is in readonly mode."}, // nested, through Distributed
		{210, "Connection refused (127.0.0.1:9204)"},
		{285, "Number of alive replicas (1) is less than requested quorum (2)."},
		{159, "Timeout while waiting for quorum"},
		{286, "Quorum for previous write has not been satisfied yet."},
		{319, "Unknown status, client must retry. Reason: Connection loss"},
		{225, "Cannot use ZooKeeper"},
	} {
		err := fmt.Errorf("insert into db.t (10 rows) on replica 127.0.0.1:9201: %w", &clickhouse.Exception{Code: tc.code, Message: tc.msg})
		if got := Classify(context.Background(), err); got != Retriable {
			t.Errorf("code %d %q: %v, want retriable", tc.code, tc.msg, got)
		}
	}
}

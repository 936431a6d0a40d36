package writer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	for _, code := range []int32{3, 107, 159, 164, 202, 203, 209, 210, 241, 242, 252, 285, 319, 425, 999} {
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

package testenv

import (
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// chOptions are the connection options for the test server: user default without
// a password, as testdata/clickhouse/users.xml configures it.
func chOptions(addr string) *clickhouse.Options {
	return &clickhouse.Options{
		Protocol:    clickhouse.Native,
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: "default", Username: "default"},
		DialTimeout: 5 * time.Second,
	}
}

// CHOptions returns fresh clickhouse-go v2 native options for the test server,
// for tests that need to tweak them (database, compression, settings) or hand them
// to code under test. It skips the test when ClickHouse is not up.
func CHOptions(t testing.TB) *clickhouse.Options {
	t.Helper()
	return chOptions(ClickHouse(t))
}

// CHConn returns a native clickhouse-go v2 connection to the test server, closed
// when the test ends. It skips the test when ClickHouse is not up.
func CHConn(t testing.TB) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(CHOptions(t))
	if err != nil {
		t.Fatalf("testenv: clickhouse open: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// NewDatabase creates a database with a unique name on the 18.16 server and
// drops it, with everything in it, when the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, CHConn(t))
}

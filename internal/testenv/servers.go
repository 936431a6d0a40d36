package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The local stack runs two ClickHouse servers: the oldest a user may still run
// (Debian's 18.16) and a current one (26.9). Integration tests that talk to
// ClickHouse run once against each, as subtests named after the server.
const (
	DefaultClickHouse26 = "127.0.0.1:19000"
	DefaultHTTP         = "127.0.0.1:8123"
	DefaultHTTP26       = "127.0.0.1:18123"

	EnvClickHouse26 = "SINK_TEST_CLICKHOUSE26"
	EnvHTTP         = "SINK_TEST_CLICKHOUSE_HTTP"
	EnvHTTP26       = "SINK_TEST_CLICKHOUSE26_HTTP"
)

// Server is one ClickHouse server of the local stack.
type Server struct {
	// Label names the server in subtests and messages: "ch18" or "ch26".
	Label string
	// Addr is the native host:port, HTTPAddr the HTTP host:port.
	Addr, HTTPAddr string
	// Version is what SELECT version() returned, e.g. "26.9.2.1"; Major and
	// Minor are its first two numbers. Set once the server answered.
	Version      string
	Major, Minor int
}

// AtLeast reports whether the server's version is major.minor or newer.
func (s Server) AtLeast(major, minor int) bool {
	return s.Major > major || (s.Major == major && s.Minor >= minor)
}

// Name is the subtest name: the label and the version ("ch26_26.9.2.1").
func (s Server) Name() string { return s.Label + "_" + s.Version }

// Options returns fresh clickhouse-go v2 native options for the server (user
// default, no password), for tests that tweak them or hand them to code under test.
func (s Server) Options() *clickhouse.Options { return chOptions(s.Addr) }

// Conn opens a native connection to the server, closed when the test ends.
func (s Server) Conn(t testing.TB) driver.Conn {
	t.Helper()
	return openConn(t, s.Options(), "clickhouse "+s.Label)
}

// openConn opens a native connection with opts, closed when the test ends; what
// names the server in the failure.
func openConn(t testing.TB, opts *clickhouse.Options, what string) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("testenv: %s open: %v", what, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// NewDatabase creates a database with a unique name on the server and drops it,
// with everything in it, when the test ends.
func (s Server) NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, s.Conn(t))
}

// serverSpecs are the stack's ClickHouse servers, in the order tests run them.
func serverSpecs() []Server {
	return []Server{
		{Label: "ch18", Addr: envOr(EnvClickHouse, DefaultClickHouse), HTTPAddr: envOr(EnvHTTP, DefaultHTTP)},
		{Label: "ch26", Addr: envOr(EnvClickHouse26, DefaultClickHouse26), HTTPAddr: envOr(EnvHTTP26, DefaultHTTP26)},
	}
}

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}

// Servers returns every ClickHouse server of the stack with its version. A
// server that does not answer skips the test (fails it under SINK_REQUIRE_STACK=1).
func Servers(t testing.TB) []Server {
	t.Helper()
	specs := serverSpecs()
	out := make([]Server, 0, len(specs))
	for _, s := range specs {
		out = append(out, server(t, s))
	}
	return out
}

// Server26 returns the current ClickHouse (26.9) of the stack, for tests of
// features that only exist there (their names say so).
func Server26(t testing.TB) Server {
	t.Helper()
	return server(t, serverSpecs()[1])
}

// Server18 returns the old ClickHouse (18.16) of the stack, for tests of how the
// sink refuses or degrades where a feature is missing.
func Server18(t testing.TB) Server {
	t.Helper()
	return server(t, serverSpecs()[0])
}

func server(t testing.TB, s Server) Server {
	t.Helper()
	requireIntegrationBuild(t)
	var version string
	err := probe("clickhouse-version "+s.Addr, func() error {
		v, err := probeVersion(s.Addr)
		version = v
		versions.Store(s.Addr, v)
		return err
	})
	if err != nil {
		unavailable(t, "ClickHouse ("+s.Label+")", s.Addr, err)
	}
	if v, ok := versions.Load(s.Addr); ok {
		version = v.(string)
	}
	s.Version = version
	s.Major, s.Minor = parseVersion(version)
	return s
}

// EachServer runs fn as a subtest per ClickHouse server of the stack, named by
// Server.Name, so `go test -run 'TestX/ch26'` picks one and test output says
// which server a failure was on.
func EachServer(t *testing.T, fn func(t *testing.T, s Server)) {
	t.Helper()
	for _, s := range Servers(t) {
		t.Run(s.Name(), func(t *testing.T) { fn(t, s) })
	}
}

// EachServerConcurrently is EachServer with the servers' subtests running
// side by side, each against its own server, and returns when both have
// ended. It is for long tests whose time is spent waiting (a fixed run of
// minutes, a child process killed and restarted): the test takes as long
// as its slower server instead of the sum of both. The subtests are not
// t.Parallel, so a test that is not parallel itself still shares neither
// server with the package's other tests; fn must not touch state the two
// subtests share without a lock, and must not call t.Setenv or t.Parallel.
func EachServerConcurrently(t *testing.T, fn func(t *testing.T, s Server)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range Servers(t) {
		wg.Go(func() { t.Run(s.Name(), func(t *testing.T) { fn(t, s) }) })
	}
	wg.Wait()
}

func probeVersion(addr string) (string, error) {
	if err := probeClickHouse(addr); err != nil {
		return "", err
	}
	var v string
	err := withProbeConn(addr, func(ctx context.Context, conn driver.Conn) error {
		if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
			return fmt.Errorf("SELECT version(): %w", err)
		}
		return nil
	})
	return v, err
}

// parseVersion returns the first two numbers of a version string; 0, 0 if it has none.
func parseVersion(v string) (major, minor int) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) >= 1 {
		major, _ = strconv.Atoi(parts[0])
	}
	if len(parts) >= 2 {
		minor, _ = strconv.Atoi(parts[1])
	}
	return major, minor
}

// newDatabase creates a uniquely named database through conn and drops it at cleanup.
func newDatabase(t testing.TB, conn driver.Conn) string {
	t.Helper()
	name := UniqueName(t, "test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	// Registered after the connection's Close, so it runs before it (LIFO).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
		}
	})
	return name
}

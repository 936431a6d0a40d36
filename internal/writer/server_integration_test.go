//go:build integration

package writer_test

// clickhouse.protocol: http against both servers, and Probe's findings on
// both.

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"

	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// TestHTTPRefusedOn18: clickhouse-go's HTTP transport cannot talk to 18.16
// at all, and Open says so in one line naming the version it needs and the
// one it found, instead of the driver's "Unknown setting
// client_protocol_version".
func TestHTTPRefusedOn18(t *testing.T) {
	s := testenv.Server18(t)
	cfg := chConfig(t, s.HTTPAddr, "SINK_CLICKHOUSE__PROTOCOL=http")
	w, err := writer.Open(context.Background(), "w", cfg)
	if err == nil {
		w.Close()
		t.Fatal("Open over HTTP on 18.16 succeeded")
	}
	want := "clickhouse: protocol http needs ClickHouse 23.2 or newer; " + s.HTTPAddr + " runs " + s.Version + "; use protocol: native"
	if err.Error() != want {
		t.Fatalf("Open over HTTP on 18.16:\n got %q\nwant %q", err, want)
	}
}

// openTable opens a writer on addr (closed when the test ends) and resolves
// db.table as every INSERT of the writer will name it.
func openTable(t *testing.T, addr, db, table string, env ...string) (*writer.Writer, *writer.Table) {
	t.Helper()
	ctx := context.Background()
	w, err := writer.Open(ctx, "w", chConfig(t, addr, env...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	schema, err := w.Describe(ctx, db, table)
	if err != nil {
		t.Fatal(err)
	}
	return w, chtable.NewTable(db, table, schema, schema)
}

// TestProtocolPortMismatch: the native protocol at an HTTP port is one line
// saying so, on both servers (the HTTP port answers a plain request on both).
func TestProtocolPortMismatch(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		// 18.16 holds the native hello until the dial timeout: keep it short.
		_, err := writer.Open(context.Background(), "w", chConfig(t, s.HTTPAddr, "SINK_CLICKHOUSE__DIAL_TIMEOUT=1s"))
		want := "clickhouse " + s.HTTPAddr + ": this is the HTTP port of ClickHouse " + s.Version +
			"; set clickhouse.protocol: http, or use its native port (tcp_port, usually 9000)"
		if err == nil || err.Error() != want {
			t.Fatalf("native protocol at the HTTP port: %v; want %q", err, want)
		}
	})
}

// TestHTTPInsertErrorsOn26: over HTTP the server's exceptions reach Classify
// with their codes (inside clickhouse.HTTPError), so a constraint violation
// stops the batch and a dropped table asks for a schema refresh, as on the
// native protocol; an unreachable server is a retriable network error.
func TestHTTPInsertErrorsOn26(t *testing.T) {
	s := testenv.Server26(t)
	ctx := context.Background()
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id UInt64, s String, CONSTRAINT small CHECK id < 100) ENGINE = MergeTree ORDER BY id")
	w, tb := openTable(t, s.HTTPAddr, db, "t", "SINK_CLICKHOUSE__PROTOCOL=http")
	insert := func(ids ...uint64) error {
		return w.InsertOnce(ctx, tb, block{cols: tb.Insert, ids: ids, strs: make([]string, len(ids))}, testenv.UniqueName(t, "q"))
	}
	if err := insert(1, 2, 3); err != nil {
		t.Fatalf("insert over HTTP: %v", err)
	}
	var n uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".t").Scan(&n); err != nil || n != 3 {
		t.Fatalf("count = %d, %v; want 3", n, err)
	}

	f := func(err error, class writer.Class, code int32) {
		t.Helper()
		var he *clickhouse.HTTPError
		if err == nil || !errors.As(err, &he) {
			t.Fatalf("error %v is not an HTTPError", err)
		}
		if got := chtable.Classify(ctx, err); got != class || chtable.Code(err) != code {
			t.Fatalf("%v: class %v code %d; want %v, %d", err, got, chtable.Code(err), class, code)
		}
	}
	f(insert(500), writer.Permanent, 469) // VIOLATED_CONSTRAINT
	testenv.Exec(t, ch, "ALTER TABLE "+db+".t DROP COLUMN s")
	f(insert(5), writer.RefreshSchema, 16) // NO_SUCH_COLUMN_IN_TABLE: the block still has s
	testenv.Exec(t, ch, "DROP TABLE "+db+".t")
	f(insert(4), writer.RefreshSchema, 60) // UNKNOWN_TABLE

	// A port where nothing listens: Open's ping fails with the address,
	// and the same error, as an insert would get it, is retriable.
	cfg := chConfig(t, "127.0.0.1:1", "SINK_CLICKHOUSE__PROTOCOL=http")
	_, err := writer.Open(ctx, "w", cfg)
	if err == nil || !strings.HasPrefix(err.Error(), "clickhouse 127.0.0.1:1: not reachable: ") || chtable.Classify(ctx, err) != writer.Retriable {
		t.Fatalf("Open on a closed port: %v (class %v)", err, chtable.Classify(ctx, err))
	}
}

// TestProbe: what Probe finds on each server, and the deduplication window
// of tables with and without their own setting.
func TestProbe(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ctx := context.Background()
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		ddl := []string{
			"CREATE TABLE " + db + ".plain (id UInt64) ENGINE = MergeTree ORDER BY id",
			"CREATE TABLE " + db + ".log (id UInt64) ENGINE = Log",
		}
		if s.AtLeast(23, 2) {
			ddl = append(ddl, "CREATE TABLE "+db+".own (id UInt64, v UInt64, d UInt8) ENGINE = ReplacingMergeTree(v, d) ORDER BY id "+
				"SETTINGS non_replicated_deduplication_window = 100, storage_policy = 'default'")
		} else {
			ddl = append(ddl, "CREATE TABLE "+db+".own (id UInt64, v UInt64) ENGINE = ReplacingMergeTree(v) ORDER BY id SETTINGS index_granularity = 1024")
		}
		testenv.Exec(t, ch, ddl...)
		tables := []*writer.Table{chtable.NewTable(db, "plain", nil, nil), chtable.NewTable(db, "own", nil, nil), chtable.NewTable(db, "log", nil, nil)}
		info, err := writer.Probe(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		windows, err := writer.DedupWindows(ctx, ch, tables)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v %+v", info, windows)
		if info.Version.Text != s.Version || info.Version.Major != s.Major || info.Version.Minor != s.Minor {
			t.Fatalf("version %+v, want %s", info.Version, s.Version)
		}
		// The stack's servers: 18.16 has none of these, 26.9 all.
		modern := s.AtLeast(23, 2)
		if info.DedupToken != modern || info.AsyncInsert != modern || info.AsyncInsertOn != modern || info.JSONType != modern || info.IsDeleted != modern {
			t.Fatalf("features %+v; want all %v on %s", info, modern, s.Version)
		}
		if len(windows) != 3 {
			t.Fatalf("tables %+v", windows)
		}
		plain, own, log := windows[0], windows[1], windows[2]
		if log != (chschema.TableDedup{Table: db + ".log", Engine: "Log"}) {
			t.Fatalf("Log table: %+v", log)
		}
		if modern {
			// 26.9's default is 0: no deduplication of plain MergeTree inserts.
			want := chschema.TableDedup{Table: db + ".plain", Engine: "MergeTree", Setting: "non_replicated_deduplication_window", Value: "0"}
			if plain != want {
				t.Fatalf("plain: %+v, want %+v", plain, want)
			}
			want = chschema.TableDedup{Table: db + ".own", Engine: "ReplacingMergeTree", Setting: "non_replicated_deduplication_window", Value: "100", FromTable: true}
			if own != want {
				t.Fatalf("own: %+v, want %+v", own, want)
			}
		} else {
			// 18.16 has no such setting: Value stays empty.
			for _, d := range []chschema.TableDedup{plain, own} {
				if d.Setting != "non_replicated_deduplication_window" || d.Value != "" || d.FromTable {
					t.Fatalf("18.16 table: %+v", d)
				}
			}
		}
	})
}

// TestHTTPSOn26: protocol http with clickhouse.tls is HTTPS, verified
// against the configured CA. 26.9 here has no certificate configured, so a
// TLS-terminating reverse proxy with a test CA's certificate stands in
// front of its HTTP port, as a load balancer would.
func TestHTTPSOn26(t *testing.T) {
	s := testenv.Server26(t)
	ctx := context.Background()
	pki, other := testenv.NewPKI(t), testenv.NewPKI(t)
	cert, err := tls.LoadX509KeyPair(pki.CertFile, pki.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse("http://" + s.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(upstream))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	ch := s.Conn(t)
	db := s.NewDatabase(t)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	https := []string{"SINK_CLICKHOUSE__PROTOCOL=http", "SINK_CLICKHOUSE__TLS__ENABLED=true"}
	w, tb := openTable(t, addr, db, "t", append(https, "SINK_CLICKHOUSE__TLS__CA_FILE="+pki.CAFile)...)
	b := block{cols: tb.Insert, ids: []uint64{1, 2}, strs: []string{"a", "b"}}
	if err := w.InsertOnce(ctx, tb, b, testenv.UniqueName(t, "q")); err != nil {
		t.Fatalf("insert over HTTPS: %v", err)
	}
	var n uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("count = %d, %v; want 2", n, err)
	}

	// With a password: sent as X-ClickHouse-Key, and a wrong one is the
	// one-line authentication failure.
	user := []string{"SINK_CLICKHOUSE__USERNAME=" + testenv.CHUser, "SINK_CLICKHOUSE__TLS__CA_FILE=" + pki.CAFile}
	w2, err := writer.Open(ctx, "w", chConfig(t, addr, append(append(https, user...), "SINK_CLICKHOUSE__PASSWORD="+testenv.CHPassword)...))
	if err != nil {
		t.Fatalf("HTTPS with a password: %v", err)
	}
	w2.Close()

	fails := func(addr string, env []string, want string) {
		t.Helper()
		w, err := writer.Open(ctx, "w", chConfig(t, addr, env...))
		if err == nil {
			w.Close()
			t.Fatalf("%s %v: Open succeeded", addr, env)
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s %v: %q; want one line containing %q", addr, env, err, want)
		}
	}
	fails(addr, append(append(https, user...), "SINK_CLICKHOUSE__PASSWORD=wrong-password"),
		`clickhouse: authentication failed for user "sink_secure" at `+addr+": ")
	fails(addr, append(https, "SINK_CLICKHOUSE__TLS__CA_FILE="+other.CAFile),
		"clickhouse "+addr+": TLS handshake failed: x509: certificate signed by unknown authority")
	fails(s.HTTPAddr, append(https, "SINK_CLICKHOUSE__TLS__CA_FILE="+pki.CAFile),
		"clickhouse "+s.HTTPAddr+": TLS handshake failed: the server does not speak TLS on this port (HTTPS is https_port, usually 8443)")
}

// TestHTTPLostResponseDeduplicatedOn26: an INSERT that reached the server
// but whose answer was lost (the connection dropped after the server
// committed it) is retried as the identical block, and a table with
// non_replicated_deduplication_window drops the repeat: the rows are there
// once. Over HTTP as over the native protocol, the block is rebuilt from the
// same data, byte for byte. Without the window (26.9's default is 0) the
// same retry doubles the rows, which is what ReplacingMergeTree's FINAL is
// for.
func TestHTTPLostResponseDeduplicatedOn26(t *testing.T) {
	s := testenv.Server26(t)
	if rows, parts := insertLosingAnswer(t, s, "SETTINGS non_replicated_deduplication_window = 100"); rows != 3 || parts != 1 {
		t.Fatalf("with a deduplication window: %d rows in %d parts; want 3 in 1", rows, parts)
	}
	if rows, parts := insertLosingAnswer(t, s, ""); rows != 6 || parts != 2 {
		t.Fatalf("without a deduplication window: %d rows in %d parts; want 6 in 2", rows, parts)
	}
}

// insertLosingAnswer inserts 3 rows over HTTP into a new table (with the
// given SETTINGS clause) through a proxy that drops the connection after
// the server answered the first INSERT, and returns the table's rows and
// active parts once the writer's retry succeeded. Both attempts must have
// finished on the server.
func insertLosingAnswer(t *testing.T, s testenv.Server, settings string) (rows, parts uint64) {
	t.Helper()
	ctx := context.Background()
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id UInt64, s String) ENGINE = MergeTree ORDER BY id "+settings)
	var dropped atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "http", s.HTTPAddr
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if strings.HasPrefix(r.URL.Query().Get("query"), "INSERT") && dropped.CompareAndSwap(false, true) {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close() // the server committed the INSERT; its answer is lost
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	defer srv.Close()

	w, tb := openTable(t, srv.Listener.Addr().String(), db, "t",
		"SINK_CLICKHOUSE__PROTOCOL=http", "SINK_CLICKHOUSE__RETRY_INITIAL=20ms", "SINK_CLICKHOUSE__RETRY_MAX=50ms")
	var attempts []writer.Attempt
	b := block{cols: tb.Insert, ids: []uint64{1, 2, 3}, strs: []string{"a", "b", "c"}}
	if err := w.Insert(ctx, tb, b, 1, func(a writer.Attempt) { attempts = append(attempts, a) }, nil); err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 1 || attempts[0].Class != writer.Retriable {
		t.Fatalf("attempts %+v; want one retriable failure", attempts)
	}
	t.Logf("lost answer: %v", attempts[0].Err)
	if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, ch, "SYSTEM FLUSH LOGS")
	var finished uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM system.query_log WHERE type = 'QueryFinish' AND query_kind = 'Insert' AND has(tables, ?)", db+".t").Scan(&finished); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = ? AND table = 't' AND active", db).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if finished != 2 {
		t.Fatalf("%d INSERTs finished on the server; want 2 (the lost one and the retry)", finished)
	}
	return rows, parts
}

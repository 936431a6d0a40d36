//go:build integration

package main

// The whole sink (realMain, as the binary runs it) against the local stack's
// secured endpoints: Kafka's SASL_SSL listener with the stack's test CA and a
// client certificate, ClickHouse with a password from a file. And the two
// promises about secrets: a refused password is one line and exit 1, and no
// password ever shows up in logs (at debug level), `sink check` output, or
// /metrics.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/chschema"
	"sink/internal/testenv"
)

// syncBuffer is the stderr of a sink running in a goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runningSink is `sink run` in-process. It stops on SIGTERM, which the
// process sends itself: run's signal handler is installed before anything
// else, and stop is only called once the sink has shown it is running.
type runningSink struct {
	stdout, stderr syncBuffer
	code           chan int
	once           sync.Once
	exit           int
}

func startSink(t *testing.T, path string) *runningSink {
	t.Helper()
	r := &runningSink{code: make(chan int, 1)}
	go func() { r.code <- realMain([]string{"run", "--config", path}, &r.stdout, &r.stderr) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop sends SIGTERM and returns the exit code (once; later calls return it
// again).
func (r *runningSink) stop(t *testing.T) int {
	t.Helper()
	r.once.Do(func() {
		select {
		case r.exit = <-r.code: // already exited
			return
		default:
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case r.exit = <-r.code:
		case <-time.After(60 * time.Second):
			t.Fatalf("sink did not exit within 60s of SIGTERM; log:\n%s", r.stderr.String())
		}
	})
	return r.exit
}

// waitRows polls until table has want rows, failing early if the sink exits.
func waitRows(t *testing.T, r *runningSink, ch driver.Conn, table string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var n uint64
		if err := ch.QueryRow(context.Background(), "SELECT count() FROM "+table).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		if n == want {
			return
		}
		if n > want {
			t.Fatalf("%s has %d rows, want %d", table, n, want)
		}
		select {
		case code := <-r.code:
			r.code <- code
			t.Fatalf("sink exited with %d after %d of %d rows; log:\n%s", code, n, want, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d of %d rows after 90s; log:\n%s", table, n, want, r.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// produceJSON produces rec(0) … rec(n-1) to topic.
func produceJSON(t *testing.T, topic string, n int, rec func(i int) string) {
	t.Helper()
	values := make([]string, n)
	for i := range values {
		values[i] = rec(i)
	}
	testenv.Produce(t, topic, values...)
}

// secureYAML is a config for topic → db.table over the SASL_SSL listener
// (SCRAM-SHA-512, client certificate) and ClickHouse at chAddr as the user
// with a password, read from pwFile. The Kafka password comes from the
// environment.
func secureYAML(s testenv.SecureKafka, chAddr, topic, db, table, pwFile, extra string) string {
	return fmt.Sprintf(`
name: %s
kafka:
  brokers: [%q]
  topics: [%q]
  fetch_max_wait: 100ms
  tls: {enabled: true, ca_file: %q, cert_file: %q, key_file: %q}
  sasl: {mechanism: SCRAM-SHA-512, username: %s}
clickhouse:
  addrs: [%q]
  database: %s
  username: %s
  password_file: %q
batch: {max_latency: 400ms}
routes: [{topic: %q, table: %q}]
shutdown_timeout: 20s
%s`, "sec-"+topic, s.Brokers[0], topic, s.CAFile, s.CertFile, s.KeyFile, s.User,
		chAddr, db, testenv.CHUser, pwFile, topic, table, extra)
}

func writePasswordFile(t *testing.T, pw string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var servingRE = regexp.MustCompile(`"addr":"([^"]+)"[^\n]*"message":"serving /metrics`)

// TestSecureEndToEnd: the sink consumes through SASL_SSL (SCRAM-SHA-512, the
// stack's test CA, a client certificate) and inserts as a ClickHouse user
// with a password from a file; every record becomes a row. Its debug log,
// `sink check` output and /metrics, /healthz, /readyz never contain either
// password.
func TestSecureEndToEnd(t *testing.T) {
	testenv.EachServer(t, testSecureEndToEnd)
}

func testSecureEndToEnd(t *testing.T, server testenv.Server) {
	s := testenv.KafkaSASL(t)
	db := server.NewDatabase(t)
	topic := testenv.NewTopic(t, 3)
	ch := server.Conn(t)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, name String) ENGINE = MergeTree ORDER BY id")
	const n = 3000
	produceJSON(t, topic, n, func(i int) string { return fmt.Sprintf(`{"id":%d,"name":"n%d"}`, i, i) })

	t.Setenv("SINK_KAFKA__SASL__PASSWORD", s.Password)
	path := writeConfig(t, secureYAML(s, server.Addr, topic, db, "events", writePasswordFile(t, testenv.CHPassword),
		"http: {listen: \"127.0.0.1:0\"}\nlog: {level: debug, format: json}\n"))

	code, checkOut, checkErr := sinkCmd(t, "check", "--config", path)
	if code != 0 || !strings.Contains(checkOut, "check: ok") {
		t.Fatalf("check: exit %d\nstdout:\n%s\nstderr:\n%s", code, checkOut, checkErr)
	}
	for _, want := range []string{
		"security: kafka TLS (CA " + s.CAFile + ", client certificate " + s.CertFile + `), SASL SCRAM-SHA-512 as "sink", password ******`,
		`security: clickhouse TLS off, user "sink_secure", password from `,
	} {
		if !strings.Contains(checkOut, want) {
			t.Errorf("check output lacks %q:\n%s", want, checkOut)
		}
	}

	r := startSink(t, path)
	waitRows(t, r, ch, db+".events", n)

	// The HTTP endpoints, while running.
	m := servingRE.FindStringSubmatch(r.stderr.String())
	if m == nil {
		t.Fatalf("no 'serving /metrics' log line with the address:\n%s", r.stderr.String())
	}
	bodies := map[string]string{}
	for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
		resp, err := http.Get("http://" + m[1] + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", p, resp.Status, b)
		}
		bodies[p] = string(b)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("sink run exited %d after SIGTERM; log:\n%s", code, r.stderr.String())
	}

	logs := r.stderr.String()
	if !strings.Contains(logs, `"level":"debug"`) {
		t.Fatalf("no debug lines in the log, so this test proves little:\n%s", logs)
	}
	outputs := map[string]string{
		"run log": logs + r.stdout.String(), "check stdout": checkOut, "check stderr": checkErr,
		"/metrics": bodies["/metrics"], "/healthz": bodies["/healthz"], "/readyz": bodies["/readyz"],
	}
	for name, out := range outputs {
		for _, pw := range []string{s.Password, testenv.CHPassword} {
			if strings.Contains(out, pw) {
				t.Errorf("%s contains the password %q:\n%s", name, pw, out)
			}
		}
	}
	t.Logf("%d records through SASL_SSL into %s.events; %d log lines (level debug), none with a password", n, db, strings.Count(logs, "\n"))
}

// TestWrongPassword: a refused password, for Kafka or ClickHouse, is one
// line on stderr naming the user and the address, and exit status 1, from
// both check and run; the line does not repeat the password.
func TestWrongPassword(t *testing.T) {
	testenv.EachServer(t, testWrongPassword)
}

func testWrongPassword(t *testing.T, server testenv.Server) {
	s := testenv.KafkaSASL(t)
	db := server.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	ch := server.Conn(t)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64) ENGINE = MergeTree ORDER BY id")
	const wrong = "not-the-password-1234"
	f := func(kafkaPW, chPW, want string) {
		t.Helper()
		t.Setenv("SINK_KAFKA__SASL__PASSWORD", kafkaPW)
		path := writeConfig(t, secureYAML(s, server.Addr, topic, db, "events", writePasswordFile(t, chPW), "http: {listen: \"\"}\n"))
		for _, cmd := range []string{"check", "run"} {
			code, _, errOut := sinkCmd(t, cmd, "--config", path)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(errOut, want) {
				t.Fatalf("sink %s: exit %d, stderr %q; want exit 1 and one line containing %q", cmd, code, errOut, want)
			}
			if strings.Contains(errOut, wrong) {
				t.Fatalf("sink %s repeats the password: %q", cmd, errOut)
			}
			t.Logf("sink %s: exit %d: %s", cmd, code, strings.TrimSpace(errOut))
		}
	}
	f(wrong, testenv.CHPassword, `kafka: SASL authentication failed for user "sink" at `+s.Brokers[0]+": ")
	f(s.Password, wrong, `clickhouse: authentication failed for user "sink_secure" at `+server.Addr+": ")
}

// TestBacktickTable: a route to a table whose name holds a backtick, quotes
// and SQL gets its rows, in that table; a table with a column the driver
// cannot name is refused at start with one clean line, and no INSERT.
func TestBacktickTable(t *testing.T) {
	testenv.EachServer(t, testBacktickTable)
}

func testBacktickTable(t *testing.T, s testenv.Server) {
	brokers := testenv.Kafka(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 2)
	ch := s.Conn(t)
	const table = "ev`ents\"; DROP TABLE victim; --'"
	testenv.Exec(t, ch,
		"CREATE TABLE "+db+".victim (id UInt64) ENGINE = MergeTree ORDER BY id",
		"CREATE TABLE "+chschema.QuoteIdent(db)+"."+chschema.QuoteIdent(table)+" (id UInt64, `na\"me` String) ENGINE = MergeTree ORDER BY id",
		"CREATE TABLE "+db+".badcol (id UInt64, `co\\`l` String) ENGINE = MergeTree ORDER BY id")
	const n = 500
	produceJSON(t, topic, n, func(i int) string { return fmt.Sprintf(`{"id":%d,"na\"me":"x%d"}`, i, i) })
	cfg := func(table string) string {
		return writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_latency: 400ms}
routes: [{topic: %q, table: %q}]
http: {listen: ""}
`, "bt-"+topic, brokers[0], topic, s.Addr, db, topic, table))
	}

	r := startSink(t, cfg(table))
	quoted := chschema.QuoteIdent(db) + "." + chschema.QuoteIdent(table)
	waitRows(t, r, ch, quoted, n)
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, r.stderr.String())
	}
	var filled uint64
	if err := ch.QueryRow(context.Background(), "SELECT countIf(`na\"me` = concat('x', toString(id))) FROM "+quoted).Scan(&filled); err != nil {
		t.Fatal(err)
	}
	if filled != n {
		t.Fatalf("%d of %d rows have the right `na\"me`", filled, n)
	}

	want := fmt.Sprintf(`routes[0]: clickhouse: table %s.badcol: column "co`+"`"+`l" cannot be inserted into by clickhouse-go's batch INSERT`, db)
	for _, cmd := range []string{"check", "run"} {
		code, _, errOut := sinkCmd(t, cmd, "--config", cfg("badcol"))
		if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, want) {
			t.Fatalf("sink %s with a backtick column: exit %d, stderr %q; want one line containing %q", cmd, code, errOut, want)
		}
	}

	var victims uint64
	if err := ch.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = ? AND name = 'victim'", db).Scan(&victims); err != nil || victims != 1 {
		t.Fatalf("table victim: %d, %v", victims, err)
	}
}

//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"sink/internal/testenv"
)

// A run that ends on an error (here a bad record with errors.tolerance
// none) prints that error as its last line, after the flush's log lines,
// and exits 1.
func TestRunEndsWithItsErrorAsTheLastLine(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id UInt64) ENGINE = MergeTree ORDER BY id")
		topic := testenv.NewTopic(t, 1)
		testenv.Produce(t, topic, `{"id": 1}`, `oops`)
		path := writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: t}]
http: {listen: ""}
`, testenv.UniqueName(t, "lastline"), testenv.Kafka(t)[0], topic, s.Addr, db, topic))
		code, _, errOut := sinkCmd(t, "run", "--config", path)
		last := lastLine(errOut)
		if code != 1 || !strings.HasPrefix(last, "sink: decode topic") || !strings.Contains(last, "offset 1") {
			t.Fatalf("exit %d, last line %q; want 1 and the bad record's error\n%s", code, last, errOut)
		}
		if !strings.Contains(errOut, "flushed and committed") {
			t.Fatalf("the flush before the stop is not logged:\n%s", errOut)
		}
	})
}

// A ClickHouse address at a port that does not speak the native protocol
// (ClickHouse's HTTP port, Kafka's port) fails soon after dial_timeout with a
// hint, not a bare i/o timeout.
func TestNonNativePortHint(t *testing.T) {
	kafka := testenv.Kafka(t)[0]
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		// ClickHouse's own HTTP port is recognised and named; anything else
		// that does not answer in the native protocol gets the question.
		for addr, hint := range map[string]string{
			s.HTTPAddr: "this is the HTTP port of ClickHouse " + s.Version + "; set clickhouse.protocol: http",
			kafka:      "is this ClickHouse's native port?",
		} {
			path := writeConfig(t, fmt.Sprintf(`
name: port
kafka: {brokers: [%q], topics: [x]}
clickhouse: {addrs: [%q], dial_timeout: 2s}
routes: [{topic: x, table: t}]
http: {listen: ""}
`, kafka, addr))
			start := time.Now()
			code, _, errOut := sinkCmd(t, "run", "--config", path)
			took := time.Since(start)
			if code != 1 || !strings.Contains(errOut, hint) || took > 5*time.Second {
				t.Fatalf("clickhouse at %s: exit %d after %s, stderr %q; want %q within the 2s dial_timeout", addr, code, took, errOut, hint)
			}
		}
	})
}

func TestReportMissingTable(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		db := s.NewDatabase(t)
		code, _, errOut := sinkCmd(t, "report", "--clickhouse", s.Addr, "--table", db+".nope")
		if code != 1 || !strings.Contains(errOut, "table "+db+".nope does not exist") {
			t.Fatalf("exit %d, stderr %q; want 1 saying the table does not exist", code, errOut)
		}
	})
}

// sink check verifies the dead-letter topic: a missing one fails with one
// line, an existing one is described with its max.message.bytes.
func TestCheckVerifiesTheDLQ(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		db := s.NewDatabase(t)
		ch := s.Conn(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id UInt64) ENGINE = MergeTree ORDER BY id")
		topic := testenv.NewTopic(t, 2)
		dlq := testenv.UniqueName(t, "check_dlq")
		conf := func(dlqTopic string) string {
			return writeConfig(t, fmt.Sprintf(`
name: checkdlq
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: t}]
errors: {tolerance: all, dlq_topic: %q}
http: {listen: ""}
`, testenv.Kafka(t)[0], topic, s.Addr, db, topic, dlqTopic))
		}
		code, _, errOut := sinkCmd(t, "check", "--config", conf(dlq))
		if want := fmt.Sprintf("sink check: kafka: dead-letter topic %q (errors.dlq_topic) does not exist; create it, or set errors.dlq_create: true\n", dlq); code != 1 || errOut != want {
			t.Fatalf("missing DLQ: exit %d, stderr %q; want 1 and %q", code, errOut, want)
		}
		existing := testenv.NewTopic(t, 1)
		code, out, errOut := sinkCmd(t, "check", "--config", conf(existing))
		if code != 0 || !strings.Contains(out, "kafka: dead-letter topic "+existing+": 1 partitions, max.message.bytes ") {
			t.Fatalf("existing DLQ: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
	})
}

// A run whose shutdown fails (here shutdown_timeout passes while an INSERT
// is being retried: readonly=1 makes every INSERT fail with the retriable
// READONLY) exits 1 with the pipeline's error as the last line, not 0.
func TestRunShutdownTimeoutExitsOne(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id UInt64) ENGINE = MergeTree ORDER BY id")
		topic := testenv.NewTopic(t, 1)
		produceJSON(t, topic, 10, func(i int) string { return fmt.Sprintf(`{"id": %d}`, i) })
		path := writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s, settings: {readonly: 1}, retry_initial: 100ms}
batch: {max_wait: 200ms}
routes: [{topic: %q, table: t}]
shutdown_timeout: 1s
http: {listen: ""}
`, testenv.UniqueName(t, "stuck"), testenv.Kafka(t)[0], topic, s.Addr, db, topic))
		r := startSink(t, path)
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(r.stderr.String(), "insert failed, retrying the same block") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond) // until an INSERT has failed with READONLY
		}
		code := r.stop(t)
		last := lastLine(r.stderr.String())
		if code != 1 || !strings.HasPrefix(last, "sink: shutdown_timeout (1s) passed with 1 batches not inserted") {
			t.Fatalf("exit %d, last line %q; want 1 and the shutdown timeout\n%s", code, last, r.stderr.String())
		}
	})
}

// SIGTERM while an INSERT is on the server (a materialized view sleeps in
// it) and shutdown_timeout shorter than that INSERT: the process cancels the
// INSERT, waits for its goroutine before it closes the ClickHouse pool, and
// exits 1 naming the timeout, within the timeout plus the bounded join; it
// never reports calls left running under a closed pool, and commits nothing.
func TestRunSIGTERMDuringSlowInsert(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id UInt64) ENGINE = MergeTree ORDER BY id")
		testenv.Exec(t, ch, "CREATE TABLE "+db+".slow (id UInt64) ENGINE = MergeTree ORDER BY id")
		testenv.Exec(t, ch, "CREATE MATERIALIZED VIEW "+db+".mv TO "+db+".slow AS SELECT id FROM "+db+".t WHERE sleep(3) = 0")
		topic := testenv.NewTopic(t, 1)
		produceJSON(t, topic, 20, func(i int) string { return fmt.Sprintf(`{"id": %d}`, i) })
		group := testenv.UniqueName(t, "term")
		path := writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_wait: 200ms}
routes: [{topic: %q, table: t}]
shutdown_timeout: 500ms
http: {listen: ""}
`, group, testenv.Kafka(t)[0], topic, s.Addr, db, topic))
		r := startSink(t, path)
		inserting := func() bool {
			var n uint64
			q := "SELECT count() FROM system.processes WHERE query LIKE 'INSERT INTO%' AND query LIKE '%" + db + "%'"
			if err := ch.QueryRow(t.Context(), q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}
		deadline := time.Now().Add(30 * time.Second)
		for !inserting() {
			if time.Now().After(deadline) {
				t.Fatalf("no INSERT on the server within 30s; log:\n%s", r.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		began := time.Now()
		code := r.stop(t)
		took := time.Since(began)
		log := r.stderr.String()
		last := lastLine(log)
		if code != 1 || !strings.HasPrefix(last, "sink: shutdown_timeout (500ms) passed") {
			t.Fatalf("exit %d, last line %q; want 1 and the shutdown timeout\n%s", code, last, log)
		}
		if strings.Contains(log, "still running") || strings.Contains(log, "panic") {
			t.Fatalf("a ClickHouse call outlived the run:\n%s", log)
		}
		// shutdown_timeout, then at most the bounded join of the canceled INSERT.
		if took > 10*time.Second {
			t.Fatalf("exit %s after SIGTERM; want within shutdown_timeout and the bounded join", took)
		}
		offs, err := kadm.NewClient(testenv.KafkaClient(t)).FetchOffsets(t.Context(), group)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup(topic, 0); ok && o.At > 0 {
			t.Fatalf("committed offset %d after the cut-off INSERT; want none", o.At)
		}
		t.Logf("exit %d %s after SIGTERM during the INSERT: %s", code, took.Round(time.Millisecond), last)
	})
}

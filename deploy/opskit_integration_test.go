//go:build integration

package deploy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// TestKitNamesExposed runs the real sink binary on the real stack, on each
// ClickHouse server, makes inserts fail and be retried (the connection to
// ClickHouse is cut for a moment: code 0) and one record go to the DLQ, scrapes /metrics when every row is in, and checks that every
// metric the dashboard and the rules name is among the scraped series. The
// sink runs with batch.mode adaptive (a 500ms wait), which serves every
// series fixed mode does plus the controller's inputs (parts, rate, reason).
func TestKitNamesExposed(t *testing.T) {
	exprs := kitExpressions(t)
	brokers := testenv.Kafka(t)
	bin := filepath.Join(t.TempDir(), "sink")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sink")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sink: %v\n%s", err, out)
	}
	const n = 3000
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		// A topic per server: the run adds records to it.
		topic := testenv.NewTopic(t, 3)
		produce(t, topic, 0, n, true)
		scraped := runAndScrape(t, s, bin, brokers[0], topic, n)
		var missing []string
		for expr, where := range exprs {
			for _, name := range metricNames(expr) {
				if !scraped[name] {
					missing = append(missing, fmt.Sprintf("%s (%s)", name, where))
				}
			}
		}
		sort.Strings(missing)
		for _, m := range missing {
			t.Errorf("not served on /metrics after a real run: %s", m)
		}
	})
}

// produce writes records [from, to) as JSON rows, round robin over the
// partitions, and with bad, one record that is not JSON.
func produce(t *testing.T, topic string, from, to int, bad bool) {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, `{"id":%d,"v":"r%d"}`, i, i)})
	}
	if bad {
		recs = append(recs, &kgo.Record{Value: []byte(`{"id": not json`)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func runAndScrape(t *testing.T, s testenv.Server, bin, broker, topic string, n int) map[string]bool {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	ctx := context.Background()
	if err := ch.Exec(ctx, "CREATE TABLE "+db+".events (id UInt64, v String) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, s.Addr)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "sink.yaml")
	cfg := fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 100ms, retry_max: 200ms}
batch: {mode: adaptive, target_inserts_per_minute: 120, max_latency: 2s}
routes: [{topic: %q, table: events}]
errors: {tolerance: all, dlq_topic: %q}
http: {listen: %q}
shutdown_timeout: 20s
`, testenv.UniqueName(t, "kit"), broker, topic, proxy.Addr, db, topic, testenv.NewTopic(t, 1), addr)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "sink.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--config", cfgFile)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("sink log:\n%s", log)
		}
	}()
	count := func() int {
		var c uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM "+db+".events").Scan(&c); err != nil {
			t.Fatal(err)
		}
		return int(c)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !cond() {
			select {
			case err := <-exited:
				stopped = true
				t.Fatalf("sink exited while waiting for %s: %v", what, err)
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (the table has %d rows; -1: none readable)", what, count())
			}
		}
	}
	waitFor(fmt.Sprintf("%d rows", n), func() bool { return count() == n })

	// Retried inserts: ClickHouse is cut off while the next batch is written.
	proxy.Cut()
	produce(t, topic, n, n+100, false)
	waitFor("a retried insert", func() bool {
		body, err := get("http://" + addr + "/metrics")
		return err == nil && strings.Contains(body, `sink_insert_retries_total{code="0"`)
	})
	proxy.Restore()
	waitFor(fmt.Sprintf("%d rows", n+100), func() bool { return count() == n+100 })

	body, err := get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("sink after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("sink did not exit within 30s of SIGTERM")
	}
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		names[regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`).FindString(line)] = true
	}
	t.Logf("%d metric names served", len(names))
	return names
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

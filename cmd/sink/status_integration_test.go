//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/status"
	"sink/internal/testenv"
)

// TestStatusPauseResumeAndPage runs `sink run` on the stack with
// http.admin on a loopback listener, on both servers:
//
//   - GET /status reports the table's rows and inserts and each partition's
//     committed offset and lag, matching ClickHouse and Kafka;
//   - headless Chromium renders the status page at / from the running sink,
//     and the rendered DOM shows the same table and numbers as /status; a
//     screenshot is kept (artifactDir);
//   - POST /pause flushes and commits, then inserts nothing while records
//     arrive, for longer than the session timeout, and the sink stays the
//     same member of its group (same member id: no rejoin, no rebalance);
//   - POST /resume inserts what arrived meanwhile; SIGTERM exits 0.
func TestStatusPauseResumeAndPage(t *testing.T) {
	broker := testenv.Kafka(t)[0]
	chromium := testenv.Tool(t, "chromium")
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		testStatusPauseResumeAndPage(t, s, broker, chromium)
	})
}

func testStatusPauseResumeAndPage(t *testing.T, s testenv.Server, broker, chromium string) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 2)
	table := db + ".events"
	testenv.Exec(t, ch, "CREATE TABLE "+table+" (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	const first, later = 500, 60
	produceSpread(t, topic, first, func(i int) string { return fmt.Sprintf(`{"id":%d,"s":"row %d"}`, i, i) })

	addr := freeAddr(t)
	name := testenv.UniqueName(t, "status")
	path := writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms, session_timeout: 6s}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 100, max_wait: 500ms}
routes: [{topic: %q, table: events}]
http: {listen: %q, admin: true}
log: {level: info}
`, name, broker, topic, s.Addr, db, topic, addr))
	if code, out, errOut := sinkCmd(t, "check", "--config", path); code != 0 ||
		!strings.Contains(out, "security: http "+addr+", pause/resume endpoints on, loopback only, no token\n") {
		t.Fatalf("sink check: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	r := startSink(t, path)
	waitRows(t, r, ch, table, first)
	base := "http://" + addr

	// /status: once the last commit is in, the numbers are those of ClickHouse and Kafka.
	rep := waitStatus(t, base, "every partition committed to its end", func(rep status.Report) bool {
		var committed int64
		for _, p := range rep.Partitions {
			if p.Committed != nil {
				committed += *p.Committed
			}
		}
		return rep.Connector.State == status.Running && committed == first && len(rep.Tables) == 1 && rep.Tables[0].Rows15m == first
	})
	tb := rep.Tables[0]
	if rep.Name != name || rep.Type != "sink" || rep.Delivery != "at_least_once" || tb.Table != table ||
		tb.Inserts15m < 5 || tb.Inserts15m > first || tb.LastInsert == nil || tb.Target.Rows != 100 || tb.Target.Mode != "fixed" {
		t.Fatalf("status: %+v\ntable %+v; want %s with %d rows in 5+ inserts of at most 100", rep, tb, table, first)
	}
	if len(rep.Partitions) != 2 {
		t.Fatalf("partitions %+v; want both of %s", rep.Partitions, topic)
	}
	for _, p := range rep.Partitions {
		if p.LogEnd == nil || p.Committed == nil || *p.LogEnd != *p.Committed || p.LagRecords == nil || *p.LagRecords != 0 ||
			p.LagSeconds == nil || *p.LagSeconds != 0 || p.Backpressure {
			t.Fatalf("partition %+v; want committed = log end, no lag, no backpressure", p)
		}
	}
	if last := tb.History.RowsPerMin[len(tb.History.RowsPerMin)-1]; last != first {
		t.Fatalf("the chart's last point: %d rows/min, want %d (all inserted within the minute)", last, first)
	}

	checkPage(t, chromium, base, s.Name(), rep)

	// Pause: flushed and committed first, then nothing more is inserted.
	group := groupMember(t, name)
	if code, body := post(t, base+"/pause"); code != http.StatusAccepted {
		t.Fatalf("POST /pause: %d %s", code, body)
	}
	waitStatus(t, base, "PAUSED", func(rep status.Report) bool { return rep.Connector.State == status.Paused })
	produceSpread(t, topic, later, func(i int) string { return fmt.Sprintf(`{"id":%d,"s":"later"}`, first+i) })
	// Longer than the 6 s session timeout: a member that stopped
	// heartbeating would be expelled and rejoin with a new member id.
	time.Sleep(8 * time.Second)
	if n := count(t, ch, table); n != first {
		t.Fatalf("%d rows while paused, want still %d", n, first)
	}
	// The positions probe (every 5 s) shows the log ends and the lag
	// growing while nothing is fetched.
	rep = waitStatus(t, base, "PAUSED with the new records as lag", func(rep status.Report) bool {
		var lag, end int64
		for _, p := range rep.Partitions {
			if p.LagRecords != nil && p.LogEnd != nil {
				lag, end = lag+*p.LagRecords, end+*p.LogEnd
			}
		}
		return rep.Connector.State == status.Paused && lag == later && end == first+later
	})
	screenshot(t, chromium, base, s.Name()+"-paused")
	if got := groupMember(t, name); got != group {
		t.Fatalf("group member %q after the pause, was %q: the paused sink left or rejoined the group", got, group)
	}
	if len(rep.Partitions) != 2 {
		t.Fatalf("partitions while paused: %+v; want both still assigned", rep.Partitions)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, `sink_connector_state{state="PAUSED"} 1`) {
		t.Fatalf("/metrics while paused: %d, no sink_connector_state{state=\"PAUSED\"} 1", code)
	}

	if code, body := post(t, base+"/resume"); code != http.StatusAccepted || !strings.Contains(body, `"RUNNING"`) {
		t.Fatalf("POST /resume: %d %s", code, body)
	}
	waitRows(t, r, ch, table, first+later)
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; log:\n%s", code, r.stderr.String())
	}
	if log := r.stderr.String(); !strings.Contains(log, "paused: every batch inserted and committed") || !strings.Contains(log, "resumed") {
		t.Fatalf("log lacks the pause and resume lines:\n%s", log)
	}
}

// checkPage renders the status page in headless Chromium and compares its
// DOM with rep; it keeps a screenshot under artifactDir.
func checkPage(t *testing.T, chromium, base, label string, rep status.Report) {
	t.Helper()
	dom := runChromium(t, chromium, base+"/", "--dump-dom")
	if !strings.Contains(dom, `data-loaded="true"`) {
		t.Fatalf("the page did not render /status:\n%s", dom)
	}
	tb := rep.Tables[0]
	sec := between(t, dom, `<section class="card" data-table="`+tb.Table+`">`, "</section>")
	if !strings.Contains(sec, "<h2>"+tb.Table+"</h2>") {
		t.Fatalf("table section without its name:\n%s", sec)
	}
	for key, want := range map[string]int64{"rows_15m": tb.Rows15m, "inserts_15m": tb.Inserts15m, "open_batches": 0, "in_flight_batches": 0} {
		if got := domNumber(t, sec, key); got != want {
			t.Errorf("page %s = %d, /status %d", key, got, want)
		}
	}
	if !strings.Contains(sec, `data-series="rows_per_min"`) || !strings.Contains(sec, "<polyline") {
		t.Errorf("no rows/min chart in the table section:\n%s", sec)
	}
	if !strings.Contains(dom, `data-state="RUNNING"`) {
		t.Errorf("page state is not RUNNING")
	}
	for _, p := range rep.Partitions {
		row := between(t, dom, fmt.Sprintf(`<tr data-partition="%s/%d">`, p.Topic, p.Partition), "</tr>")
		for key, want := range map[string]int64{"committed_offset": *p.Committed, "log_end_offset": *p.LogEnd, "lag_records": *p.LagRecords} {
			if got := domNumber(t, row, key); got != want {
				t.Errorf("page %s[%d] %s = %d, /status %d", p.Topic, p.Partition, key, got, want)
			}
		}
	}
	screenshot(t, chromium, base, label)
}

// screenshot keeps a screenshot of the status page under artifactDir.
func screenshot(t *testing.T, chromium, base, label string) string {
	t.Helper()
	shot := filepath.Join(artifactDir(t), "status-page-"+label+".png")
	runChromium(t, chromium, base+"/", "--screenshot="+shot, "--window-size=1280,900")
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (size %v)", shot, err, fi)
	}
	t.Logf("status page screenshot: %s", shot)
	return shot
}

// runChromium loads url in headless Chromium, letting the page's script
// fetch /status and render (a virtual time budget), and returns stdout.
func runChromium(t *testing.T, chromium, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := []string{"--headless", "--disable-gpu", "--no-first-run", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=6000"}
	if os.Geteuid() == 0 {
		all = append(all, "--no-sandbox") // Chromium refuses to run as root with its sandbox
	}
	all = append(append(all, args...), url)
	cmd := exec.CommandContext(ctx, chromium, all...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// artifactDir is where test artefacts are kept: $SINK_TEST_ARTIFACTS, or
// .stack/artifacts in the checkout.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SINK_TEST_ARTIFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0) // cmd/sink/status_integration_test.go
		dir = filepath.Join(filepath.Dir(file), "..", "..", ".stack", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// between is the part of s from the first start to the next end.
func between(t *testing.T, s, start, end string) string {
	t.Helper()
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("rendered DOM lacks %s", start)
	}
	j := strings.Index(s[i:], end)
	if j < 0 {
		t.Fatalf("rendered DOM: no %s after %s", end, start)
	}
	return s[i : i+j]
}

// domNumber reads the value the page rendered for key: its raw data-v and
// its displayed text (thousands separated), which must agree.
func domNumber(t *testing.T, html, key string) int64 {
	t.Helper()
	m := regexp.MustCompile(`<b data-k="` + key + `" data-v="(-?\d+)">([^<]*)</b>`).FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no number %s in:\n%s", key, html)
	}
	v, _ := strconv.ParseInt(m[1], 10, 64)
	if shown := strings.ReplaceAll(m[2], ",", ""); shown != m[1] {
		t.Fatalf("%s shows %q but holds %s", key, m[2], m[1])
	}
	return v
}

func waitStatus(t *testing.T, base, what string, ok func(status.Report) bool) status.Report {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var rep status.Report
	for {
		code, body := get(t, base+"/status")
		if code != http.StatusOK {
			t.Fatalf("GET /status: %d %s", code, body)
		}
		rep = status.Report{}
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			t.Fatalf("GET /status: %v\n%s", err, body)
		}
		if ok(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("/status not %s after 30s:\n%s", what, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string)  { return testenv.HTTP(t, http.MethodGet, url) }
func post(t *testing.T, url string) (int, string) { return testenv.HTTP(t, http.MethodPost, url) }

// groupMember is the member id of group's only member (fails unless the
// group is Stable with exactly one).
func groupMember(t *testing.T, group string) string {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	g := gs[group]
	if g.Err != nil || g.State != "Stable" || len(g.Members) != 1 {
		t.Fatalf("group %s: state %q, %d members, err %v; want Stable with 1", group, g.State, len(g.Members), g.Err)
	}
	return g.Members[0].MemberID
}

// count is table's row count.
func count(t *testing.T, ch driver.Conn, table string) uint64 {
	t.Helper()
	var n uint64
	if err := ch.QueryRow(context.Background(), "SELECT count() FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// produceSpread produces rec(0) … rec(n-1) to topic, round robin over its
// partitions.
func produceSpread(t *testing.T, topic string, n int, rec func(i int) string) {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = kgo.StringRecord(rec(i))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

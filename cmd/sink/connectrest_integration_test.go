//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"sink/internal/status"
	"sink/internal/testenv"
)

// restCall sends one request to url and returns the status and the body.
func restCall(t *testing.T, method, url, ctype, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// connectRetry sends a request to the Connect worker, again while it
// answers 409 (it rebalances whenever a connector comes or goes, another
// test's too), and fails the test unless it answers want.
func connectRetry(t *testing.T, method, url, body string, want int) []byte {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, b := restCall(t, method, url, "application/json", body)
		if code == want {
			return b
		}
		if code != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("%s %s: %d %s; want %d", method, url, code, b, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// fileSink registers a FileStreamSinkConnector named name on the worker at
// base, reading topic into a file, and deletes it when the test ends.
func fileSink(t *testing.T, base, name, topic string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.txt")
	body, _ := json.Marshal(map[string]any{"name": name, "config": map[string]string{
		"connector.class": testenv.FileSinkClass, "tasks.max": "1", "topics": topic, "file": out,
		"key.converter":   "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "org.apache.kafka.connect.storage.StringConverter",
	}})
	connectRetry(t, http.MethodPost, base+"/connectors", string(body), http.StatusCreated)
	t.Cleanup(func() {
		code, b := restCall(t, http.MethodDelete, base+"/connectors/"+name, "", "")
		if code != http.StatusNoContent && code != http.StatusNotFound {
			t.Logf("deleting connector %s: %d %s", name, code, b)
		}
	})
}

// connectorState is the state /status gives and its tasks' states.
type connectorState struct {
	Connector struct{ State string }   `json:"connector"`
	Tasks     []struct{ State string } `json:"tasks"`
}

// settled reports whether st is want for the connector and every task:
// RUNNING with at least one task, STOPPED with none.
func (st connectorState) settled(want string) bool {
	if st.Connector.State != want || (want == "STOPPED") != (len(st.Tasks) == 0) {
		return false
	}
	for _, tk := range st.Tasks {
		if tk.State != want {
			return false
		}
	}
	return true
}

// waitSettled polls base's status of name until it is want (settled),
// and, for STOPPED, until group has no member left.
func waitSettled(t *testing.T, base, name, want, group string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, b := restCall(t, http.MethodGet, base+"/connectors/"+name+"/status", "", "")
		var st connectorState
		if code == http.StatusOK && json.Unmarshal(b, &st) == nil && st.settled(want) && (want != "STOPPED" || groupEmpty(t, group)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/connectors/%s: not %s after 90s: %d %s", base, name, want, code, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// groupEmpty reports whether group has no active member.
func groupEmpty(t *testing.T, group string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := kadm.NewClient(testenv.KafkaClient(t)).DescribeGroups(ctx, group)
	if err != nil {
		return false
	}
	return len(gs[group].Members) == 0
}

// waitOffsets polls base's offsets of name until they list n partitions.
func waitOffsets(t *testing.T, base, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, b := restCall(t, http.MethodGet, base+"/connectors/"+name+"/offsets", "", "")
		var got struct{ Offsets []any }
		if code == http.StatusOK && json.Unmarshal(b, &got) == nil && len(got.Offsets) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/connectors/%s/offsets: not %d partitions after 90s: %d %s", base, name, n, code, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// restStep is one request of the sequence both are sent; after it, the
// test waits until the connector is settled in wait's state ("": no wait).
type restStep struct {
	name, method, path, ctype, body string
	wait                            string
	// free are the paths of objects whose keys are a config's (they
	// differ; every value is a string); pick takes the value at that key
	// of the answer instead of the whole (GET /connectors?expand= lists
	// every connector of the worker).
	free []string
	pick string
}

// restAnswer is one step's answer: its status, and its JSON body (nil
// when empty).
type restAnswer struct {
	code int
	body any
	raw  string
}

// runSteps sends the steps to base for connector name (PATH's %s) and
// returns the answers; group is the connector's consumer group.
func runSteps(t *testing.T, base, name, group string, steps []restStep) []restAnswer {
	t.Helper()
	out := make([]restAnswer, len(steps))
	for i, s := range steps {
		path := strings.ReplaceAll(s.path, "NAME", name)
		code, b := restCall(t, s.method, base+path, s.ctype, strings.ReplaceAll(s.body, "NAME", name))
		a := restAnswer{code: code, raw: string(b)}
		if len(bytes.TrimSpace(b)) > 0 {
			if err := json.Unmarshal(b, &a.body); err != nil {
				t.Fatalf("%s: %s %s answered %d with a body that is not JSON: %s", s.name, s.method, path, code, b)
			}
		}
		if s.pick != "" {
			a.body = a.body.(map[string]any)[strings.ReplaceAll(s.pick, "NAME", name)]
		}
		out[i] = a
		t.Logf("%s: %s %s -> %d %s", base, s.method, path, code, short(b))
		if s.wait != "" {
			waitSettled(t, base, name, s.wait, group)
		}
	}
	return out
}

// short is a JSON body on one line, cut at 300 bytes, for the log.
func short(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		buf.Reset()
		buf.Write(bytes.TrimSpace(b))
	}
	if buf.Len() > 300 {
		return buf.String()[:300] + "…"
	}
	return buf.String()
}

// shapeDiff lists where the sink's JSON value s differs in shape from
// Connect's c: every key Connect gives is there with a value of the same
// JSON type (the sink may add keys of its own), arrays' elements alike
// when both have some, and at a free path (a config) any keys, each
// value a string.
func shapeDiff(path string, c, s any, free map[string]bool) []string {
	if fmt.Sprintf("%T", c) != fmt.Sprintf("%T", s) {
		return []string{fmt.Sprintf("%s: Connect gives %T (%v), the sink %T (%v)", path, c, c, s, s)}
	}
	switch c := c.(type) {
	case map[string]any:
		s := s.(map[string]any)
		if free[path] {
			return stringValues(path, c, s)
		}
		var out []string
		for k, v := range c {
			sv, ok := s[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: Connect gives it, the sink does not", path, k))
				continue
			}
			out = append(out, shapeDiff(path+"."+k, v, sv, free)...)
		}
		return out
	case []any:
		s := s.([]any)
		if len(c) > 0 && len(s) > 0 {
			return shapeDiff(path+"[]", c[0], s[0], free)
		}
	}
	return nil
}

// stringValues lists the values of c and s that are not strings.
func stringValues(path string, c, s map[string]any) []string {
	var out []string
	for _, m := range []map[string]any{c, s} {
		for k, v := range m {
			if _, ok := v.(string); !ok {
				out = append(out, fmt.Sprintf("%s.%s: %T, want a string", path, k, v))
			}
		}
	}
	return out
}

// TestConnectRESTDifferential sends the same sequence of requests (status,
// offsets changed while running, stop, status, info, tasks, config,
// offsets, patch, delete, the refusals of a bad PATCH, resume, status) to
// a FileStreamSinkConnector on the stack's Kafka Connect 4.3 worker and to
// `sink run` on the same topic, on each ClickHouse server: every answer
// has the same status and Connect's keys with values of the same JSON
// types. Then the sink's table holds what the offsets say: every record
// once from the first run, and again after DELETE moved the offsets to
// the log start (at_least_once).
func TestConnectRESTDifferential(t *testing.T) {
	worker := testenv.ConnectFileSink(t)
	broker := testenv.Kafka(t)[0]
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		testConnectRESTDifferential(t, s, worker, broker)
	})
}

func testConnectRESTDifferential(t *testing.T, s testenv.Server, worker, broker string) {
	const records = 40
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 2)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, _topic String, _partition Int32, _offset Int64) ENGINE = MergeTree ORDER BY (_partition, _offset)")
	produceSpread(t, topic, records, func(i int) string { return fmt.Sprintf(`{"id":%d}`, i) })

	name := testenv.UniqueName(t, "rest")
	fileSink(t, worker, name, topic)
	waitSettled(t, worker, name, "RUNNING", "")
	waitOffsets(t, worker, name, 2)

	addr := freeAddr(t)
	path := writeConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 10, max_latency: 500ms}
routes: [{topic: %q, table: events}]
http: {listen: %q, admin: true}
`, name, broker, topic, s.Addr, db, topic, addr))
	r := startSink(t, path)
	waitRows(t, r, ch, db+".events", records)
	sinkBase := "http://" + addr
	waitOffsets(t, sinkBase, name, 2)

	const js = "application/json"
	patch := `{"offsets":[{"partition":{"kafka_topic":"` + topic + `","kafka_partition":0},"offset":{"kafka_offset":1}},` +
		`{"partition":{"kafka_topic":"` + topic + `","kafka_partition":1},"offset":null}]}`
	badOffset := `{"offsets":[{"partition":{"kafka_topic":"` + topic + `","kafka_partition":0},"offset":{"kafka_offset":"abc"}}]}`
	steps := []restStep{
		{name: "status", method: "GET", path: "/connectors/NAME/status"},
		{name: "patch while running", method: "PATCH", path: "/connectors/NAME/offsets", ctype: js, body: patch},
		{name: "delete while running", method: "DELETE", path: "/connectors/NAME/offsets"},
		{name: "stop", method: "PUT", path: "/connectors/NAME/stop", wait: "STOPPED"},
		{name: "status stopped", method: "GET", path: "/connectors/NAME/status"},
		{name: "info stopped", method: "GET", path: "/connectors/NAME", free: []string{".config"}},
		{name: "tasks stopped", method: "GET", path: "/connectors/NAME/tasks"},
		{name: "config", method: "GET", path: "/connectors/NAME/config", free: []string{""}},
		{name: "offsets", method: "GET", path: "/connectors/NAME/offsets"},
		{name: "patch", method: "PATCH", path: "/connectors/NAME/offsets", ctype: js, body: patch},
		{name: "offsets patched", method: "GET", path: "/connectors/NAME/offsets"},
		{name: "patch nothing", method: "PATCH", path: "/connectors/NAME/offsets", ctype: js, body: `{"offsets":[]}`},
		{name: "patch a bad offset", method: "PATCH", path: "/connectors/NAME/offsets", ctype: js, body: badOffset},
		{name: "patch not JSON", method: "PATCH", path: "/connectors/NAME/offsets", ctype: "text/plain", body: patch},
		{name: "offsets with POST", method: "POST", path: "/connectors/NAME/offsets", ctype: js, body: patch},
		{name: "delete", method: "DELETE", path: "/connectors/NAME/offsets"},
		{name: "offsets deleted", method: "GET", path: "/connectors/NAME/offsets"},
		{name: "resume", method: "PUT", path: "/connectors/NAME/resume", wait: "RUNNING"},
		{name: "status running", method: "GET", path: "/connectors/NAME/status"},
		{name: "info running", method: "GET", path: "/connectors/NAME", free: []string{".config"}},
		{name: "tasks running", method: "GET", path: "/connectors/NAME/tasks", free: []string{"[].config"}},
		{name: "list", method: "GET", path: "/connectors"},
		{name: "list expanded", method: "GET", path: "/connectors?expand=status&expand=info", pick: "NAME", free: []string{".info.config"}},
		{name: "another connector's offsets", method: "GET", path: "/connectors/NAME-none/offsets"},
	}
	connect := runSteps(t, worker, name, "connect-"+name, steps)
	sink := runSteps(t, sinkBase, name, name, steps)
	for i, st := range steps {
		c, s := connect[i], sink[i]
		if c.code != s.code {
			t.Errorf("%s: Connect answers %d %s, the sink %d %s", st.name, c.code, c.raw, s.code, s.raw)
			continue
		}
		if c.body == nil {
			if s.body != nil && c.code != http.StatusAccepted {
				t.Errorf("%s: Connect answers %d with no body, the sink with %s", st.name, c.code, s.raw)
			}
			continue
		}
		free := map[string]bool{}
		for _, p := range st.free {
			free[p] = true
		}
		for _, d := range shapeDiff("", c.body, s.body, free) {
			t.Errorf("%s: %s", st.name, d)
		}
	}
	for _, a := range []restAnswer{connect[4], sink[4]} {
		if tasks, ok := a.body.(map[string]any)["tasks"].([]any); !ok || len(tasks) != 0 {
			t.Fatalf("the stopped status has tasks: %s", a.raw)
		}
	}
	// The sink moved its offsets as asked: DELETE put them at the log
	// start, so after the resume every record is in the table twice.
	waitRows(t, r, ch, db+".events", 2*records)
	var rows, distinct uint64
	if err := ch.QueryRow(context.Background(), "SELECT count(), uniqExact(_partition, _offset) FROM "+db+".events").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != 2*records || distinct != records {
		t.Fatalf("after DELETE and resume: %d rows of %d offsets; want %d of %d", rows, distinct, 2*records, records)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("sink exit %d after SIGTERM; log:\n%s", code, r.stderr.String())
	}
}

// TestRESTOffsetsExactlyOnceOn26: under exactly_once, a stop through the
// REST API flushes, commits and leaves the group with the process up;
// records produced while stopped wait; a PATCH back to an earlier offset
// (and a null one: the partition's start) resets the exactly-once state
// as `sink offsets reset --reload` does (the rows from there deleted, the
// table's tokens forgotten); after the resume every offset is in the
// table exactly once. A DELETE and a second resume load everything again,
// once. While stopped, the state metric says STOPPED and /readyz 503. The
// admin token guards the changes on a listener that has one.
func TestRESTOffsetsExactlyOnceOn26(t *testing.T) {
	s := testenv.Server26(t)
	f := newOffsetsFixture(t, s, "exactly_once")
	addr := freeAddr(t)
	const token = "rest-offsets-token-0123456789"
	t.Setenv("SINK_HTTP__ADMIN_TOKEN", token)
	path := strings.Replace(readFile(t, f.path), `http: {listen: ""}`, fmt.Sprintf("http: {listen: %q, admin: true}", addr), 1)
	f.path = writeConfig(t, path)
	r := startSink(t, f.path)
	waitRows(t, r, f.ch, f.table, 400)
	base := "http://" + addr + "/connectors/" + f.group
	admin := func(method, url, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := restCall(t, "PUT", base+"/stop", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("stop without the token: %d %s; want 401", code, body)
	}
	if code, body := admin("PUT", base+"/stop", ""); code != http.StatusNoContent {
		t.Fatalf("stop: %d %s; want 204", code, body)
	}
	rep := waitStatus(t, "http://"+addr, "STOPPED", func(rep status.Report) bool { return rep.Connector.State == status.Stopped })
	if len(rep.Tasks) != 0 || !groupEmpty(t, f.group) {
		t.Fatalf("stopped: tasks %+v, group empty %v; want no task and no member", rep.Tasks, groupEmpty(t, f.group))
	}
	if code, body := get(t, "http://"+addr+"/metrics"); code != 200 || !strings.Contains(body, `sink_connector_state{state="STOPPED"} 1`) {
		t.Fatalf("/metrics while stopped: %d, no sink_connector_state{state=\"STOPPED\"} 1", code)
	}
	if code, _ := get(t, "http://"+addr+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while stopped: %d; want 503 (no partitions)", code)
	}
	for p := int32(0); p < 2; p++ {
		if o, md := f.committed(t, p); o != 200 || !strings.HasPrefix(md, "sink-eo1 @200 ") {
			t.Fatalf("partition %d committed at %d with %q after the stop; want 200 with a ledger", p, o, md)
		}
	}
	produceSpread(t, f.topic, 100, func(i int) string { return fmt.Sprintf(`{"id":%d}`, 400+i) })
	time.Sleep(2 * time.Second)
	f.want(t, 400, 400) // nothing is consumed while stopped

	patch := `{"offsets":[{"partition":{"kafka_topic":"` + f.topic + `","kafka_partition":0},"offset":{"kafka_offset":120}},` +
		`{"partition":{"kafka_topic":"` + f.topic + `","kafka_partition":1},"offset":null}]}`
	if code, body := admin("PATCH", base+"/offsets", patch); code != http.StatusOK {
		t.Fatalf("PATCH: %d %s", code, body)
	}
	// --reload's work: the rows from the new offsets on are gone (80 of
	// partition 0, all 200 of partition 1), each ledger has nothing pending.
	f.want(t, 120, 120)
	if o, md := f.committed(t, 0); o != 120 || !strings.HasPrefix(md, "sink-eo1 @120 t") || strings.Contains(md, " c") {
		t.Fatalf("partition 0 committed at %d with %q; want 120 and a ledger with no check region", o, md)
	}
	if o, _ := f.committed(t, 1); o != 0 {
		t.Fatalf("partition 1 committed at %d; want 0 (a null offset: the log start)", o)
	}
	if code, body := admin("PUT", base+"/resume", ""); code != http.StatusAccepted {
		t.Fatalf("resume: %d %s", code, body)
	}
	waitRows(t, r, f.ch, f.table, 500)
	f.want(t, 500, 500)

	if code, body := admin("PUT", base+"/stop", ""); code != http.StatusNoContent {
		t.Fatalf("second stop: %d %s", code, body)
	}
	if code, body := admin("DELETE", base+"/offsets", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	f.want(t, 0, 0)
	if code, body := admin("PUT", base+"/resume", ""); code != http.StatusAccepted {
		t.Fatalf("second resume: %d %s", code, body)
	}
	waitRows(t, r, f.ch, f.table, 500)
	time.Sleep(time.Second)
	f.want(t, 500, 500)
	if code := r.stop(t); code != 0 {
		t.Fatalf("sink exit %d after SIGTERM; log:\n%s", code, r.stderr.String())
	}
}

// readFile is the content of path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// TestParseOffsets: a PATCH body read as Kafka Connect 4.3 reads a sink
// connector's (the refusals in its words, measured against a worker), with
// 400 where Connect answers a malformed body with 500.
func TestParseOffsets(t *testing.T) {
	p := func(topic string, part int32, off int64) Offset {
		return Offset{Topic: topic, Partition: part, Offset: off}
	}
	entry := func(partition, offset string) string {
		return `{"offsets":[{"partition":` + partition + `,"offset":` + offset + `}]}`
	}
	ok := func(body string, want ...Offset) {
		t.Helper()
		got, err := ParseOffsets([]byte(body))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseOffsets(%s) = %+v, %v; want %+v", body, got, err, want)
		}
	}
	bad := func(body, msg string) {
		t.Helper()
		_, err := ParseOffsets([]byte(body))
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("ParseOffsets(%s): error %v; want ErrBadRequest with %q", body, err, msg)
		}
	}
	ok(entry(`{"kafka_topic":"a","kafka_partition":0}`, `{"kafka_offset":3}`), p("a", 0, 3))
	ok(entry(`{"kafka_topic":"a","kafka_partition":"2"}`, `{"kafka_offset":"15"}`), p("a", 2, 15))
	ok(entry(`{"kafka_topic":"a","kafka_partition":0,"x":1}`, `{"kafka_offset":0}`), p("a", 0, 0))
	ok(entry(`{"kafka_topic":"a","kafka_partition":1}`, `null`), Offset{Topic: "a", Partition: 1, Reset: true})
	ok(`{"offsets":[{"partition":{"kafka_topic":"a","kafka_partition":1}}]}`, Offset{Topic: "a", Partition: 1, Reset: true})
	ok(`{"offsets":[`+
		`{"partition":{"kafka_topic":"a","kafka_partition":0},"offset":{"kafka_offset":1}},`+
		`{"partition":{"kafka_topic":"b","kafka_partition":0},"offset":{"kafka_offset":9}},`+
		`{"partition":{"kafka_topic":"a","kafka_partition":0},"offset":{"kafka_offset":2}}]}`, p("a", 0, 2), p("b", 0, 9))
	ok(entry(`{"kafka_topic":"a","kafka_partition":0}`, `{"kafka_offset":9223372036854775807}`), p("a", 0, 1<<63-1))

	bad(`{"offsets":[]}`, "Partitions / offsets need to be provided for an alter offsets request")
	bad(`{}`, "Partitions / offsets need to be provided")
	bad(``, "the body is not")
	bad(`{"offsets":`, "the body is not")
	bad(`{"offsets":{}}`, "the body is not")
	bad(`{"offsets":[{"offset":{"kafka_offset":3}}]}`, "The partition for a sink connector offset cannot be null or missing")
	bad(entry(`{"kafka_partition":0}`, `{"kafka_offset":3}`), "must contain the keys 'kafka_topic' and 'kafka_partition'")
	bad(entry(`{"kafka_topic":"a"}`, `{"kafka_offset":3}`), "must contain the keys 'kafka_topic' and 'kafka_partition'")
	bad(entry(`{"kafka_topic":5,"kafka_partition":0}`, `{"kafka_offset":3}`), "kafka_topic 5: want the name of a topic")
	bad(entry(`{"kafka_topic":"","kafka_partition":0}`, `{"kafka_offset":3}`), "want the name of a topic")
	bad(entry(`{"kafka_topic":"a","kafka_partition":0.5}`, `{"kafka_offset":3}`), "Failed to parse the following Kafka partition value in the provided offsets: '0.5'")
	bad(entry(`{"kafka_topic":"a","kafka_partition":-1}`, `{"kafka_offset":3}`), "partition value in the provided offsets: '-1'")
	bad(entry(`{"kafka_topic":"a","kafka_partition":4294967296}`, `{"kafka_offset":3}`), "partition value")
	bad(entry(`{"kafka_topic":"a","kafka_partition":0}`, `{"x":3}`), "The offset for a sink connector should either be null or contain the key 'kafka_offset'")
	bad(entry(`{"kafka_topic":"a","kafka_partition":0}`, `{"kafka_offset":3.7}`), "Failed to parse the following Kafka offset value in the provided offsets: '3.7'")
	bad(entry(`{"kafka_topic":"a","kafka_partition":0}`, `{"kafka_offset":"abc"}`), "offset value in the provided offsets: 'abc'")
	bad(entry(`{"kafka_topic":"a","kafka_partition":0}`, `{"kafka_offset":-3}`), "offset value in the provided offsets: '-3'")
	bad(entry(`{"kafka_topic":"a","kafka_partition":0}`, `{"kafka_offset":1e3}`), "offset value")
	bad(entry(`{"kafka_topic":"a","kafka_partition":0}`, `5`), "the body is not")
	bad(`{"offsets":[{"partition":{"kafka_topic":"a","kafka_partition":0},"offset":null}],"extra":1}`, "the body is not")
	bad(`{"offsets":[{"partition":{"kafka_topic":"a","kafka_partition":0},"offset":null,"x":1}]}`, "the body is not")
	bad(entry(`{"kafka_topic":"a","kafka_partition":0}`, `null`)+` {}`, "more than one JSON value")
}

// FuzzParseOffsets: no body makes the parser panic; what it accepts is
// valid (a topic, partitions and offsets of 0 or more, each partition
// once) and reads back the same from Connect's shape.
func FuzzParseOffsets(f *testing.F) {
	for _, s := range []string{
		`{"offsets":[{"partition":{"kafka_topic":"a","kafka_partition":0},"offset":{"kafka_offset":3}}]}`,
		`{"offsets":[{"partition":{"kafka_topic":"a","kafka_partition":"1"},"offset":null},{"partition":{"kafka_topic":"a","kafka_partition":1},"offset":{"kafka_offset":"7"}}]}`,
		`{"offsets":[{"partition":{"kafka_topic":"\u00e9","kafka_partition":0,"z":[1,{}]}}]}`,
		`{"offsets":[]}`, `[]`, `null`, `{"offsets":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		offs, err := ParseOffsets(body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		seen := map[[2]any]bool{}
		for _, o := range offs {
			if o.Topic == "" || o.Partition < 0 || o.Offset < 0 || (o.Reset && o.Offset != 0) || seen[[2]any{o.Topic, o.Partition}] {
				t.Fatalf("accepted %+v of %q", o, body)
			}
			seen[[2]any{o.Topic, o.Partition}] = true
		}
		again, err := json.Marshal(offsetsJSON(offs))
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseOffsets(again)
		if err != nil || !reflect.DeepEqual(back, offs) {
			t.Fatalf("%s read back as %+v, %v; was %+v", again, back, err, offs)
		}
	})
}

// fakeLife is a Lifecycle with a fixed state: it records the requests and
// refuses offsets changes unless STOPPED.
type fakeLife struct {
	fakeCtl
	offs    []Offset
	altered []Offset
	resets  int
	stops   int
	readErr error
}

func (l *fakeLife) Status() *Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snap
}

// seen returns what the lifecycle was asked to do.
func (l *fakeLife) seen() (altered []Offset, resets, stops int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Offset(nil), l.altered...), l.resets, l.stops
}

func (l *fakeLife) Stop(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stops++
	l.snap = &Snapshot{State: Stopped}
	return nil
}

func (l *fakeLife) Offsets(context.Context) ([]Offset, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.offs, l.readErr
}

func (l *fakeLife) stopped() error {
	if l.snap.State != Stopped {
		return fmt.Errorf("%w: it is %s", ErrNotStopped, l.snap.State)
	}
	return nil
}

func (l *fakeLife) AlterOffsets(_ context.Context, offs []Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.stopped(); err != nil {
		return err
	}
	l.altered = append(l.altered, offs...)
	return nil
}

func (l *fakeLife) ResetOffsets(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.stopped(); err != nil {
		return err
	}
	l.resets++
	return nil
}

// send makes a request with a body and returns its status and decoded
// JSON body (nil when empty).
func send(t *testing.T, srv *httptest.Server, method, path, ctype, body string, header map[string]string) (int, any) {
	t.Helper()
	r, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(b) == 0 {
		return resp.StatusCode, nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s %s: %d with a body that is not JSON: %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, v
}

const patchBody = `{"offsets":[{"partition":{"kafka_topic":"t","kafka_partition":1},"offset":{"kafka_offset":40}}]}`

// TestConnectOffsetsAndStop: the offsets are read in any state; PATCH and
// DELETE are refused with Connect's 400 until the connector is stopped,
// then change them with Connect's 200 message; PUT stop answers 204 with
// no body; every change is an admin request.
func TestConnectOffsetsAndStop(t *testing.T) {
	life := &fakeLife{fakeCtl: fakeCtl{snap: &Snapshot{State: Running}}, offs: []Offset{{Topic: "t", Partition: 0, Offset: 7}, {Topic: "t", Partition: 1, Offset: 9}}}
	srv := serve(t, Info{Name: "c", Admin: true, Loopback: true}, life)
	const js = "application/json"

	code, body := send(t, srv, "GET", "/connectors/c/offsets", "", "", nil)
	want := map[string]any{"offsets": []any{
		map[string]any{"partition": map[string]any{"kafka_topic": "t", "kafka_partition": 0.0}, "offset": map[string]any{"kafka_offset": 7.0}},
		map[string]any{"partition": map[string]any{"kafka_topic": "t", "kafka_partition": 1.0}, "offset": map[string]any{"kafka_offset": 9.0}},
	}}
	if code != 200 || !reflect.DeepEqual(body, want) {
		t.Fatalf("GET offsets: %d %v; want %v", code, body, want)
	}
	code, body = send(t, srv, "PATCH", "/connectors/c/offsets", js, patchBody, nil)
	if msg, _ := body.(map[string]any)["message"].(string); code != 400 ||
		!strings.HasPrefix(msg, "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/c/stop' endpoint") {
		t.Fatalf("PATCH while running: %d %v; want Connect's 400", code, body)
	}
	if code, body = send(t, srv, "DELETE", "/connectors/c/offsets", "", "", nil); code != 400 {
		t.Fatalf("DELETE while running: %d %v; want 400", code, body)
	}

	if code, body = send(t, srv, "POST", "/connectors/c/stop", "", "", nil); code != 405 {
		t.Fatalf("POST stop: %d %v; want 405", code, body)
	}
	if code, body = send(t, srv, "PUT", "/connectors/c/stop", "", "", nil); code != 204 || body != nil {
		t.Fatalf("PUT stop: %d %v; want 204 with no body", code, body)
	}
	if _, _, stops := life.seen(); stops != 1 {
		t.Fatalf("%d stops; want one", stops)
	}
	if code, body = send(t, srv, "PATCH", "/connectors/c/offsets", "text/plain", patchBody, nil); code != 415 {
		t.Fatalf("PATCH as text/plain: %d %v; want 415", code, body)
	}
	if code, body = send(t, srv, "PATCH", "/connectors/c/offsets", js, `{"offsets":[]}`, nil); code != 400 {
		t.Fatalf("PATCH of nothing: %d %v; want 400", code, body)
	}
	code, body = send(t, srv, "PATCH", "/connectors/c/offsets", js, patchBody, nil)
	altered, _, _ := life.seen()
	if code != 200 || !reflect.DeepEqual(body, map[string]any{"message": "The offsets for this connector have been altered successfully"}) ||
		!reflect.DeepEqual(altered, []Offset{{Topic: "t", Partition: 1, Offset: 40}}) {
		t.Fatalf("PATCH while stopped: %d %v, altered %+v", code, body, altered)
	}
	code, body = send(t, srv, "DELETE", "/connectors/c/offsets", "", "", nil)
	if _, resets, _ := life.seen(); code != 200 || !reflect.DeepEqual(body, map[string]any{"message": "The offsets for this connector have been reset successfully"}) || resets != 1 {
		t.Fatalf("DELETE while stopped: %d %v, %d resets", code, body, resets)
	}
	if code, body = send(t, srv, "POST", "/connectors/c/offsets", "", "", nil); code != 405 {
		t.Fatalf("POST offsets: %d %v; want 405", code, body)
	}
	if code, body = send(t, srv, "GET", "/connectors/d/offsets", "", "", nil); code != 404 {
		t.Fatalf("another connector's offsets: %d %v; want 404", code, body)
	}
	life.mu.Lock()
	life.readErr = errors.New("kafka: fetching the committed offsets: broken")
	life.mu.Unlock()
	if code, body = send(t, srv, "GET", "/connectors/c/offsets", "", "", nil); code != 500 {
		t.Fatalf("GET offsets when Kafka fails: %d %v; want 500", code, body)
	}
}

// TestConnectChangesAreAdmin: stop and the offsets' changes need what
// pause needs (admin on, the token), and a browser's cross-site request is
// refused; the offsets are read without the token, like the status.
func TestConnectChangesAreAdmin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		info   Info
		header map[string]string
		code   int
	}{
		{"admin off", Info{Name: "c", Loopback: true}, nil, 403},
		{"no token", Info{Name: "c", Admin: true, Token: testToken}, nil, 401},
		{"cross-site", Info{Name: "c", Admin: true, Loopback: true}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"cross-origin", Info{Name: "c", Admin: true, Loopback: true}, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "same-site"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			life := &fakeLife{fakeCtl: fakeCtl{snap: &Snapshot{State: Stopped}}}
			srv := serve(t, tc.info, life)
			for _, r := range [][3]string{{"PUT", "/connectors/c/stop", ""}, {"PATCH", "/connectors/c/offsets", patchBody}, {"DELETE", "/connectors/c/offsets", ""}, {"PUT", "/connectors/c/resume", ""}} {
				if code, body := send(t, srv, r[0], r[1], "application/json", r[2], tc.header); code != tc.code {
					t.Errorf("%s %s: %d %v; want %d", r[0], r[1], code, body, tc.code)
				}
			}
			if altered, resets, stops := life.seen(); stops != 0 || len(altered) != 0 || resets != 0 || len(life.calls()) != 0 {
				t.Fatalf("a refused request reached the lifecycle: %+v", life)
			}
			if tc.name == "no token" {
				if code, _ := send(t, srv, "GET", "/connectors/c/offsets", "", "", nil); code != 200 {
					t.Fatalf("GET offsets without the token: %d; want 200", code)
				}
			}
		})
	}
}

// TestConnectInfoConfigTasks: the connector's info, config and tasks in
// Kafka Connect's shapes, with no task while STOPPED (status included),
// and GET /connectors?expand=.
func TestConnectInfoConfigTasks(t *testing.T) {
	cfg := map[string]string{"name": "c", "connector.class": "sink", "tasks.max": "1", "topics": "t"}
	ctl := &fakeCtl{snap: &Snapshot{State: Running}}
	srv := serve(t, Info{Name: "c", Version: "v9", Config: cfg}, ctl)
	get := func(path string) any {
		t.Helper()
		code, body := send(t, srv, "GET", path, "", "", nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %v", path, code, body)
		}
		return body
	}
	cfgJSON := map[string]any{"name": "c", "connector.class": "sink", "tasks.max": "1", "topics": "t"}
	taskCfg := map[string]any{"name": "c", "connector.class": "sink", "tasks.max": "1", "topics": "t", "task.class": "sink"}
	task := map[string]any{"connector": "c", "task": 0.0}
	if got, want := get("/connectors/c"), map[string]any{"name": "c", "config": cfgJSON, "tasks": []any{task}, "type": "sink"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("info: %v; want %v", got, want)
	}
	if got := get("/connectors/c/config"); !reflect.DeepEqual(got, cfgJSON) {
		t.Fatalf("config: %v", got)
	}
	if got, want := get("/connectors/c/tasks"), []any{map[string]any{"id": task, "config": taskCfg}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tasks: %v; want %v", got, want)
	}
	exp := get("/connectors?expand=status&expand=info&expand=nonsense").(map[string]any)["c"].(map[string]any)
	if exp["info"].(map[string]any)["type"] != "sink" || exp["status"].(map[string]any)["connector"].(map[string]any)["state"] != "RUNNING" || len(exp) != 2 {
		t.Fatalf("expand: %v", exp)
	}
	if got := get("/connectors?expand=info").(map[string]any)["c"].(map[string]any); len(got) != 1 || got["info"] == nil {
		t.Fatalf("expand=info: %v", got)
	}
	if got := get("/connectors"); !reflect.DeepEqual(got, []any{"c"}) {
		t.Fatalf("connectors: %v", got)
	}

	ctl.snap = &Snapshot{State: Stopped}
	if got := get("/connectors/c").(map[string]any)["tasks"]; !reflect.DeepEqual(got, []any{}) {
		t.Fatalf("info's tasks while STOPPED: %v; want []", got)
	}
	if got := get("/connectors/c/tasks"); !reflect.DeepEqual(got, []any{}) {
		t.Fatalf("tasks while STOPPED: %v; want []", got)
	}
	st := get("/connectors/c/status").(map[string]any)
	if !reflect.DeepEqual(st["tasks"], []any{}) || !reflect.DeepEqual(st["connector"], map[string]any{"state": "STOPPED", "worker_id": "host:8080", "version": "v9"}) {
		t.Fatalf("status while STOPPED: %v", st)
	}
	for _, p := range []string{"/connectors/c", "/connectors/c/config", "/connectors/c/tasks"} {
		if code, body := send(t, srv, "POST", p, "", "", nil); code != 405 {
			t.Fatalf("POST %s: %d %v; want 405", p, code, body)
		}
	}
	if code, _ := send(t, srv, "GET", "/connectors/other/config", "", "", nil); code != 404 {
		t.Fatalf("another connector's config: %d; want 404", code)
	}
}

// TestConnectWithoutLifecycle: a controller that cannot stop in place (the
// pipeline alone) answers stop and the offsets with 409; before any
// controller, 409 "starting".
func TestConnectWithoutLifecycle(t *testing.T) {
	srv := serve(t, Info{Name: "c", Admin: true, Loopback: true}, &fakeCtl{snap: &Snapshot{State: Running}})
	for _, r := range [][2]string{{"PUT", "/connectors/c/stop"}, {"GET", "/connectors/c/offsets"}, {"DELETE", "/connectors/c/offsets"}} {
		if code, body := send(t, srv, r[0], r[1], "", "", nil); code != 409 {
			t.Errorf("%s %s: %d %v; want 409", r[0], r[1], code, body)
		}
	}
	srv = serve(t, Info{Name: "c", Admin: true, Loopback: true}, nil)
	if code, body := send(t, srv, "GET", "/connectors/c/offsets", "", "", nil); code != 409 || !strings.Contains(fmt.Sprint(body), "starting") {
		t.Fatalf("offsets before the controller: %d %v; want 409 starting", code, body)
	}
}

// TestErrorStatus: the one mapping of a controller's errors to statuses.
func TestErrorStatus(t *testing.T) {
	for err, want := range map[error]int{
		fmt.Errorf("%w: x", ErrBadRequest):                400,
		fmt.Errorf("offsets: %w", ErrNotStopped):          400,
		fmt.Errorf("%w: stopping", ErrConflict):           409,
		fmt.Errorf("read: %w", errUnsupportedMedia):       415,
		fmt.Errorf("kafka: %w", context.DeadlineExceeded): 504,
		errors.New("kafka: broken"):                       500,
		fmt.Errorf("%w: %w", ErrConflict, ErrBadRequest):  400,
	} {
		if got := errorStatus(err); got != want {
			t.Errorf("errorStatus(%v) = %d, want %d", err, got, want)
		}
	}
}

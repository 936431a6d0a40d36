package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHistorySumsAndSeries(t *testing.T) {
	var h History
	t0 := time.Unix(1_800_000_000, 0)
	// One insert of 100 rows every 10 s for 20 minutes: the ring laps.
	for s := 0; s < 20*60; s += 10 {
		h.Add(t0.Add(time.Duration(s)*time.Second), 100)
	}
	now := t0.Add(20*time.Minute - 10*time.Second) // the last insert
	if r, i := h.Sums(now, time.Minute); r != 600 || i != 6 {
		t.Fatalf("last minute: %d rows, %d inserts; want 600, 6", r, i)
	}
	if r, i := h.Sums(now, Window); r != 9000 || i != 90 {
		t.Fatalf("last 15 min: %d rows, %d inserts; want 9000, 90", r, i)
	}
	s := h.Series(now)
	if len(s.RowsPerMin) != 91 || s.StepSeconds != 10 || !s.Start.Equal(now.Add(-Window)) {
		t.Fatalf("series: %d points, step %d, start %s", len(s.RowsPerMin), s.StepSeconds, s.Start)
	}
	for i := range s.RowsPerMin {
		if s.RowsPerMin[i] != 600 || s.InsertsPerMin[i] != 6 {
			t.Fatalf("point %d: %d rows/min, %d inserts/min; want the steady 600 and 6", i, s.RowsPerMin[i], s.InsertsPerMin[i])
		}
	}
	// Five quiet minutes later: the last minute is empty, the stale slots
	// of the previous lap count for nothing.
	later := now.Add(5 * time.Minute)
	if r, i := h.Sums(later, time.Minute); r != 0 || i != 0 {
		t.Fatalf("after 5 quiet minutes: %d rows, %d inserts in the last minute", r, i)
	}
	if r, _ := h.Sums(later, Window); r != 6000 {
		t.Fatalf("after 5 quiet minutes: %d rows in 15 min, want 6000 (10 minutes of 600)", r)
	}
	// Two inserts in the same second add up.
	var h2 History
	h2.Add(t0, 5)
	h2.Add(t0.Add(500*time.Millisecond), 7)
	if r, i := h2.Sums(t0, time.Second); r != 12 || i != 2 {
		t.Fatalf("same second: %d rows, %d inserts; want 12, 2", r, i)
	}
}

// fakeCtl is a Controller with a fixed snapshot that records requests.
type fakeCtl struct {
	mu    sync.Mutex
	snap  *Snapshot
	ops   []string
	state State
	err   error
}

func (c *fakeCtl) Status() *Snapshot { return c.snap }
func (c *fakeCtl) Pause(context.Context) (State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, "pause")
	return c.state, c.err
}
func (c *fakeCtl) Resume(context.Context) (State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, "resume")
	return Running, c.err
}

func (c *fakeCtl) calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ops...)
}

const testToken = "0123456789abcdef-token"

func serve(t *testing.T, info Info, ctl Controller) *httptest.Server {
	t.Helper()
	h := New(info, "host:8080", nil)
	if ctl != nil {
		h.SetController(ctl)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "next") })
	srv := httptest.NewServer(h.Routes(next))
	t.Cleanup(srv.Close)
	return srv
}

type req struct {
	method, path string
	header       map[string]string
}

func do(t *testing.T, srv *httptest.Server, r req) (int, http.Header, string) {
	t.Helper()
	hr, err := http.NewRequest(r.method, srv.URL+r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.header {
		if k == "Host" {
			hr.Host = v
			continue
		}
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestAdminEndpoints(t *testing.T) {
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	cases := []struct {
		name     string
		info     Info
		r        req
		code     int
		body     string // a part of the body
		wantCall string // the controller call it makes ("": none)
	}{
		{"admin off", Info{Name: "c"}, req{method: "POST", path: "/pause"}, 403, "http.admin: true", ""},
		{"admin off, even with a token", Info{Name: "c", Token: testToken}, req{"POST", "/pause", bearer}, 403, "admin endpoints are off", ""},
		{"GET /pause", Info{Name: "c", Admin: true}, req{method: "GET", path: "/pause"}, 405, "use POST", ""},
		{"DELETE /resume", Info{Name: "c", Admin: true}, req{method: "DELETE", path: "/resume"}, 405, "use POST", ""},
		{"POST /status", Info{Name: "c", Admin: true}, req{method: "POST", path: "/status"}, 405, "use GET", ""},
		{"loopback, no token", Info{Name: "c", Admin: true, Loopback: true}, req{method: "POST", path: "/pause"}, 202, `"state": "PAUSING"`, "pause"},
		{"no token, foreign Host (DNS rebinding)", Info{Name: "c", Admin: true, Loopback: true}, req{"POST", "/pause", map[string]string{"Host": "evil.example:8080"}}, 403, "loopback host", ""},
		{"token missing", Info{Name: "c", Admin: true, Token: testToken}, req{method: "POST", path: "/pause"}, 401, "bearer token", ""},
		{"token wrong", Info{Name: "c", Admin: true, Token: testToken}, req{"POST", "/pause", map[string]string{"Authorization": "Bearer " + testToken + "x"}}, 401, "SINK_HTTP__ADMIN_TOKEN", ""},
		{"token as Basic", Info{Name: "c", Admin: true, Token: testToken}, req{"POST", "/pause", map[string]string{"Authorization": "Basic " + testToken}}, 401, "bearer token", ""},
		{"token right", Info{Name: "c", Admin: true, Token: testToken}, req{"POST", "/pause", bearer}, 202, `"state"`, "pause"},
		{"token right, any Host", Info{Name: "c", Admin: true, Token: testToken}, req{"POST", "/resume", map[string]string{"Authorization": "Bearer " + testToken, "Host": "sink.prod:8080"}}, 202, `"RUNNING"`, "resume"},
		{"cross-site browser request", Info{Name: "c", Admin: true, Loopback: true}, req{"POST", "/pause", map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403, "cross-origin", ""},
		{"Connect path: PUT pause", Info{Name: "c", Admin: true, Loopback: true}, req{method: "PUT", path: "/connectors/c/pause"}, 202, `"state"`, "pause"},
		{"Connect path: POST pause", Info{Name: "c", Admin: true, Loopback: true}, req{method: "POST", path: "/connectors/c/pause"}, 405, "use PUT", ""},
		{"Connect path: other name", Info{Name: "c", Admin: true, Loopback: true}, req{method: "PUT", path: "/connectors/d/resume"}, 404, "Connector d not found", ""},
		// Go's runtime profiles are admin endpoints too, read with GET.
		{"profiles, admin off", Info{Name: "c", Loopback: true}, req{method: "GET", path: "/debug/pprof/heap"}, 403, "http.admin: true", ""},
		{"profiles, loopback", Info{Name: "c", Admin: true, Loopback: true}, req{method: "GET", path: "/debug/pprof/goroutine?debug=1"}, 200, "goroutine profile: total", ""},
		{"profiles index", Info{Name: "c", Admin: true, Loopback: true}, req{method: "GET", path: "/debug/pprof/"}, 200, "heap", ""},
		{"profiles, foreign Host", Info{Name: "c", Admin: true, Loopback: true}, req{"GET", "/debug/pprof/heap", map[string]string{"Host": "evil.example:8080"}}, 403, "loopback host", ""},
		{"profiles, token missing", Info{Name: "c", Admin: true, Token: testToken}, req{method: "GET", path: "/debug/pprof/heap"}, 401, "bearer token", ""},
		{"profiles, token right", Info{Name: "c", Admin: true, Token: testToken}, req{"GET", "/debug/pprof/heap?debug=1", bearer}, 200, "heap profile", ""},
		{"profiles, POST", Info{Name: "c", Admin: true, Loopback: true}, req{method: "POST", path: "/debug/pprof/heap"}, 405, "use GET", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctl := &fakeCtl{state: Pausing, snap: &Snapshot{State: Running}}
			srv := serve(t, tc.info, ctl)
			code, hdr, body := do(t, srv, tc.r)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("%s %s: %d %s; want %d with %q", tc.r.method, tc.r.path, code, body, tc.code, tc.body)
			}
			if code == 405 && hdr.Get("Allow") == "" {
				t.Fatal("405 without an Allow header")
			}
			if code == 401 && hdr.Get("WWW-Authenticate") != `Bearer realm="sink"` {
				t.Fatalf("401 with WWW-Authenticate %q", hdr.Get("WWW-Authenticate"))
			}
			if code >= 400 && !strings.Contains(body, fmt.Sprintf(`"error_code": %d`, code)) {
				t.Fatalf("error body %s is not in Kafka Connect's error shape", body)
			}
			calls := ctl.calls()
			if (tc.wantCall == "" && len(calls) > 0) || (tc.wantCall != "" && (len(calls) != 1 || calls[0] != tc.wantCall)) {
				t.Fatalf("controller calls %v, want %q", calls, tc.wantCall)
			}
		})
	}
}

func TestAdminConflictAndStarting(t *testing.T) {
	info := Info{Name: "c", Admin: true, Loopback: true}
	srv := serve(t, info, nil)
	if code, _, body := do(t, srv, req{method: "POST", path: "/pause"}); code != 409 || !strings.Contains(body, "starting") {
		t.Fatalf("pause before the pipeline runs: %d %s; want 409", code, body)
	}
	if code, _, body := do(t, srv, req{method: "GET", path: "/status"}); code != 200 || !strings.Contains(body, `"state": "STARTING"`) {
		t.Fatalf("status before the pipeline runs: %d %s", code, body)
	}
	ctl := &fakeCtl{snap: &Snapshot{State: Stopping}, state: Stopping, err: fmt.Errorf("%w: the connector is STOPPING", ErrConflict)}
	srv = serve(t, info, ctl)
	if code, _, body := do(t, srv, req{method: "POST", path: "/pause"}); code != 409 || !strings.Contains(body, "STOPPING") {
		t.Fatalf("pause while stopping: %d %s; want 409 naming the state", code, body)
	}
}

func TestStatusReport(t *testing.T) {
	at := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	last := at.Add(-30 * time.Second)
	lag, hwm, committed := int64(40), int64(1000), int64(960)
	snap := &Snapshot{
		At: at, State: Paused, Since: at.Add(-time.Minute), GroupProtocol: "consumer",
		Tables: []Table{{Table: "db.t", Rows1m: 10, Inserts1m: 1, LastInsert: &last,
			Target: Target{Mode: "fixed", Rows: 100, WaitSeconds: 5}}},
		Partitions: []Partition{
			{Topic: "t", Partition: 0, Committed: &committed, LogEnd: &hwm, LagRecords: &lag, LastFetched: at.Add(-90 * time.Second)},
			{Topic: "t", Partition: 1},
		},
	}
	h := New(Info{Name: "orders", Version: "v1", Delivery: "at_least_once"}, "pod-1:8080", nil)
	h.SetController(&fakeCtl{snap: snap})
	rep := h.Report(at)
	if rep.Name != "orders" || rep.Type != "sink" || rep.Connector.State != Paused || rep.Connector.WorkerID != "pod-1:8080" ||
		len(rep.Tasks) != 1 || *rep.Tasks[0].ID != 0 || rep.Tasks[0].State != Paused {
		t.Fatalf("report head %+v", rep)
	}
	if v := rep.Tables[0].SecondsSinceLastInsert; v == nil || *v != 30 {
		t.Fatalf("seconds since the last insert: %v, want 30", v)
	}
	if v := rep.Partitions[0].LagSeconds; v == nil || *v != 90 {
		t.Fatalf("lag seconds: %v, want 90 (now - the last fetched record's timestamp)", v)
	}
	if rep.Partitions[1].LagSeconds != nil {
		t.Fatal("lag seconds for a partition never fetched")
	}
	if snap.Tables[0].SecondsSinceLastInsert != nil || snap.Partitions[0].LagSeconds != nil {
		t.Fatal("Report wrote into the published snapshot")
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"connector":{"state":"PAUSED","worker_id":"pod-1:8080","version":"v1"}`, `"tasks":[{"id":0,"state":"PAUSED"`,
		`"group_protocol":"consumer"`, `"committed_offset":960`, `"log_end_offset":1000`, `"lag_records":40`, `"committed_offset":null`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("JSON %s\nlacks %s", b, want)
		}
	}
	if strings.Contains(string(b), "LastFetched") {
		t.Fatal("internal field in the JSON")
	}
}

// TestPageSelfContained: the page is served as HTML with a policy that
// forbids loading anything from elsewhere, and references nothing outside.
func TestPageSelfContained(t *testing.T) {
	srv := serve(t, Info{Name: "c"}, nil)
	code, hdr, body := do(t, srv, req{method: "GET", path: "/"})
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(hdr.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET /: %d, %v", code, hdr)
	}
	if ext := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`).FindString(body); ext != "" {
		t.Fatalf("the page loads something from elsewhere: %s", ext)
	}
	if !strings.Contains(body, `fetch("status"`) {
		t.Fatal("the page does not read ./status")
	}
	if code, _, body := do(t, srv, req{method: "GET", path: "/metrics"}); code != 200 || body != "next" {
		t.Fatalf("other paths must reach the next handler: %d %q", code, body)
	}
	if code, _, _ := do(t, srv, req{method: "POST", path: "/"}); code != 405 {
		t.Fatalf("POST /: %d, want 405", code)
	}
}

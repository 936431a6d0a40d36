package status

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestProtectRefusesBrowserShapedRequests: every endpoint that reveals
// state or starts work, GETs and the profiles included, refuses a request
// a page of another site makes a browser send (Sec-Fetch-Site:
// cross-site) and one whose Host does not name the sink (DNS rebinding);
// /healthz answers both; the sink's own page, curl and Prometheus (no
// Fetch Metadata, an IP address or localhost as Host) get through.
func TestProtectRefusesBrowserShapedRequests(t *testing.T) {
	info := Info{Name: "c", Admin: true, Loopback: true, Hosts: []string{"sink.monitoring.svc", "*.svc.cluster.local"}}
	srv := serve(t, info, &fakeCtl{state: Pausing, snap: &Snapshot{State: Running}})
	cross := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
	rebound := map[string]string{"Host": "evil.example:8080"}
	for _, r := range []req{
		{method: "GET", path: "/"},
		{method: "GET", path: "/status"},
		{method: "GET", path: "/metrics"},
		{method: "GET", path: "/readyz"},
		{method: "GET", path: "/connectors"},
		{method: "GET", path: "/connectors/c/status"},
		{method: "GET", path: "/connectors/c"},
		{method: "GET", path: "/connectors/c/config"},
		{method: "GET", path: "/connectors/c/tasks"},
		{method: "GET", path: "/connectors/c/offsets"},
		{method: "PATCH", path: "/connectors/c/offsets"},
		{method: "DELETE", path: "/connectors/c/offsets"},
		{method: "PUT", path: "/connectors/c/stop"},
		{method: "GET", path: "/debug/pprof/"},
		{method: "GET", path: "/debug/pprof/profile?seconds=1"},
		{method: "GET", path: "/debug/pprof/heap"},
		{method: "POST", path: "/pause"},
	} {
		for _, bad := range []map[string]string{cross, rebound} {
			r.header = bad
			code, _, body := do(t, srv, r)
			if code != 403 || !strings.Contains(body, `"error_code": 403`) {
				t.Errorf("%s %s with %v: %d %s; want 403", r.method, r.path, bad, code, body)
			}
		}
	}
	for _, ok := range []map[string]string{
		nil,                                        // curl, Prometheus: no Fetch Metadata, an IP address as Host
		{"Sec-Fetch-Site": "same-origin"},          // the status page's own fetch
		{"Sec-Fetch-Site": "none"},                 // typed into the address bar
		{"Host": "localhost:8080"},                 // kubectl port-forward
		{"Host": "sink.monitoring.svc"},            // listed
		{"Host": "sink.ns.svc.cluster.local:8080"}, // below a listed *.
		{"Host": "[::1]:8080"},
	} {
		if code, _, body := do(t, srv, req{method: "GET", path: "/status", header: ok}); code != 200 {
			t.Errorf("GET /status with %v: %d %s; want 200", ok, code, body)
		}
	}
	for _, bad := range []string{"svc.cluster.local.evil.example", "monitoring.svc", "sink.monitoring.svc.evil.example"} {
		if code, _, _ := do(t, srv, req{method: "GET", path: "/status", header: map[string]string{"Host": bad}}); code != 403 {
			t.Errorf("GET /status with Host %s: %d; want 403", bad, code)
		}
	}
	for _, h := range []map[string]string{cross, rebound} {
		if code, _, body := do(t, srv, req{method: "GET", path: "/healthz", header: h}); code != 200 || body != "next" {
			t.Errorf("GET /healthz with %v: %d %q; want the health endpoint", h, code, body)
		}
	}
}

// TestProtectTokenAnyHost: a request with the admin bearer token may name
// any Host (a browser never sends the token on its own); without it the
// same request is refused.
func TestProtectTokenAnyHost(t *testing.T) {
	srv := serve(t, Info{Name: "c", Admin: true, Token: testToken}, &fakeCtl{snap: &Snapshot{State: Running}})
	host := map[string]string{"Host": "sink.prod:8080"}
	if code, _, body := do(t, srv, req{method: "GET", path: "/status", header: host}); code != 403 {
		t.Fatalf("GET /status, foreign Host, no token: %d %s; want 403", code, body)
	}
	host["Authorization"] = "Bearer " + testToken
	if code, _, body := do(t, srv, req{method: "GET", path: "/status", header: host}); code != 200 {
		t.Fatalf("GET /status, foreign Host, the token: %d %s; want 200", code, body)
	}
}

// TestStatusRedactsErrorValues: /status serves the connector's trace and a
// table's last error without the values they quote, with their codes and
// words; ?error_values=full serves them whole to an admin request only.
func TestStatusRedactsErrorValues(t *testing.T) {
	snap := &Snapshot{State: Failed, Error: "record t[0]@5: column \"s\": \"4111-1111-1111-1111\" is not a number",
		Tables: []Table{{Table: "db.t", LastError: &InsertError{Code: 27,
			Message: "code: 27, message: Cannot parse input: expected ',' before: 'alice@example.com,secret'"}}}}
	secrets := []string{"4111-1111-1111-1111", "alice@example.com", "secret'"}
	for _, tc := range []struct {
		name  string
		info  Info
		r     req
		code  int
		whole bool
	}{
		{"default", Info{Name: "c"}, req{method: "GET", path: "/status"}, 200, false},
		{"full, admin off", Info{Name: "c", Loopback: true}, req{method: "GET", path: "/status?error_values=full"}, 403, false},
		{"full, loopback admin", Info{Name: "c", Admin: true, Loopback: true}, req{method: "GET", path: "/status?error_values=full"}, 200, true},
		{"full, no token", Info{Name: "c", Admin: true, Token: testToken}, req{method: "GET", path: "/status?error_values=full"}, 401, false},
		{"full, token", Info{Name: "c", Admin: true, Token: testToken}, req{"GET", "/status?error_values=full", map[string]string{"Authorization": "Bearer " + testToken}}, 200, true},
		{"unknown value", Info{Name: "c", Admin: true, Loopback: true}, req{method: "GET", path: "/status?error_values=all"}, 400, false},
		{"Connect path", Info{Name: "c"}, req{method: "GET", path: "/connectors/c/status"}, 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.info, &fakeCtl{snap: snap})
			code, _, body := do(t, srv, tc.r)
			if code != tc.code {
				t.Fatalf("%d %s; want %d", code, body, tc.code)
			}
			for _, s := range secrets {
				if strings.Contains(body, s) != tc.whole {
					t.Errorf("value %q in the body: %v, want %v\n%s", s, !tc.whole, tc.whole, body)
				}
			}
			if code != 200 {
				return
			}
			want := `"error_values": "redacted"`
			if tc.whole {
				want = `"error_values": "full"`
			} else if !strings.Contains(body, `before: '…'`) || !strings.Contains(body, `"code": 27`) || !strings.Contains(body, "is not a number") {
				t.Errorf("the redacted body lost the code or the shape of the errors:\n%s", body)
			}
			if !strings.Contains(body, want) {
				t.Errorf("body lacks %s:\n%s", want, body)
			}
		})
	}
	if snap.Error == "" || !strings.Contains(snap.Tables[0].LastError.Message, "secret") {
		t.Fatal("serving /status changed the published snapshot")
	}
}

// TestProfileRunsPastServerTimeouts: a CPU profile of ?seconds=1 runs its
// second and is delivered whole although the server's read and write
// timeouts (short here) are shorter, as the timeouts of the other
// endpoints must be.
func TestProfileRunsPastServerTimeouts(t *testing.T) {
	const short = 300 * time.Millisecond
	h := New(Info{Name: "c", Admin: true, Loopback: true}, "host:8080", nil)
	routes := h.Routes(http.NotFoundHandler())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(short)) // as metrics.ServeHandler does
		routes.ServeHTTP(w, r)
	}))
	srv.Config.ReadTimeout = short
	srv.Start()
	t.Cleanup(srv.Close)
	start := time.Now()
	resp, err := http.Get(srv.URL + "/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || len(body) == 0 {
		t.Fatalf("profile: %d, %d bytes, %v", resp.StatusCode, len(body), err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the profile ended after %s, before its second", took)
	}
}

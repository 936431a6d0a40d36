package kafkaauth

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sink/config"
)

// endpoint is a token endpoint for the tests: it checks the request the
// way a provider does and answers with answer's status and body.
type endpoint struct {
	t        *testing.T
	requests atomic.Int32
	mu       sync.Mutex
	status   int
	body     string
	ctype    string
	got      []string // "client:secret grant scope" per request
}

func newEndpoint(t *testing.T) (*endpoint, *httptest.Server) {
	e := &endpoint{t: t, status: 200, ctype: "application/json"}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return e, srv
}

func (e *endpoint) answer(status int, body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status, e.body = status, body
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.requests.Add(1)
	user, pass, _ := r.BasicAuth()
	_ = r.ParseForm()
	e.mu.Lock()
	e.got = append(e.got, fmt.Sprintf("%s:%s %s %s", user, pass, r.PostForm.Get("grant_type"), r.PostForm.Get("scope")))
	status, body, ctype := e.status, e.body, e.ctype
	e.mu.Unlock()
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func tokenJSON(tok string, expiresIn int) string {
	b, _ := json.Marshal(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": expiresIn})
	return string(b)
}

// clock is a settable time for the token cache.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func testTokens(t *testing.T, url string, o config.OAuth) (*tokens, *clock) {
	t.Helper()
	o.TokenEndpoint = url
	if o.ClientID == "" {
		o.ClientID = "sink"
	}
	if o.ClientSecret == "" {
		o.ClientSecret = "s3cret-value"
	}
	tk, err := newTokens(o, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Now()}
	tk.now = c.Now
	return tk, c
}

// TestTokensCacheAndRefresh: the client credentials go as HTTP Basic with
// the grant and the scope; a token of 100 s is reused until 70 s (80% of
// its life would leave less than 30 s) and replaced after; the extensions
// go with every token.
func TestTokensCacheAndRefresh(t *testing.T) {
	e, srv := newEndpoint(t)
	e.answer(200, tokenJSON("tok-1", 100))
	tk, clk := testTokens(t, srv.URL, config.OAuth{Scope: "kafka  openid", Extensions: map[string]string{"logicalCluster": "lkc-1"}})
	ctx := context.Background()

	a, err := tk.auth(ctx)
	if err != nil || a.Token != "tok-1" || a.Extensions["logicalCluster"] != "lkc-1" {
		t.Fatalf("auth = %+v, %v", a, err)
	}
	if e.got[0] != "sink:s3cret-value client_credentials kafka openid" {
		t.Fatalf("request: %q", e.got[0])
	}
	e.answer(200, tokenJSON("tok-2", 100))
	clk.Add(69 * time.Second)
	if a, _ := tk.auth(ctx); a.Token != "tok-1" || e.requests.Load() != 1 {
		t.Fatalf("at 69 s of 100: token %q after %d requests; want tok-1 after 1", a.Token, e.requests.Load())
	}
	clk.Add(2 * time.Second)
	if a, _ := tk.auth(ctx); a.Token != "tok-2" || e.requests.Load() != 2 {
		t.Fatalf("at 71 s of 100: token %q after %d requests; want tok-2 after 2", a.Token, e.requests.Load())
	}
}

// TestTokensNoStorm: while the endpoint fails, a hundred connections asking
// at once cause one request per backoff wait; a cached token that has not
// expired is still handed out meanwhile, and the error once it has.
func TestTokensNoStorm(t *testing.T) {
	e, srv := newEndpoint(t)
	e.answer(200, tokenJSON("tok-1", 10))
	tk, clk := testTokens(t, srv.URL, config.OAuth{})
	ctx := context.Background()
	if _, err := tk.get(ctx); err != nil {
		t.Fatal(err)
	}
	e.answer(503, `{"error":"temporarily_unavailable"}`)
	clk.Add(9 * time.Second) // past the refresh point, before the expiry
	ask := func() (ok, failed int) {
		var wg sync.WaitGroup
		var okN, failN atomic.Int32
		for range 100 {
			wg.Go(func() {
				if v, err := tk.get(ctx); err == nil && v.value == "tok-1" {
					okN.Add(1)
				} else if Classify(err) == EndpointFailed {
					failN.Add(1)
				}
			})
		}
		wg.Wait()
		return int(okN.Load()), int(failN.Load())
	}
	if ok, _ := ask(); ok != 100 || e.requests.Load() != 2 {
		t.Fatalf("before the expiry: %d of 100 got the cached token, %d requests; want 100 and 2", ok, e.requests.Load())
	}
	clk.Add(2 * time.Second) // expired; the backoff's first wait (0.5-1 s) has passed
	if _, failed := ask(); failed != 100 || e.requests.Load() != 3 {
		t.Fatalf("after the expiry: %d of 100 got the error, %d requests; want 100 and 3", failed, e.requests.Load())
	}
	for i := range 3 { // the next wait is 1-2 s
		clk.Add(300 * time.Millisecond)
		ask()
		if n := e.requests.Load(); n != 3 {
			t.Fatalf("%d: %d requests within the backoff's wait; want 3", i, n)
		}
	}
	e.answer(200, tokenJSON("tok-2", 10))
	clk.Add(time.Minute)
	if v, err := tk.get(ctx); err != nil || v.value != "tok-2" {
		t.Fatalf("after the wait: %v, %v", v.value, err)
	}
}

// TestTokenErrors: each way the endpoint fails is its own class, and the
// message says what it answered, on one line, without the secret.
func TestTokenErrors(t *testing.T) {
	const secret = "s3cret-value"
	f := func(status int, ctype, body string, want Class, wantText string) {
		t.Helper()
		e, srv := newEndpoint(t)
		e.ctype = ctype
		e.answer(status, body)
		tk, _ := testTokens(t, srv.URL, config.OAuth{})
		_, err := tk.get(context.Background())
		if Classify(err) != want {
			t.Fatalf("HTTP %d %s: class %q (%v); want %q", status, body, Classify(err), err, want)
		}
		msg := err.Error()
		if !strings.Contains(msg, wantText) || strings.Contains(msg, "\n") || strings.Contains(msg, secret) {
			t.Fatalf("HTTP %d %s: error %q; want one line with %q and no secret", status, body, msg, wantText)
		}
		if e.requests.Load() != 1 {
			t.Fatalf("%d requests; want 1 (no second try with the secret in the body)", e.requests.Load())
		}
	}
	const js = "application/json"
	f(401, js, `{"error":"invalid_client","error_description":"Invalid client or Invalid client credentials"}`, EndpointRefused,
		`kafka.sasl.oauth: token endpoint refused: http://`)
	f(401, js, `{"error":"invalid_client","error_description":"Invalid client or Invalid client credentials"}`, EndpointRefused,
		`for client "sink": HTTP 401 Unauthorized: invalid_client: Invalid client or Invalid client credentials`)
	f(400, js, `{"error":"invalid_scope"}`, EndpointRefused, `HTTP 400 Bad Request: invalid_scope`)
	f(403, "text/html", "<html>\n<body>Forbidden</body></html>", EndpointRefused, `HTTP 403 Forbidden: <html> <body>Forbidden</body></html>`)
	f(200, js, `{"error":"unauthorized_client"}`, EndpointRefused, `unauthorized_client`)
	f(400, js, `{"error":"invalid_client","error_description":"bad secret `+secret+`"}`, EndpointRefused, `bad secret ******`)
	f(500, js, `{"error":"server_error"}`, EndpointFailed, `kafka.sasl.oauth: token endpoint failed: `)
	f(502, "text/plain", "bad gateway", EndpointFailed, `HTTP 502 Bad Gateway: bad gateway`)
	f(200, js, `{"token_type":"Bearer"}`, BadTokenResponse, `kafka.sasl.oauth: token endpoint gave no token: `)
	f(200, js, `{"token_type":"Bearer"}`, BadTokenResponse, `oauth2: server response missing access_token`)
	f(200, js, `<html>`, BadTokenResponse, `oauth2: cannot parse json`)

	// Nothing listens.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	tk, _ := testTokens(t, "http://"+addr+"/token", config.OAuth{})
	_, err = tk.get(context.Background())
	if Classify(err) != EndpointUnreachable || !strings.Contains(err.Error(), "kafka.sasl.oauth: token endpoint unreachable: http://"+addr+"/token for client \"sink\": ") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("nothing listening: %v (%q)", err, Classify(err))
	}
	// An endpoint that does not answer within the timeout (2 s here).
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(stop) }) // runs first
	tk, _ = testTokens(t, hang.URL, config.OAuth{})
	start := time.Now()
	_, err = tk.get(context.Background())
	if Classify(err) != EndpointUnreachable || time.Since(start) > 10*time.Second {
		t.Fatalf("hanging endpoint: %v (%q) after %v", err, Classify(err), time.Since(start))
	}
}

// TestNewTokenExpiry: the lifetime comes from expires_in, else from the
// JWT's exp, else it is assumed.
func TestNewTokenExpiry(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(time.Hour)
	jwt := "eyJhbGciOiJSUzI1NiJ9." + b64(fmt.Sprintf(`{"exp":%d,"sub":"sink"}`, exp.Unix())) + ".c2ln"
	for _, tc := range []struct {
		tok        token
		wantExpiry time.Time
	}{
		{newToken(oauth2Token("opaque", now.Add(100*time.Second)), now), now.Add(100 * time.Second)},
		{newToken(oauth2Token(jwt, time.Time{}), now), exp},
		{newToken(oauth2Token("opaque", time.Time{}), now), now.Add(unknownLifetime)},
	} {
		if !tc.tok.expiry.Equal(tc.wantExpiry) {
			t.Errorf("%s: expiry %v, want %v", tc.tok.value, tc.tok.expiry, tc.wantExpiry)
		}
		life := tc.wantExpiry.Sub(now)
		if want := now.Add(refreshAfter(life)); !tc.tok.refreshAt.Equal(want) {
			t.Errorf("%s: refresh at %v, want %v (%v into %v)", tc.tok.value, tc.tok.refreshAt, want, refreshAfter(life), life)
		}
	}
	// 80% of a long life; a 30 s buffer for a shorter one; half of a
	// life too short for both.
	for life, want := range map[time.Duration]time.Duration{
		time.Hour: 48 * time.Minute, 5 * time.Minute: 4 * time.Minute, 2 * time.Minute: 90 * time.Second,
		time.Minute: 30 * time.Second, 8 * time.Second: 4 * time.Second, 0: 0,
	} {
		if got := refreshAfter(life); got != want {
			t.Errorf("refreshAfter(%v) = %v, want %v", life, got, want)
		}
	}
}

package registry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"sink/config"
)

const avroA = `{"type":"record","name":"A","fields":[{"name":"x","type":"long"}]}`

// fakeRegistry is franz-go's in-memory registry behind a switch that makes
// it fail like a registry in trouble, and a counter of the requests that
// reached it.
type fakeRegistry struct {
	reg      *srfake.Registry
	srv      *httptest.Server
	requests atomic.Int64
	fail     atomic.Int32 // HTTP status to answer with, 0 = serve
}

func newFake(t *testing.T) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{reg: srfake.NewRegistry()}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if code := f.fail.Load(); code != 0 {
			http.Error(w, "failing on purpose", int(code))
			return
		}
		f.reg.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func newClient(t *testing.T, url string, opts Options) *Client {
	t.Helper()
	c, err := New(config.SchemaRegistry{URLs: []string{url}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSchemaFetchedOnceAndCached(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	c := newClient(t, f.srv.URL, Options{})
	id, err := c.Register(ctx, "t-value", sr.TypeAvro, avroA)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	before := f.requests.Load()
	for range 3 {
		s, err := c.Schema(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.ID != id || s.Type != sr.TypeAvro || !strings.Contains(s.Text, `"name":"A"`) || s.References != nil {
			t.Fatalf("schema %+v", s)
		}
	}
	if n := f.requests.Load() - before; n != 1 {
		t.Fatalf("%d requests for three lookups of one id; want 1", n)
	}
	if st := c.Stats(); st != (Stats{Hits: 2, Misses: 1, Fetches: 1, Entries: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

// Cached ids keep working through an outage; an id not seen before is a
// retriable error, not a bad record, and works once the registry is back.
func TestOutage(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	c := newClient(t, f.srv.URL, Options{})
	id1, err := c.Register(ctx, "a-value", sr.TypeAvro, avroA)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := c.Register(ctx, "b-value", sr.TypeAvro, strings.Replace(avroA, `"A"`, `"B"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Schema(ctx, id1); err != nil {
		t.Fatal(err)
	}

	for _, status := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusUnauthorized, http.StatusTooManyRequests} {
		f.fail.Store(int32(status))
		if _, err := c.Schema(ctx, id1); err != nil {
			t.Fatalf("HTTP %d: cached id: %v", status, err)
		}
		_, err := c.Schema(ctx, id2)
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBadRecord) {
			t.Fatalf("HTTP %d: uncached id: %v; want ErrUnavailable", status, err)
		}
	}
	f.fail.Store(0)
	if s, err := c.Schema(ctx, id2); err != nil || s.ID != id2 {
		t.Fatalf("after the outage: %v, %v", s, err)
	}

	// A registry that is gone altogether (connection refused).
	f.srv.Close()
	if _, err := c.Schema(ctx, id1); err != nil {
		t.Fatalf("cached id with the registry gone: %v", err)
	}
	if _, err := c.Schema(ctx, id2+100); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("uncached id with the registry gone: %v; want ErrUnavailable", err)
	}
}

func TestClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, "http://"+addr, Options{})
	_, err = c.Schema(context.Background(), 1)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "schema id 1") {
		t.Fatalf("closed port: %v", err)
	}
	if err := c.Check(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Check on a closed port: %v", err)
	}
	// A cancelled context is the caller stopping, also not the record's fault.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Schema(ctx, 2); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// An id the registry says does not exist is a bad record, remembered for
// NotFoundTTL; a 404 without the registry's error code (a wrong URL path)
// is not.
func TestNotFound(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	c := newClient(t, f.srv.URL, Options{NotFoundTTL: time.Hour})
	now := time.Now()
	c.now = func() time.Time { return now }

	_, err := c.Schema(ctx, 999)
	if !errors.Is(err, ErrBadRecord) || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "schema id 999: the registry says it does not exist (40403") {
		t.Fatalf("unknown id: %v", err)
	}
	before := f.requests.Load()
	if _, err2 := c.Schema(ctx, 999); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second lookup: %v", err2)
	}
	if f.requests.Load() != before {
		t.Fatal("a remembered unknown id was asked for again")
	}
	// After the TTL the registry is asked again (and now knows the id:
	// srfake hands out ids from 1, so register until 999 would exist is
	// impractical; check the request instead).
	now = now.Add(2 * time.Hour)
	if _, err := c.Schema(ctx, 999); !errors.Is(err, ErrBadRecord) {
		t.Fatal(err)
	}
	if f.requests.Load() != before+1 {
		t.Fatal("an expired unknown id was not asked for again")
	}

	wrong := newClient(t, f.srv.URL+"/apis/wrong/path", Options{})
	_, err = wrong.Schema(ctx, 1)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "do schema_registry.urls point at the registry's API") {
		t.Fatalf("wrong path: %v", err)
	}
}

func TestLRUEviction(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	c := newClient(t, f.srv.URL, Options{CacheSize: 2})
	var ids []int
	for _, name := range []string{"A", "B", "C"} {
		id, err := c.Register(ctx, name+"-value", sr.TypeAvro, strings.Replace(avroA, `"A"`, `"`+name+`"`, 1))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	get := func(id int) {
		t.Helper()
		if _, err := c.Schema(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	get(ids[0])
	get(ids[1])
	get(ids[0]) // A is now the most recently used
	get(ids[2]) // evicts B
	if st := c.Stats(); st.Entries != 2 || st.Fetches != 3 {
		t.Fatalf("stats %+v", st)
	}
	f.fail.Store(http.StatusServiceUnavailable)
	get(ids[0])
	get(ids[2])
	if _, err := c.Schema(ctx, ids[1]); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("evicted id during an outage: %v; want ErrUnavailable", err)
	}
}

// Concurrent lookups of one uncached id make one request.
func TestSingleFlight(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	c := newClient(t, f.srv.URL, Options{})
	id, err := c.Register(ctx, "t-value", sr.TypeAvro, avroA)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate
		f.srv.Config.Handler.ServeHTTP(w, r)
	}))
	defer slow.Close()
	c = newClient(t, slow.URL, Options{})
	before := f.requests.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := c.Schema(ctx, id)
			errs <- err
		})
	}
	time.Sleep(50 * time.Millisecond) // let all eight block on the one request
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.requests.Load() - before; n != 1 {
		t.Fatalf("%d requests for 8 concurrent lookups; want 1", n)
	}
}

// References are fetched with the schema, dependencies first.
func TestReferences(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	c := newClient(t, f.srv.URL, Options{})
	const money = `syntax = "proto3"; package m; message Money { int64 units = 1; }`
	const line = `syntax = "proto3"; package l; import "m/money.proto"; message Line { m.Money price = 1; }`
	const order = `syntax = "proto3"; package o; import "l/line.proto"; import "m/money.proto"; message Order { repeated l.Line lines = 1; m.Money total = 2; }`
	if _, err := c.Register(ctx, "money", sr.TypeProtobuf, money); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(ctx, "line", sr.TypeProtobuf, line, sr.SchemaReference{Name: "m/money.proto", Subject: "money", Version: 1}); err != nil {
		t.Fatal(err)
	}
	id, err := c.Register(ctx, "orders-value", sr.TypeProtobuf, order,
		sr.SchemaReference{Name: "l/line.proto", Subject: "line", Version: 1},
		sr.SchemaReference{Name: "m/money.proto", Subject: "money", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Schema(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range s.References {
		names = append(names, r.Name)
		if r.Type != sr.TypeProtobuf || r.Text == "" {
			t.Fatalf("reference %+v", r)
		}
	}
	if got := strings.Join(names, ","); got != "m/money.proto,l/line.proto" {
		t.Fatalf("references in order %s; want m/money.proto,l/line.proto", got)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(config.SchemaRegistry{}, Options{}); err == nil || !strings.Contains(err.Error(), "no registry configured") {
		t.Fatalf("no URLs: %v", err)
	}
	_, err := New(config.SchemaRegistry{URLs: []string{"http://r:1"}, Username: "u", PasswordFile: "/nonexistent/pw"}, Options{})
	if err == nil || !strings.Contains(err.Error(), "schema_registry.password_file: open /nonexistent/pw") {
		t.Fatalf("missing password file: %v", err)
	}
}

// Basic auth reaches the registry.
func TestBasicAuth(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		got.Store(u + ":" + p)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"compatibilityLevel":"BACKWARD"}`))
	}))
	defer srv.Close()
	c, err := New(config.SchemaRegistry{URLs: []string{srv.URL}, Username: "key", Password: "secret"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got.Load() != "key:secret" {
		t.Fatalf("basic auth %v", got.Load())
	}
}

package metrics

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestReadinessCached: however often /readyz is asked, ClickHouse gets one
// ping per readyCache, and the answer after that is a new ping's.
func TestReadinessCached(t *testing.T) { synctest.Test(t, testReadinessCached) }

func testReadinessCached(t *testing.T) {
	m := New("grp")
	m.Assigned(1)
	var pings atomic.Int32
	m.SetPinger(func(context.Context) error { pings.Add(1); return nil })
	for range 100 {
		if ok, why := m.Ready(context.Background()); !ok {
			t.Fatalf("Ready: %s", why)
		}
		time.Sleep(readyCache / 200)
	}
	if n := pings.Load(); n != 1 {
		t.Fatalf("%d pings for 100 /readyz within %s, want 1", n, readyCache)
	}
	time.Sleep(readyCache)
	m.Ready(context.Background())
	if n := pings.Load(); n != 2 {
		t.Fatalf("%d pings after %s more, want 2", n, readyCache)
	}
}

// TestServerTimeouts: a client that sends its headers too slowly, one that
// keeps a connection idle, and an answer that takes too long to write are
// each cut at the server's timeout (short ones here), not held forever.
func TestServerTimeouts(t *testing.T) {
	to := timeouts{header: 200 * time.Millisecond, read: 400 * time.Millisecond, write: 300 * time.Millisecond, idle: 300 * time.Millisecond}
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(2 * to.write)
		fmt.Fprint(w, "late")
	})
	s, err := serve("127.0.0.1:0", mux, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })

	// closedWithin fails unless the server closes conn within d.
	closedWithin := func(what string, conn net.Conn, r *bufio.Reader, d time.Duration) {
		t.Helper()
		start := time.Now()
		_ = conn.SetReadDeadline(start.Add(5 * time.Second))
		_, err := io.Copy(io.Discard, r)
		if took := time.Since(start); err != nil || took > d {
			t.Errorf("%s: connection closed after %s (%v), want by the server within %s", what, took.Round(time.Millisecond), err, d)
		}
	}
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn, bufio.NewReader(conn)
	}

	conn, r := dial()
	fmt.Fprint(conn, "GET /fast HTTP/1.1\r\nHost: x\r\n") // never ends its headers
	closedWithin("headers sent too slowly", conn, r, 2*time.Second)

	conn, r = dial()
	fmt.Fprint(conn, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /fast: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	closedWithin("idle keep-alive connection", conn, r, 2*time.Second)

	start := time.Now()
	res, err := http.Get("http://" + s.Addr() + "/slow")
	if err == nil {
		body, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		if rerr == nil && strings.Contains(string(body), "late") {
			t.Errorf("an answer written %s after the request arrived, past the write timeout %s, was delivered", 2*to.write, to.write)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the slow answer held the client %s", took)
	}
}

// TestServeHandlerTimeouts: the server that sink run starts has every
// timeout set.
func TestServeHandlerTimeouts(t *testing.T) {
	s, err := ServeHandler("127.0.0.1:0", http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if s.srv.ReadHeaderTimeout <= 0 || s.srv.ReadTimeout <= 0 || s.srv.IdleTimeout <= 0 || serverTimeouts.write <= 0 {
		t.Fatalf("timeouts: header %s, read %s, idle %s, write %s; want each set", s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.IdleTimeout, serverTimeouts.write)
	}
}

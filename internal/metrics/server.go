package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Pinger checks that ClickHouse answers; /readyz calls it.
type Pinger func(ctx context.Context) error

// pingTimeout bounds the ClickHouse check of one /readyz request: a probe
// that hangs is itself a failure, and kubelet's default timeout is 1s.
const pingTimeout = 900 * time.Millisecond

// readyCache is how long one ClickHouse ping answers /readyz: however
// often /readyz is asked (a probe of every replica, a script in a loop,
// anyone who can reach the port), ClickHouse gets at most one ping per
// readyCache from this process, and a change of its health shows within
// that much. The kubelet probes every 10 s by default.
const readyCache = 2 * time.Second

// SetPinger sets the ClickHouse check used by /readyz, its answers kept for
// readyCache. Until it is set, /readyz answers 503.
func (m *Metrics) SetPinger(p Pinger) {
	if m == nil {
		return
	}
	c := &cachedPing{ping: p, now: m.now}
	cp := Pinger(c.Ping)
	m.ping.Store(&cp)
}

// cachedPing is a Pinger whose answer is kept for readyCache. A request
// that comes while a ping is out waits for it and shares its answer.
type cachedPing struct {
	ping Pinger
	now  func() time.Time
	mu   sync.Mutex
	at   time.Time // when the kept answer came (zero: none yet)
	err  error
}

// Ping is the kept answer, or a new ping's when it is older than readyCache.
func (c *cachedPing) Ping(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && c.now().Sub(c.at) < readyCache {
		return c.err
	}
	c.err = c.ping(ctx)
	c.at = c.now()
	return c.err
}

// Ready says whether the connector can do its job: it has joined its
// consumer group and owns partitions, and ClickHouse answers a ping. The
// reason is one line for the 503 body.
func (m *Metrics) Ready(ctx context.Context) (bool, string) {
	if m == nil {
		return false, "no metrics"
	}
	if !m.joined.Load() {
		return false, fmt.Sprintf("consumer has not joined group %q or has no partitions assigned", m.group)
	}
	p := m.ping.Load()
	if p == nil {
		return false, "clickhouse: not connected yet"
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := (*p)(ctx); err != nil {
		return false, "clickhouse: " + oneLine(err.Error())
	}
	return true, "ok"
}

// Handler serves /metrics, /healthz and /readyz.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		// The process answers: that is all liveness means here. A stuck
		// pipeline shows up in /readyz and sink_last_commit_age_seconds,
		// where restarting would not help anyway.
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := m.Ready(r.Context())
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	return mux
}

// Server is the HTTP endpoint of one connector.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Serve listens on addr and serves m in the background. The listen happens
// here, so a taken port fails at start with an error naming the address.
func Serve(addr string, m *Metrics) (*Server, error) {
	return ServeHandler(addr, m.Handler())
}

// ServeHandler is Serve for a handler that wraps m.Handler() (the status
// endpoints of internal/status).
func ServeHandler(addr string, h http.Handler) (*Server, error) {
	return serve(addr, h, serverTimeouts)
}

// serve is ServeHandler with the timeouts to.
func serve(addr string, h http.Handler, to timeouts) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return nil, fmt.Errorf("http.listen %s: %w", addr, err)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           withWriteTimeout(h, to.write),
			ReadHeaderTimeout: to.header,
			ReadTimeout:       to.read,
			IdleTimeout:       to.idle,
		},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// timeouts are the server's: a request has header (its headers) and read
// (the whole request; the endpoints take no body) to arrive, its answer
// write to be written, and a connection is closed after idle without a
// request. A slow or idle client so holds a connection and its goroutine
// for a bounded time. The profiles that run for ?seconds=N move their own
// deadlines past these (internal/status).
type timeouts struct{ header, read, write, idle time.Duration }

var serverTimeouts = timeouts{header: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 2 * time.Minute}

// withWriteTimeout sets each request's write deadline to d from its start,
// as http.Server.WriteTimeout would, but as a deadline the handler can
// move (http.ResponseController): net/http/pprof refuses a CPU profile
// longer than the server's WriteTimeout field.
func withWriteTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		h.ServeHTTP(w, r)
	})
}

// Addr is the address the server listens on (the real port when the
// configured one was 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, waits for requests in progress until ctx ends,
// then closes what is left.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

func oneLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return s[:i]
		}
	}
	return s
}

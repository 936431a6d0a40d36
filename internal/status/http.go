package status

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"sink/config"
	"sink/internal/errtext"
	"sink/internal/metrics"
)

// Controller is the running connector, as the endpoints see it: the
// pipeline (pipeline.Pipeline implements it).
type Controller interface {
	// Status returns the last published snapshot (nil before the first).
	Status() *Snapshot
	// Pause asks the owner to stop fetching, flush and commit, and stay
	// paused; Resume to go on. Both return once the owner has taken the
	// request, with the state it is in then, or ErrConflict (wrapped)
	// when the state does not allow it.
	Pause(ctx context.Context) (State, error)
	Resume(ctx context.Context) (State, error)
}

// Lifecycle is a Controller that can also stop the connector in place
// and move its offsets while it is stopped: Kafka Connect's PUT
// /connectors/NAME/stop and its offsets API (KIP-875). `sink run`'s
// lifecycle (assemble.Lifecycle) implements it; the stopped connector's
// Resume starts it again. Every method is safe from any goroutine.
type Lifecycle interface {
	Controller
	// Stop flushes, commits and leaves the consumer group, as SIGTERM
	// does, but the process and its HTTP listener stay up, STOPPED. It
	// returns once the connector is STOPPED, or when ctx ends with the
	// stop under way (nil: the request was taken either way).
	Stop(ctx context.Context) error
	// Offsets are the group's committed offsets, in any state.
	Offsets(ctx context.Context) ([]Offset, error)
	// AlterOffsets moves the given partitions' offsets and ResetOffsets
	// every partition's, to where kafka.start_offset says; both only while
	// STOPPED (ErrNotStopped otherwise).
	AlterOffsets(ctx context.Context, offsets []Offset) error
	ResetOffsets(ctx context.Context) error
}

// The errors a Controller's answer wraps, each answered with its own
// status (errorStatus).
var (
	// ErrConflict is a request the connector's state does not allow
	// (stopping, failed, not started), or that another member of its
	// group prevents.
	ErrConflict = errors.New("not possible in the connector's state")
	// ErrNotStopped is an offsets change while the connector is not
	// STOPPED.
	ErrNotStopped = errors.New("the connector is not stopped")
	// ErrBadRequest is a request whose content is wrong (an offset for a
	// partition the connector does not consume, a malformed body).
	ErrBadRequest = errors.New("bad request")
)

// errorStatus is the HTTP status that answers err, a Controller's error:
// 400 for a request wrong in itself or an offsets change while not
// stopped (Kafka Connect answers that with 400 too), 409 for one the
// state does not allow, 415 for a body that is not JSON, 504 when its
// time ran out, else 500.
func errorStatus(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, ErrNotStopped):
		return http.StatusBadRequest
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, errUnsupportedMedia):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// Info is what the endpoints know before the pipeline runs.
type Info struct {
	Name     string // the connector (and default group) name
	Version  string
	Delivery string // at_least_once or exactly_once
	// Admin turns on the endpoints that change something (pause, resume,
	// stop, the offsets' PATCH and DELETE, the profiles); Token, when not
	// empty, is the bearer token they require.
	Admin bool
	Token string
	// Config is the connector's config as GET /connectors/NAME/config
	// serves it (Kafka Connect's keys where they exist, secrets masked;
	// connectimport.ConnectConfig); nil serves just the name.
	Config map[string]string
	// Loopback: the listener is on a loopback address. Without a token,
	// the admin endpoints then also require a loopback Host header, so a
	// web page that makes a browser resolve its own name to 127.0.0.1
	// (DNS rebinding) cannot reach them.
	Loopback bool
	// Hosts are the names, besides IP addresses and localhost, that a
	// request's Host header may give (http.allowed_hosts, and the
	// listener's own name): a leading "*." admits any name below it.
	Hosts []string
}

// InfoFor is the Info of the connector cfg configures, running version.
func InfoFor(cfg *config.Config, version string) Info {
	return Info{
		Name: cfg.Name, Version: version, Delivery: cfg.Delivery,
		Admin: cfg.HTTP.Admin, Token: cfg.HTTP.AdminToken.Reveal(),
		Loopback: config.LoopbackListen(cfg.HTTP.Listen),
		Hosts:    append(slices.Clone(cfg.HTTP.AllowedHosts), listenName(cfg.HTTP.Listen)...),
	}
}

// listenName is the host name of the listen address (host:port), when it
// is a name rather than an IP address or empty.
func listenName(listen string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || net.ParseIP(strings.Trim(host, "[]")) != nil {
		return nil
	}
	return []string{host}
}

// WorkerID is the worker id /status reports for a listener on listen, as
// Kafka Connect reports its worker's host:port: this host's name (the
// pod's, in Kubernetes) and the listener's port.
func WorkerID(listen string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return listen
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return host
	}
	return net.JoinHostPort(host, port)
}

// Handler serves the status endpoints of one connector.
type Handler struct {
	info     Info
	workerID string
	tokenSum [sha256.Size]byte
	ctl      atomic.Pointer[Controller]
	now      func() time.Time
	m        *metrics.Metrics
	start    time.Time
	csrf     *http.CrossOriginProtection
}

// New makes the handler; workerID is the listener's address, reported as
// Kafka Connect reports its worker. m (may be nil) gets the state metric.
func New(info Info, workerID string, m *metrics.Metrics) *Handler {
	h := &Handler{info: info, workerID: workerID, now: time.Now, m: m, csrf: http.NewCrossOriginProtection()}
	h.start = h.now()
	if info.Token != "" {
		h.tokenSum = sha256.Sum256([]byte(info.Token))
	}
	h.csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))
	m.SetState(string(Starting), stateNames)
	return h
}

var stateNames = func() []string {
	out := make([]string, len(States))
	for i, s := range States {
		out[i] = string(s)
	}
	return out
}()

// StateNames are the names of States, for the state metric
// (metrics.SetState).
func StateNames() []string { return slices.Clone(stateNames) }

// SetController connects the running pipeline; until then /status reports
// STARTING and pause and resume answer 409.
func (h *Handler) SetController(c Controller) { h.ctl.Store(&c) }

// Routes returns a handler that serves the status endpoints and passes
// every other path to next (the metrics and health endpoints). Every path
// but /healthz (which says only "ok") reveals state or starts work, so
// Routes refuses, before any of them, a request a browser makes for a page
// of another site and one whose Host header is not this sink's (protect).
func (h *Handler) Routes(next http.Handler) http.Handler {
	return h.protect(h.mux(next))
}

// mux routes the paths to the endpoints.
func (h *Handler) mux(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("/{$}", h.page)
	mux.HandleFunc("/status", h.getStatus)
	mux.HandleFunc("/pause", h.admin(http.MethodPost, pauseOp))
	mux.HandleFunc("/resume", h.admin(http.MethodPost, resumeOp))
	// The same, where Kafka Connect's REST API has them, and the rest of
	// what a script of Connect's REST API reads and does (connect.go).
	mux.HandleFunc("/connectors", h.connectors)
	mux.HandleFunc("/connectors/{name}", h.named(h.getInfo))
	mux.HandleFunc("/connectors/{name}/config", h.named(h.getConfig))
	mux.HandleFunc("/connectors/{name}/tasks", h.named(h.getTasks))
	mux.HandleFunc("/connectors/{name}/status", h.named(h.getStatus))
	mux.HandleFunc("/connectors/{name}/offsets", h.named(h.offsetsEndpoint()))
	mux.HandleFunc("/connectors/{name}/pause", h.named(h.admin(http.MethodPut, pauseOp)))
	mux.HandleFunc("/connectors/{name}/resume", h.named(h.admin(http.MethodPut, resumeOp)))
	mux.HandleFunc("/connectors/{name}/stop", h.named(h.admin(http.MethodPut, stopOp)))
	mux.Handle("/debug/pprof/", h.guard(http.MethodGet, profiles()))
	return mux
}

// protect refuses, on every path but /healthz, the requests a web page of
// another site can make a browser send:
//
//   - Sec-Fetch-Site: cross-site, which a browser sends with any request
//     a page of another site causes, GETs and navigations included: such a
//     page must not start a CPU profile or read the status. Requests that
//     are not a browser's (curl, Prometheus, the kubelet) send no such
//     header, and the status page's own requests are same-origin.
//   - a Host header that does not name this sink (DNS rebinding: a page
//     whose own name its DNS answers with 127.0.0.1 or the pod's address
//     then reads this port as its own origin): the Host must be an IP
//     address, localhost, or one of Info.Hosts. A request with the admin
//     bearer token may give any Host: a browser never sends that token
//     on its own.
func (h *Handler) protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
		case r.Header.Get("Sec-Fetch-Site") == "cross-site":
			writeError(w, http.StatusForbidden, "cross-origin request refused: a page of another site (Sec-Fetch-Site: cross-site) may not read or start anything here; open the address directly")
			return
		case !h.hostAllowed(r.Host) && (h.info.Token == "" || !h.tokenOK(r)):
			writeError(w, http.StatusForbidden, fmt.Sprintf("Host %q does not name this sink: use its IP address or a loopback host (localhost), or list the name in http.allowed_hosts (a browser page whose name resolves here, DNS rebinding, must not read it)", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a request's Host header (host[:port]) names
// this sink: empty (HTTP/1.0), an IP address, localhost, or one of
// Info.Hosts ("*.example.com": any name below example.com).
func (h *Handler) hostAllowed(hostport string) bool {
	host := hostport
	if hp, _, err := net.SplitHostPort(hostport); err == nil {
		host = hp
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" || host == "localhost" || net.ParseIP(host) != nil {
		return true
	}
	for _, a := range h.info.Hosts {
		a = strings.TrimSuffix(strings.ToLower(a), ".")
		if host == a || (strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:])) {
			return true
		}
	}
	return false
}

//go:embed page.html
var pageHTML []byte

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page loads nothing from elsewhere; say so to the browser.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(pageHTML)
}

// Report is the body of GET /status, laid out like Kafka Connect's
// GET /connectors/NAME/status (name, connector, tasks, type) with the
// sink's own numbers beside it.
type Report struct {
	Name      string      `json:"name"`
	Type      string      `json:"type"`
	Version   string      `json:"version"`
	Delivery  string      `json:"delivery"`
	Connector TaskState   `json:"connector"`
	Tasks     []TaskState `json:"tasks"`
	// StateSince is when the state was entered; GeneratedAt when the
	// owner built the numbers (at most a second before the request).
	StateSince   time.Time `json:"state_since"`
	GeneratedAt  time.Time `json:"generated_at"`
	Backpressure bool      `json:"fetch_paused_by_backpressure"`
	Admin        bool      `json:"admin_endpoints"`
	// GroupProtocol: the consumer group protocol the group runs
	// (classic or consumer); absent until the sink has joined.
	GroupProtocol string      `json:"group_protocol,omitempty"`
	Tables        []Table     `json:"tables"`
	Partitions    []Partition `json:"partitions"`
	// Budgets: each server's budget of INSERTs per minute
	// (clickhouse.max_inserts_per_minute), absent without one.
	Budgets []Budget `json:"insert_budgets,omitempty"`
	// ErrorValues says how the error texts (the traces, the tables' last
	// errors) are served: "redacted" (the values they quote replaced by
	// "…", the default) or "full" (?error_values=full, an admin request).
	ErrorValues string `json:"error_values"`
}

// Redacted is rep with the values its error texts quote taken out
// (errtext.Redact): a copy, rep's tables and tasks untouched.
func (rep Report) Redacted() Report {
	rep.ErrorValues = "redacted"
	rep.Connector.Trace = errtext.Redact(rep.Connector.Trace)
	rep.Tasks = slices.Clone(rep.Tasks)
	for i := range rep.Tasks {
		rep.Tasks[i].Trace = errtext.Redact(rep.Tasks[i].Trace)
	}
	rep.Tables = slices.Clone(rep.Tables)
	for i, t := range rep.Tables {
		if t.LastError != nil {
			e := *t.LastError
			e.Message = errtext.Redact(e.Message)
			rep.Tables[i].LastError = &e
		}
	}
	return rep
}

// TaskState is a connector's or task's state as Kafka Connect reports it;
// Trace is the error of a FAILED one, Version the running build's (Connect
// gives the connector plugin's).
type TaskState struct {
	ID       *int   `json:"id,omitempty"`
	State    State  `json:"state"`
	WorkerID string `json:"worker_id"`
	Version  string `json:"version"`
	Trace    string `json:"trace,omitempty"`
}

// Report builds the body of GET /status from the last snapshot, with the
// values that depend on the time of the request computed at now. A
// STOPPED connector has no task, as in Kafka Connect.
func (h *Handler) Report(now time.Time) Report {
	s := h.snapshot()
	rep := Report{
		Name: h.info.Name, Type: "sink", Version: h.info.Version, Delivery: h.info.Delivery,
		Connector:     TaskState{State: s.State, WorkerID: h.workerID, Version: h.info.Version, Trace: s.Error},
		StateSince:    s.Since,
		GeneratedAt:   s.At,
		Backpressure:  s.Backpressure,
		Admin:         h.info.Admin,
		GroupProtocol: s.GroupProtocol,
		Tables:        make([]Table, len(s.Tables)),
		Partitions:    make([]Partition, len(s.Partitions)),
		Budgets:       s.Budgets,
	}
	rep.Tasks = []TaskState{}
	if s.State != Stopped {
		id := 0
		rep.Tasks = append(rep.Tasks, TaskState{ID: &id, State: s.State, WorkerID: h.workerID, Version: h.info.Version, Trace: s.Error})
	}
	for i, t := range s.Tables {
		if t.LastInsert != nil {
			v := max(now.Sub(*t.LastInsert), 0).Seconds()
			t.SecondsSinceLastInsert = &v
		}
		rep.Tables[i] = t
	}
	for i, p := range s.Partitions {
		if p.LagRecords != nil {
			if v, ok := metrics.LagSeconds(*p.LagRecords, p.LastFetched, now); ok {
				p.LagSeconds = &v
			}
		}
		rep.Partitions[i] = p
	}
	return rep
}

// snapshot is the controller's last snapshot, or a STARTING one.
func (h *Handler) snapshot() *Snapshot {
	if c := h.ctl.Load(); c != nil {
		if s := (*c).Status(); s != nil {
			return s
		}
	}
	return &Snapshot{At: h.now(), State: Starting, Since: h.start}
}

// getStatus serves the Report with its error texts redacted
// (errtext.Redact: ClickHouse can quote a row's values in them), or, with
// ?error_values=full, whole: that needs what the admin endpoints need
// (http.admin on, and the bearer token or a loopback Host).
func (h *Handler) getStatus(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	rep := h.Report(h.now())
	switch r.URL.Query().Get("error_values") {
	case "":
	case "full":
		if !h.authorized(w, r) {
			return
		}
		rep.ErrorValues = "full"
		writeJSON(w, http.StatusOK, rep)
		return
	default:
		writeError(w, http.StatusBadRequest, "error_values: want full (the error texts with the values they quote; an admin request)")
		return
	}
	writeJSON(w, http.StatusOK, rep.Redacted())
}

// named answers 404 for a connector name that is not this one's.
func (h *Handler) named(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if name := r.PathValue("name"); name != h.info.Name {
			writeError(w, http.StatusNotFound, fmt.Sprintf("Connector %s not found (this sink runs %s)", name, h.info.Name))
			return
		}
		next(w, r)
	}
}

// adminOp is one change an admin endpoint asks the controller for: it
// returns the status and body of the answer (no body for 204).
type adminOp func(w http.ResponseWriter, r *http.Request, c Controller) (int, any, error)

// pauseOp and resumeOp answer 202, as Kafka Connect does: the change is
// asynchronous (PAUSING turns PAUSED once the open batches are committed;
// a stopped connector's resume starts it, STARTING then RUNNING).
func pauseOp(_ http.ResponseWriter, r *http.Request, c Controller) (int, any, error) {
	st, err := c.Pause(r.Context())
	return http.StatusAccepted, map[string]State{"state": st}, err
}

func resumeOp(_ http.ResponseWriter, r *http.Request, c Controller) (int, any, error) {
	st, err := c.Resume(r.Context())
	return http.StatusAccepted, map[string]State{"state": st}, err
}

// stopWait is how long PUT /connectors/NAME/stop waits for STOPPED before
// it answers (the flush goes on after; /status says when it is done):
// within the server's write timeout.
const stopWait = 20 * time.Second

// stopOp answers 204 with no body, as Kafka Connect does, once the
// connector is STOPPED or stopWait has passed with the stop under way.
func stopOp(_ http.ResponseWriter, r *http.Request, c Controller) (int, any, error) {
	lc, ok := c.(Lifecycle)
	if !ok {
		return 0, nil, fmt.Errorf("%w: this connector cannot stop in place", ErrConflict)
	}
	ctx, cancel := context.WithTimeout(r.Context(), stopWait)
	defer cancel()
	return http.StatusNoContent, nil, lc.Stop(ctx)
}

// admin guards an endpoint that changes something: method, admin switch,
// token (or loopback Host), cross-origin requests; then asks the
// controller with op and answers.
func (h *Handler) admin(method string, op adminOp) http.HandlerFunc {
	act := func(w http.ResponseWriter, r *http.Request) {
		c := h.ctl.Load()
		if c == nil {
			writeError(w, http.StatusConflict, "the connector is starting; try again once /status says RUNNING")
			return
		}
		code, body, err := op(w, r, *c)
		switch {
		case err != nil:
			h.writeControlError(w, err)
		case code == http.StatusNoContent:
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(code)
		default:
			writeJSON(w, code, body)
		}
	}
	return h.guard(method, h.csrf.Handler(http.HandlerFunc(act)))
}

// writeControlError answers a Controller's error with its status
// (errorStatus); an offsets change while not stopped gets Kafka Connect's
// own words.
func (h *Handler) writeControlError(w http.ResponseWriter, err error) {
	msg := err.Error()
	if errors.Is(err, ErrNotStopped) {
		msg = fmt.Sprintf("Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/%s/stop' endpoint (%s)", h.info.Name, msg)
	}
	writeError(w, errorStatus(err), msg)
}

// guard lets a request through to next only when the admin endpoints are
// on and the request may use them: the method, then authorized.
func (h *Handler) guard(method string, next http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if allow(w, r, method) && h.authorized(w, r) {
			next.ServeHTTP(w, r)
		}
	}
}

// authorized reports whether r may make an admin request: the admin
// endpoints are on, and r carries the token (or, with no token, names a
// loopback Host). Otherwise it answers the refusal.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case !h.info.Admin:
		writeError(w, http.StatusForbidden, "admin endpoints are off: set http.admin: true")
	case h.info.Token != "" && !h.tokenOK(r):
		w.Header().Set("WWW-Authenticate", `Bearer realm="sink"`)
		writeError(w, http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer $"+config.AdminTokenEnv+")")
	case h.info.Token == "" && !loopbackHost(r.Host):
		writeError(w, http.StatusForbidden, "without an admin token, the admin endpoints answer only requests to a loopback host (127.0.0.1, [::1], localhost)")
	default:
		return true
	}
	return false
}

// profiles serves Go's runtime profiles (net/http/pprof) under
// /debug/pprof/: heap, goroutine, allocs, a CPU profile for ?seconds=N,
// an execution trace. They are admin endpoints: a CPU profile or trace
// costs the process CPU while it runs, and a heap profile shows the
// program's internals.
func profiles() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", forSeconds(pprof.Profile, 30))
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", forSeconds(pprof.Trace, 1))
	return mux
}

// profileSlack is what a profile's deadlines allow beyond its seconds: to
// stop, encode and send it.
const profileSlack = 10 * time.Second

// forSeconds is a profile handler (CPU profile, trace) that runs for its
// ?seconds=N (def without one), with the connection's read and write
// deadlines moved past that: the server's timeouts
// (metrics.ServeHandler) are for the other endpoints, whose answers are
// ready at once.
func forSeconds(profile http.HandlerFunc, def float64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sec := def
		if v, err := strconv.ParseFloat(r.FormValue("seconds"), 64); err == nil && v > 0 {
			sec = min(v, 24*3600)
		}
		deadline := time.Now().Add(time.Duration(sec*float64(time.Second)) + profileSlack)
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(deadline)
		_ = rc.SetWriteDeadline(deadline)
		profile(w, r)
	}
}

// tokenOK compares the request's bearer token with the configured one in
// constant time: both are hashed first, so not even the length leaks.
func (h *Handler) tokenOK(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) == 1
}

// loopbackHost reports whether a request's Host header names a loopback
// address or localhost.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// allow answers 405 with an Allow header unless r's method is one of
// methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; use %s", r.Method, strings.Join(methods, " or ")))
	return false
}

// writeError answers in Kafka Connect's error shape.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error_code": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

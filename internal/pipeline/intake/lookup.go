package intake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"sink/internal/decode"
	"sink/internal/registry"
)

// Schema look-ups off the owner goroutine.
//
// A registry-framed record names its schema by id, and a Plan asks its
// decode.Registry for an id it has not seen. While Run's loop goes, that
// registry is a lookups: it answers from what it already has (a schema, or
// "the id does not exist"), and otherwise answers at once with a
// *lookupPending (an error matching decode.ErrUnavailable) and starts the
// look-up on a goroutine of its own. The record is then held with the rest
// of its partition (held.go), as for a registry that is down; the look-up's
// answer comes back to the owner as an event (lookedUp), which keeps
// it and makes the held records' next attempt due at once. So the owner
// never waits on the registry: a revoke, an ack or a shutdown is handled
// while a look-up stalls.
//
// Bounds: one look-up per schema id in flight (a second record of the id
// gets the same *lookupPending), each at most LookupTimeout; a held
// partition offers one record at a time, so the look-ups in flight are at
// most the assigned partitions' count. A look-up that fails (the registry
// is down) is handed to the first record that asks for the id afterwards,
// as the registry's error: the held records back off (heldRetryFirst to
// heldRetryMax) and ask again, which starts the next look-up. An id the
// registry says does not exist is remembered for badIDFor, so its records
// go to the dead-letter path without a look-up each.
//
// Before Run (New, sink check's SampleDrift) and during exactly-once
// recovery (a replay must decode its records now, or it would rebuild a
// batch without them) look-ups are synchronous: the caller's plan waits
// for the registry, bounded by decode's own look-up timeout.
type lookups struct {
	reg   decode.Registry
	now   func() time.Time
	async bool // Run's loop: answer at once, look up on a goroutine

	// Owner goroutine only.
	inflight map[int]bool
	known    map[int]lookupEntry
	failed   map[int]error // a look-up's error not yet handed to a record

	// Set by Run: the look-ups' context (canceled when Run ends), and
	// where their answers go (dropped once Run made its last commit).
	ctx    context.Context
	cancel context.CancelFunc
	post   func(lookupResult)
	wg     sync.WaitGroup
}

// LookupTimeout bounds one look-up of a schema id (with its references).
// A registry that answers at all answers in milliseconds; the records of
// an id whose look-up timed out are asked for again after the held
// records' backoff.
const LookupTimeout = 5 * time.Second

// badIDFor is how long an id the registry said does not exist is
// answered as such without asking again (the registry client remembers it
// longer, so asking again costs no request then either).
const badIDFor = 10 * time.Second

// maxKnown bounds the answers kept; past it they start over, and an id is
// looked up again (from the registry client's cache) when next asked for.
// A topic carries a handful of ids, one per producer schema version.
const maxKnown = 1000

type lookupEntry struct {
	schema  *registry.Schema
	err     error     // an ErrBadRecord-wrapped answer, with schema nil
	expires time.Time // for err only
}

// lookupResult is a finished look-up, handed to the owner.
type lookupResult struct {
	id     int
	schema *registry.Schema
	err    error
}

// lookupPending is the answer for a schema id whose look-up is running: the
// record waits for it (it matches decode.ErrUnavailable), and the held
// records are tried again when it ends, not after a backoff.
type lookupPending struct{ id int }

func (e *lookupPending) Error() string {
	return fmt.Sprintf("schema id %d: asking the schema registry", e.id)
}

func (e *lookupPending) Unwrap() error { return registry.ErrUnavailable }

// isLookupPending reports whether err holds a record only until a running
// look-up ends.
func isLookupPending(err error) bool {
	var lp *lookupPending
	return errors.As(err, &lp)
}

func newLookups(reg decode.Registry, now func() time.Time) *lookups {
	return &lookups{reg: reg, now: now, inflight: map[int]bool{}, known: map[int]lookupEntry{}, failed: map[int]error{}}
}

// Schema is decode.Registry's method: see the top of this file.
func (l *lookups) Schema(ctx context.Context, id int) (*registry.Schema, error) {
	if !l.async {
		return l.reg.Schema(ctx, id)
	}
	if e, ok := l.known[id]; ok {
		if e.err == nil || l.now().Before(e.expires) {
			return e.schema, e.err
		}
		delete(l.known, id)
	}
	if err, ok := l.failed[id]; ok {
		delete(l.failed, id) // the next record that asks starts a look-up
		return nil, err
	}
	if !l.inflight[id] {
		l.inflight[id] = true
		l.start(id)
	}
	return nil, &lookupPending{id: id}
}

// start runs the look-up of id on its own goroutine.
func (l *lookups) start(id int) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(l.ctx, LookupTimeout)
		s, err := l.reg.Schema(ctx, id)
		cancel()
		l.post(lookupResult{id: id, schema: s, err: err})
	}()
}

// done keeps a look-up's answer; the owner calls it (lookedUp).
func (l *lookups) done(r lookupResult) {
	delete(l.inflight, r.id)
	switch {
	case r.err == nil:
		l.keep(r.id, lookupEntry{schema: r.schema})
	case errors.Is(r.err, registry.ErrBadRecord):
		l.keep(r.id, lookupEntry{err: r.err, expires: l.now().Add(badIDFor)})
	default:
		l.failed[r.id] = r.err
	}
}

func (l *lookups) keep(id int, e lookupEntry) {
	if len(l.known) >= maxKnown {
		clear(l.known)
	}
	l.known[id] = e
}

// begin makes look-ups asynchronous for Run's loop: answers go to post.
func (l *lookups) begin(post func(lookupResult)) {
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.post, l.async = post, true
}

// end cancels the look-ups still running and waits for their goroutines
// for at most d; it reports whether they all returned.
func (l *lookups) end(d time.Duration) bool {
	l.async = false
	if l.cancel != nil {
		l.cancel()
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// lookedUp is a schema-registry look-up's answer.
type lookedUp struct {
	in *Intake
	r  lookupResult
}

// Apply keeps the answer and lets the held records try again at once.
func (e lookedUp) Apply(context.Context) {
	e.in.look.done(e.r)
	e.in.held.Kick()
}

// Lookups is what the plans ask for schemas: the look-ups when a schema
// registry is configured, else nil (Compile then refuses the
// registry-framed formats).
func (in *Intake) Lookups() decode.Registry {
	if in.look == nil {
		return nil
	}
	return in.look
}

// BeginLookups makes the look-ups asynchronous for Run's loop: their
// answers come back as events.
func (in *Intake) BeginLookups() {
	if in.look != nil {
		in.look.begin(func(r lookupResult) { in.own.Post(lookedUp{in: in, r: r}) })
	}
}

// EndLookups cancels the look-ups still running and waits for their
// goroutines for at most d; it reports whether they all returned.
func (in *Intake) EndLookups(d time.Duration) bool {
	return in.look == nil || in.look.end(d)
}

// SyncLookups runs f with look-ups that wait for the registry (exactly-once
// recovery: a replayed batch must decode every record it had).
func (in *Intake) SyncLookups(f func()) {
	if in.look == nil || !in.look.async {
		f()
		return
	}
	in.look.async = false
	defer func() { in.look.async = true }()
	f()
}

package assemble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/command/groupoffsets"
	"sink/internal/consumer"
	"sink/internal/metrics"
	"sink/internal/offsets"
	"sink/internal/pipeline"
	"sink/internal/status"
)

// Instance is one run of the connector, which Lifecycle starts, runs and
// stops: a pipeline with its consumer attached (Parts.Start builds one).
type Instance interface {
	status.Controller
	// Run consumes until ctx ends, then flushes and commits (pipeline.Run).
	Run(ctx context.Context) error
	// Close closes the consumer, leaving the group; after Run.
	Close()
}

// Start builds what a run needs, as `sink run` always did: the pipeline
// over the parts (its tables described, created when asked), the
// exactly-once check, and the consumer, which joins the group.
func (p *Parts) Start(ctx context.Context, cfg *config.Config, log zerolog.Logger) (Instance, error) {
	pl, err := p.Pipeline(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	log.Debug().Interface("parts", p.Summary()).Msg("assembled")
	if cfg.ExactlyOnce() {
		if err := pl.CheckExactlyOnce(ctx); err != nil {
			return nil, err
		}
	}
	cons, err := p.Consumer(ctx, cfg, log, pl)
	if err != nil {
		return nil, err
	}
	return instance{pl, cons}, nil
}

// instance is the pipeline and the consumer Start made.
type instance struct {
	*pipeline.Pipeline
	cons *consumer.Consumer
}

func (i instance) Close() { i.cons.Close() }

// StartError is a run that could not be built (Start failed): the caller
// tells it from a run that failed, since a signal during a slow start is
// a clean stop.
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// OffsetsIO is what the lifecycle reads and moves the group's offsets
// with: groupoffsets over the daemon's own clients (GroupOffsets).
type OffsetsIO interface {
	Committed(ctx context.Context) ([]groupoffsets.Partition, error)
	Reset(ctx context.Context, r groupoffsets.Reset, out io.Writer) error
	Close()
}

// GroupOffsets is the OffsetsIO of cfg's group: an admin client that
// joins no group (closed by Close) and the ClickHouse connection of parts.
func GroupOffsets(cfg *config.Config, parts *Parts) (OffsetsIO, error) {
	g, err := groupoffsets.OpenGroup(cfg)
	if err != nil {
		return nil, err
	}
	return groupIO{cfg: cfg, g: g, conn: parts.Sink.Conn}, nil
}

type groupIO struct {
	cfg  *config.Config
	g    *groupoffsets.Group
	conn func() driver.Conn
}

func (g groupIO) Committed(ctx context.Context) ([]groupoffsets.Partition, error) {
	return g.g.Committed(ctx)
}

func (g groupIO) Reset(ctx context.Context, r groupoffsets.Reset, out io.Writer) error {
	return r.RunOn(ctx, g.cfg, g.g, func(context.Context) (driver.Conn, error) { return g.conn(), nil }, out)
}

func (g groupIO) Close() { g.g.Close() }

// Lifecycle runs the connector of `sink run` and keeps the process up
// when the connector is stopped through the REST API, as a Kafka Connect
// worker keeps a stopped connector: PUT /connectors/NAME/stop ends the
// run as SIGTERM does (the pipeline flushes and commits, the consumer
// leaves the group) and the connector is STOPPED, its HTTP listener still
// serving; while stopped, the group's offsets may be moved (PATCH and
// DELETE /connectors/NAME/offsets, with groupoffsets' reset, which under
// exactly_once resets the exactly-once state as `sink offsets reset
// --reload` does); PUT .../resume starts a new run (a new pipeline, whose
// recovery reads the ledgers afresh, and a new member of the group). It
// is the status.Lifecycle of the HTTP endpoints.
//
// Concurrency: Run's goroutine (the owner) owns the lifecycle: which run
// is current, whether it is stopping, the stops waiting for STOPPED. A
// run's Run goes on a goroutine of its own; the HTTP goroutines hand the
// owner their stop, resume and offsets requests over a channel, and the
// owner answers each (an offsets change runs on the owner, so a resume
// waits for it). Status, and the pause and resume of a running
// connector, read the current run and the phase through atomic values.
type Lifecycle struct {
	cfg   *config.Config
	log   zerolog.Logger
	m     *metrics.Metrics
	start func(ctx context.Context) (Instance, error)
	io    OffsetsIO

	reqs  chan lifeReq
	cur   atomic.Pointer[Instance]        // the current (or last) run
	own   atomic.Pointer[status.Snapshot] // the lifecycle's own state: STOPPED, STARTING again
	phase atomic.Pointer[status.State]    // Starting, Running, Stopping, Stopped

	// The owner's: stops waiting for STOPPED.
	waiting []chan error
	now     func() time.Time
}

// NewLifecycle makes the lifecycle of cfg's connector: start builds each
// run, io reads and moves the offsets, m (may be nil) gets the state.
func NewLifecycle(cfg *config.Config, log zerolog.Logger, m *metrics.Metrics, start func(context.Context) (Instance, error), io OffsetsIO) *Lifecycle {
	l := &Lifecycle{cfg: cfg, log: log, m: m, start: start, io: io, reqs: make(chan lifeReq), now: time.Now}
	l.setPhase(status.Starting)
	return l
}

type lifeOp uint8

const (
	opStop lifeOp = iota + 1
	opResume
	opAlter
	opReset
)

// lifeReq is a request to the owner; it answers on reply.
type lifeReq struct {
	op    lifeOp
	ctx   context.Context // the request's: an offsets change runs under it
	offs  []status.Offset
	reply chan lifeReply
}

type lifeReply struct {
	state status.State
	err   error
	done  chan error // a stop's: answered once STOPPED
}

// Run starts the connector and runs it until ctx ends (SIGTERM), starting
// it again after each stop and resume. It returns nil after a clean end,
// a *StartError when a run could not be built, or the error a run ended
// with (its pipeline's).
func (l *Lifecycle) Run(ctx context.Context) error {
	defer l.io.Close()
	for {
		l.setPhase(status.Starting)
		inst, err := l.start(ctx)
		if err != nil {
			return &StartError{Err: err}
		}
		stopped, err := l.running(ctx, inst)
		if err != nil || !stopped {
			return err
		}
		if !l.stopped(ctx) {
			return nil
		}
	}
}

// running runs inst and answers requests until its Run returns: true when
// it ended on a stop request (then STOPPED), false on ctx's end or with
// the run's error.
func (l *Lifecycle) running(ctx context.Context, inst Instance) (bool, error) {
	l.cur.Store(&inst)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- inst.Run(runCtx) }()
	l.setPhase(status.Running)
	stopping := false
	for {
		select {
		case err := <-done:
			inst.Close() // leaves the group: after the final commit
			return l.ended(inst, stopping && err == nil, err)
		case req := <-l.reqs:
			if req.op == opStop && !stopping {
				stopping = true
				cancel()
				l.setPhase(status.Stopping)
				l.log.Info().Msg("stopping on request: flushing, committing, leaving the group; the process stays up")
			}
			l.answerRunning(req, inst)
		}
	}
}

// ended settles a run's end: STOPPED after a stop, the waiting stops
// answered (with the run's error when it failed).
func (l *Lifecycle) ended(inst Instance, stopped bool, err error) (bool, error) {
	if stopped {
		l.publish(status.Stopped, inst.Status())
		l.setPhase(status.Stopped)
		l.log.Info().Msg("stopped: out of the group; PUT /connectors/" + l.cfg.Name + "/resume starts it again")
	}
	for _, w := range l.waiting {
		w <- err
	}
	l.waiting = nil
	return stopped, err
}

// answerRunning answers a request while a run is current.
func (l *Lifecycle) answerRunning(req lifeReq, inst Instance) {
	var rep lifeReply
	switch req.op {
	case opStop:
		rep.state, rep.done = status.Stopping, make(chan error, 1)
		l.waiting = append(l.waiting, rep.done)
	case opResume:
		rep.state, rep.err = inst.Resume(req.ctx)
	default:
		rep.err = fmt.Errorf("%w: it is %s", status.ErrNotStopped, *l.phase.Load())
	}
	req.reply <- rep
}

// stopped answers requests while STOPPED: true on a resume, false when
// ctx ends.
func (l *Lifecycle) stopped(ctx context.Context) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case req := <-l.reqs:
			var rep lifeReply
			switch req.op {
			case opStop:
				rep.state, rep.done = status.Stopped, make(chan error, 1)
				rep.done <- nil
			case opResume:
				l.publish(status.Starting, l.own.Load())
				l.log.Info().Msg("resuming on request: joining the group again")
				req.reply <- lifeReply{state: status.Starting}
				return true
			case opAlter:
				rep.state, rep.err = status.Stopped, l.alter(req.ctx, req.offs)
			case opReset:
				rep.state, rep.err = status.Stopped, l.reset(req.ctx)
			}
			req.reply <- rep
		}
	}
}

// publish makes the lifecycle's own snapshot: state now, with the tables
// of from (the last run's) and no partitions: none is assigned.
func (l *Lifecycle) publish(state status.State, from *status.Snapshot) {
	now := l.now()
	s := &status.Snapshot{At: now, State: state, Since: now}
	if from != nil {
		s.Tables, s.GroupProtocol, s.Budgets = from.Tables, from.GroupProtocol, from.Budgets
	}
	l.own.Store(s)
	l.m.SetState(string(state), status.StateNames())
}

func (l *Lifecycle) setPhase(s status.State) { l.phase.Store(&s) }

// Status is the newest of the current run's snapshot and the lifecycle's
// own (STOPPED, or STARTING again before the new run publishes); nil
// before the first. Safe from any goroutine.
func (l *Lifecycle) Status() *status.Snapshot {
	own := l.own.Load()
	if inst := l.cur.Load(); inst != nil {
		if s := (*inst).Status(); s != nil && (own == nil || s.At.After(own.At)) {
			return s
		}
	}
	return own
}

// Pause pauses the running connector (its pipeline); refused unless it
// runs. Safe from any goroutine.
func (l *Lifecycle) Pause(ctx context.Context) (status.State, error) {
	phase := *l.phase.Load()
	inst := l.cur.Load()
	if phase != status.Running || inst == nil {
		return phase, fmt.Errorf("%w: the connector is %s", status.ErrConflict, phase)
	}
	return (*inst).Pause(ctx)
}

// Resume resumes a paused connector (its pipeline) or starts a STOPPED
// one again (STARTING, then RUNNING once the new run has joined the
// group). Safe from any goroutine.
func (l *Lifecycle) Resume(ctx context.Context) (status.State, error) {
	switch phase := *l.phase.Load(); phase {
	case status.Running:
		if inst := l.cur.Load(); inst != nil {
			return (*inst).Resume(ctx)
		}
	case status.Stopped:
	default:
		return phase, fmt.Errorf("%w: the connector is %s", status.ErrConflict, phase)
	}
	rep, err := l.ask(ctx, lifeReq{op: opResume})
	if err != nil {
		return "", err
	}
	return rep.state, rep.err
}

// Stop stops the connector in place (see Lifecycle) and waits until it
// is STOPPED or ctx ends. Safe from any goroutine.
func (l *Lifecycle) Stop(ctx context.Context) error {
	if phase := *l.phase.Load(); phase == status.Starting {
		return fmt.Errorf("%w: the connector is starting; stop it once /status says RUNNING", status.ErrConflict)
	}
	rep, err := l.ask(ctx, lifeReq{op: opStop})
	if err != nil || rep.err != nil {
		return errors.Join(err, rep.err)
	}
	select {
	case err := <-rep.done:
		return err
	case <-ctx.Done():
		return nil // taken: the flush goes on, /status says when it is STOPPED
	}
}

// ask hands req to the owner and waits for its answer.
func (l *Lifecycle) ask(ctx context.Context, req lifeReq) (lifeReply, error) {
	req.ctx, req.reply = ctx, make(chan lifeReply, 1)
	select {
	case l.reqs <- req:
	case <-ctx.Done():
		return lifeReply{}, ctx.Err()
	}
	return <-req.reply, nil
}

// Offsets are the group's committed offsets. Safe from any goroutine.
func (l *Lifecycle) Offsets(ctx context.Context) ([]status.Offset, error) {
	parts, err := l.io.Committed(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]status.Offset, len(parts))
	for i, p := range parts {
		out[i] = status.Offset{Topic: p.TP.Topic, Partition: p.TP.Partition, Offset: p.Committed}
	}
	return out, nil
}

// AlterOffsets moves the offsets of the given partitions while STOPPED.
// Safe from any goroutine.
func (l *Lifecycle) AlterOffsets(ctx context.Context, offs []status.Offset) error {
	return l.change(ctx, lifeReq{op: opAlter, offs: offs})
}

// ResetOffsets moves every partition's offset to where
// kafka.start_offset says, while STOPPED. Safe from any goroutine.
func (l *Lifecycle) ResetOffsets(ctx context.Context) error {
	return l.change(ctx, lifeReq{op: opReset})
}

func (l *Lifecycle) change(ctx context.Context, req lifeReq) error {
	if phase := *l.phase.Load(); phase == status.Starting {
		return fmt.Errorf("%w: it is %s", status.ErrNotStopped, phase)
	}
	rep, err := l.ask(ctx, req)
	if err != nil {
		return err
	}
	return rep.err
}

// alter moves the partitions offs names: each to its offset, or, for a
// Reset one, to where kafka.start_offset says (an offset outside the log
// is moved to its nearest end, which the log says).
func (l *Lifecycle) alter(ctx context.Context, offs []status.Offset) error {
	explicit := make(map[offsets.TP]int64, len(offs))
	for _, o := range offs {
		to := o.Offset
		if o.Reset {
			to = l.startOffset()
		}
		explicit[o.TP()] = to
	}
	return l.move(ctx, groupoffsets.Target{Explicit: explicit})
}

// startOffset is where kafka.start_offset starts a partition, as an
// offset the reset clamps into its log.
func (l *Lifecycle) startOffset() int64 {
	if l.cfg.Kafka.StartOffset == "latest" {
		return math.MaxInt64
	}
	return 0
}

// reset moves every partition to where kafka.start_offset says.
func (l *Lifecycle) reset(ctx context.Context) error {
	if l.cfg.Kafka.StartOffset == "latest" {
		return l.move(ctx, groupoffsets.Target{Latest: true})
	}
	return l.move(ctx, groupoffsets.Target{Earliest: true})
}

// move runs the reset to target, confirmed (as a REST request is: a
// forward move too) and logged line by line. Under exactly_once it
// reloads (the rows at the new offsets or later deleted, the tables'
// tokens forgotten, a ledger with nothing pending), so the records load
// again exactly once; where --reload cannot delete (a route with a
// cluster target), the ledger's check region skips the rows present.
func (l *Lifecycle) move(ctx context.Context, target groupoffsets.Target) error {
	r := groupoffsets.Reset{Target: target, Partition: -1, Yes: true, Execute: true}
	r.Reload = l.cfg.ExactlyOnce() && !slices.ContainsFunc(l.cfg.Routes, func(rt config.Route) bool { return rt.Target != "" })
	l.log.Info().Str("to", target.String()).Bool("reload", r.Reload).Msg("offsets: moving the group's offsets on request")
	err := l.io.Reset(ctx, r, &logLines{log: l.log})
	var members *groupoffsets.MembersError
	switch {
	case errors.As(err, &members):
		return fmt.Errorf("%w: another member of group %s is running (%v): stop it first", status.ErrConflict, members.Group, members.Members)
	case errors.Is(err, groupoffsets.ErrNotConsumed):
		return fmt.Errorf("%w: %v", status.ErrBadRequest, err)
	case err != nil:
		l.log.Error().Err(err).Msg("offsets: the change failed")
	}
	return err
}

// logLines logs each line written to it (the reset's preview and actions).
type logLines struct {
	log zerolog.Logger
	buf []byte
}

func (w *logLines) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.log.Info().Msg("offsets: " + string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

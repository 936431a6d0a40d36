package assemble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/command/groupoffsets"
	"sink/internal/offsets"
	"sink/internal/status"
)

// fakeInstance is a run that publishes RUNNING with a table and a
// partition, runs until its context ends (or fails with fail), then
// publishes STOPPED as the pipeline does.
type fakeInstance struct {
	mu      sync.Mutex
	snap    *status.Snapshot
	fail    chan error
	flush   chan struct{} // closed when the flush after the context's end is over
	closed  bool
	resumes int
}

func newFakeInstance() *fakeInstance {
	f := &fakeInstance{fail: make(chan error, 1), flush: make(chan struct{})}
	close(f.flush)
	return f
}

func (f *fakeInstance) set(s status.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap = &status.Snapshot{At: time.Now(), State: s, Tables: []status.Table{{Table: "db.t", Rows15m: 7}},
		Partitions: []status.Partition{{Topic: "t", Partition: 0}}}
}

func (f *fakeInstance) Status() *status.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}

func (f *fakeInstance) Pause(context.Context) (status.State, error) { return status.Pausing, nil }

func (f *fakeInstance) Resume(context.Context) (status.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumes++
	return status.Running, nil
}

func (f *fakeInstance) Run(ctx context.Context) error {
	f.set(status.Running)
	select {
	case <-ctx.Done():
		f.set(status.Stopping)
		<-f.flush
		f.set(status.Stopped)
		return nil
	case err := <-f.fail:
		f.set(status.Failed)
		return err
	}
}

func (f *fakeInstance) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

func (f *fakeInstance) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// fakeOffsets records the resets asked of it and answers with err.
type fakeOffsets struct {
	mu     sync.Mutex
	resets []groupoffsets.Reset
	err    error
	closed bool
}

func (f *fakeOffsets) Committed(context.Context) ([]groupoffsets.Partition, error) {
	return []groupoffsets.Partition{{TP: offsets.TP{Topic: "t", Partition: 0}, Committed: 12}, {TP: offsets.TP{Topic: "u", Partition: 3}, Committed: 4}}, nil
}

func (f *fakeOffsets) Reset(_ context.Context, r groupoffsets.Reset, out io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintln(out, "t[0]: 12 -> 5 (rewind 7 offsets)")
	f.resets = append(f.resets, r)
	return f.err
}

func (f *fakeOffsets) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

func (f *fakeOffsets) last() groupoffsets.Reset {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resets[len(f.resets)-1]
}

// lifeRig runs a Lifecycle over fakes: each start makes the next
// fakeInstance (or fails with startErr), whose flush is slowFlush when
// set.
type lifeRig struct {
	lc        *Lifecycle
	io        *fakeOffsets
	mu        sync.Mutex
	insts     []*fakeInstance
	startErr  error
	slowFlush chan struct{}
	cancel    context.CancelFunc
	done      chan error
}

func newLifeRig(t *testing.T, cfg *config.Config) *lifeRig { return newLifeRigWith(t, cfg, nil) }

func newLifeRigWith(t *testing.T, cfg *config.Config, slowFlush chan struct{}) *lifeRig {
	r := &lifeRig{io: &fakeOffsets{}, done: make(chan error, 1), slowFlush: slowFlush}
	start := func(context.Context) (Instance, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.startErr != nil {
			return nil, r.startErr
		}
		inst := newFakeInstance()
		if r.slowFlush != nil {
			inst.flush = r.slowFlush
		}
		r.insts = append(r.insts, inst)
		return inst, nil
	}
	r.lc = NewLifecycle(cfg, zerolog.Nop(), nil, start, r.io)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.lc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return r
}

func (r *lifeRig) inst(i int) *fakeInstance {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.insts) {
		return nil
	}
	return r.insts[i]
}

// waitState waits until the lifecycle's status says want (with n runs
// started).
func (r *lifeRig) waitState(t *testing.T, want status.State, runs int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := r.lc.Status()
		r.mu.Lock()
		n := len(r.insts)
		r.mu.Unlock()
		if s != nil && s.State == want && n == runs && *r.lc.phase.Load() != status.Starting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v after %d runs; want %s after %d", s, n, want, runs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func alo() *config.Config {
	return &config.Config{Name: "c", Delivery: config.DeliveryAtLeastOnce, Kafka: config.Kafka{StartOffset: "earliest"}}
}

// TestLifecycleStopOffsetsResume: a stop ends the run and leaves the
// group (its consumer closed) with the process up, STOPPED, with no
// partition and the last run's tables; the offsets move only while
// STOPPED; a resume starts a new run; the context's end ends Run cleanly.
func TestLifecycleStopOffsetsResume(t *testing.T) {
	r := newLifeRig(t, alo())
	r.waitState(t, status.Running, 1)
	ctx := context.Background()
	err := r.lc.AlterOffsets(ctx, []status.Offset{{Topic: "t", Partition: 0, Offset: 5}})
	if !errors.Is(err, status.ErrNotStopped) {
		t.Fatalf("AlterOffsets while running: %v; want ErrNotStopped", err)
	}
	if err := r.lc.ResetOffsets(ctx); !errors.Is(err, status.ErrNotStopped) {
		t.Fatalf("ResetOffsets while running: %v; want ErrNotStopped", err)
	}
	if st, err := r.lc.Resume(ctx); err != nil || st != status.Running || r.inst(0).resumes != 1 {
		t.Fatalf("Resume while running: %s, %v; want the run's own resume", st, err)
	}

	if err := r.lc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s := r.lc.Status()
	if s.State != status.Stopped || len(s.Partitions) != 0 || len(s.Tables) != 1 || s.Tables[0].Rows15m != 7 || !r.inst(0).isClosed() {
		t.Fatalf("after Stop: %+v, consumer closed %v; want STOPPED, no partition, the run's table, closed", s, r.inst(0).isClosed())
	}
	if err := r.lc.Stop(ctx); err != nil {
		t.Fatalf("a second Stop: %v; want nil (already STOPPED)", err)
	}
	if _, err := r.lc.Pause(ctx); !errors.Is(err, status.ErrConflict) {
		t.Fatalf("Pause while STOPPED: %v; want ErrConflict", err)
	}

	if err := r.lc.AlterOffsets(ctx, []status.Offset{{Topic: "t", Partition: 0, Offset: 5}, {Topic: "t", Partition: 1, Reset: true}}); err != nil {
		t.Fatal(err)
	}
	want := groupoffsets.Reset{Target: groupoffsets.Target{Explicit: map[offsets.TP]int64{{Topic: "t", Partition: 0}: 5, {Topic: "t", Partition: 1}: 0}},
		Partition: -1, Yes: true, Execute: true}
	if got := r.io.last(); !reflect.DeepEqual(got, want) {
		t.Fatalf("PATCH's reset: %+v; want %+v", got, want)
	}
	if err := r.lc.ResetOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.io.last(); !got.Target.Earliest || got.Reload || !got.Execute || !got.Yes {
		t.Fatalf("DELETE's reset: %+v; want to earliest, executed", got)
	}
	got, err := r.lc.Offsets(ctx)
	if err != nil || !reflect.DeepEqual(got, []status.Offset{{Topic: "t", Partition: 0, Offset: 12}, {Topic: "u", Partition: 3, Offset: 4}}) {
		t.Fatalf("Offsets: %+v, %v", got, err)
	}

	if st, err := r.lc.Resume(ctx); err != nil || st != status.Starting {
		t.Fatalf("Resume while STOPPED: %s, %v; want STARTING", st, err)
	}
	r.waitState(t, status.Running, 2)
	if r.inst(1).isClosed() {
		t.Fatal("the new run's consumer is closed")
	}
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("Run after the context's end: %v; want nil", err)
	}
	r.done <- nil // for the cleanup
	if !r.inst(1).isClosed() || !r.io.closed {
		t.Fatal("the run's consumer or the offsets' client not closed at the end")
	}
}

// TestLifecycleReload: under exactly_once an offsets change reloads (as
// `sink offsets reset --reload`), but not on a route with a cluster
// target, where --reload cannot delete; kafka.start_offset latest moves
// a reset partition to its log end.
func TestLifecycleReload(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    *config.Config
		reload bool
		to     int64
	}{
		{"exactly_once", &config.Config{Name: "c", Delivery: config.DeliveryExactlyOnce, Kafka: config.Kafka{StartOffset: "earliest"}}, true, 0},
		{"exactly_once on a cluster", &config.Config{Name: "c", Delivery: config.DeliveryExactlyOnce, Routes: []config.Route{{Target: "local"}}}, false, 0},
		{"at_least_once, latest", &config.Config{Name: "c", Delivery: config.DeliveryAtLeastOnce, Kafka: config.Kafka{StartOffset: "latest"}}, false, 1<<63 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLifeRig(t, tc.cfg)
			r.waitState(t, status.Running, 1)
			if err := r.lc.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := r.lc.AlterOffsets(context.Background(), []status.Offset{{Topic: "t", Partition: 0, Reset: true}}); err != nil {
				t.Fatal(err)
			}
			got := r.io.last()
			if got.Reload != tc.reload || got.Target.Explicit[offsets.TP{Topic: "t", Partition: 0}] != tc.to {
				t.Fatalf("reset %+v; want reload %v to %d", got, tc.reload, tc.to)
			}
			if err := r.lc.ResetOffsets(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := r.io.last(); got.Reload != tc.reload || got.Target.Latest != (tc.cfg.Kafka.StartOffset == "latest") {
				t.Fatalf("DELETE's reset %+v; want reload %v, latest for start_offset %q", got, tc.reload, tc.cfg.Kafka.StartOffset)
			}
		})
	}
}

// TestLifecycleOffsetsErrors: another member of the group is a conflict,
// a partition the connector does not consume a bad request; the reset's
// own errors pass as they are.
func TestLifecycleOffsetsErrors(t *testing.T) {
	r := newLifeRig(t, alo())
	r.waitState(t, status.Running, 1)
	if err := r.lc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[error]error{
		&groupoffsets.MembersError{Group: "c", Members: []string{"sink-c on 10.0.0.2"}}:  status.ErrConflict,
		fmt.Errorf("z[0]: %w (kafka.topics / topic_regex)", groupoffsets.ErrNotConsumed): status.ErrBadRequest,
	} {
		r.io.mu.Lock()
		r.io.err = in
		r.io.mu.Unlock()
		if err := r.lc.ResetOffsets(context.Background()); !errors.Is(err, want) {
			t.Fatalf("reset failing with %v: %v; want %v", in, err, want)
		}
	}
	boom := errors.New("clickhouse: the delete fails")
	r.io.mu.Lock()
	r.io.err = boom
	r.io.mu.Unlock()
	if err := r.lc.ResetOffsets(context.Background()); !errors.Is(err, boom) || errors.Is(err, status.ErrConflict) || errors.Is(err, status.ErrBadRequest) {
		t.Fatalf("reset failing with %v: %v", boom, err)
	}
}

// TestLifecycleRunFails: a run's error ends Run with it, and a stop waiting
// for STOPPED gets it; a start that fails after a resume is a StartError.
func TestLifecycleRunFails(t *testing.T) {
	r := newLifeRig(t, alo())
	r.waitState(t, status.Running, 1)
	boom := errors.New("permanent insert error")
	r.inst(0).fail <- boom
	if err := <-r.done; !errors.Is(err, boom) {
		t.Fatalf("Run: %v; want the run's error", err)
	}
	r.done <- nil
	if !r.inst(0).isClosed() {
		t.Fatal("the failed run's consumer not closed")
	}

	r = newLifeRig(t, alo())
	r.waitState(t, status.Running, 1)
	if err := r.lc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.startErr = errors.New("clickhouse: table db.t does not exist")
	r.mu.Unlock()
	if _, err := r.lc.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	var se *StartError
	if err := <-r.done; !errors.As(err, &se) || se.Err != r.startErr {
		t.Fatalf("Run after a failed start: %v; want a StartError", err)
	}
	r.done <- nil
}

// TestLifecycleStarting: while a run is being built, stop, pause, resume
// and the offsets' changes are refused at once.
func TestLifecycleStarting(t *testing.T) {
	release := make(chan struct{})
	lc := NewLifecycle(alo(), zerolog.Nop(), nil, func(ctx context.Context) (Instance, error) {
		<-release
		return nil, errors.New("canceled")
	}, &fakeOffsets{})
	done := make(chan error, 1)
	go func() { done <- lc.Run(context.Background()) }()
	ctx := context.Background()
	if err := lc.Stop(ctx); !errors.Is(err, status.ErrConflict) {
		t.Fatalf("Stop while starting: %v", err)
	}
	if _, err := lc.Pause(ctx); !errors.Is(err, status.ErrConflict) {
		t.Fatalf("Pause while starting: %v", err)
	}
	if _, err := lc.Resume(ctx); !errors.Is(err, status.ErrConflict) {
		t.Fatalf("Resume while starting: %v", err)
	}
	if err := lc.ResetOffsets(ctx); !errors.Is(err, status.ErrNotStopped) {
		t.Fatalf("ResetOffsets while starting: %v", err)
	}
	if lc.Status() != nil {
		t.Fatal("a status before the first run published one")
	}
	close(release)
	var se *StartError
	if err := <-done; !errors.As(err, &se) {
		t.Fatalf("Run: %v; want a StartError", err)
	}
}

// TestLifecycleSignalWhileStopping: a stop whose flush outlasts the
// request's wait is taken (nil) and shows STOPPING; the context's end
// meanwhile ends Run cleanly once the flush is over.
func TestLifecycleSignalWhileStopping(t *testing.T) {
	flush := make(chan struct{})
	r := newLifeRigWith(t, alo(), flush)
	r.waitState(t, status.Running, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.lc.Stop(ctx); err != nil {
		t.Fatalf("Stop during a slow flush: %v; want nil (taken)", err)
	}
	if s := r.lc.Status(); s.State != status.Stopping {
		t.Fatalf("status during the flush: %s; want STOPPING", s.State)
	}
	if _, err := r.lc.Resume(context.Background()); !errors.Is(err, status.ErrConflict) {
		t.Fatalf("Resume while STOPPING: %v; want ErrConflict", err)
	}
	r.cancel()
	close(flush)
	if err := <-r.done; err != nil {
		t.Fatalf("Run: %v; want nil", err)
	}
	r.done <- nil
	if !r.inst(0).isClosed() {
		t.Fatal("the run's consumer not closed")
	}
}

package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestUnitShutdownJoinsInserts: SIGTERM while an INSERT hangs. After
// shutdown_timeout Run cancels it; the INSERT takes another 300ms to
// return (the driver canceling on the server). Run must wait for it, so
// that no INSERT is running when it returns (main then closes the
// ClickHouse pool), and leave no goroutine behind.
func TestUnitShutdownJoinsInserts(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := unitConfig(t, "")
	cfg.ShutdownTimeout = 200 * time.Millisecond
	cfg.ClickHouse.MaxInFlight = 2
	sink := newFakeSink(func(int) insertScript { return insertScript{hang: true, linger: 300 * time.Millisecond} })
	r := start(t, cfg, sink)
	r.src.send(unitTP, 0, rows(0, 4)...) // two batches, two INSERTs in flight
	eventually(t, time.Second, "two inserts running", func() bool { return sink.active.Load() == 2 })
	began := time.Now()
	err := r.stop(t)
	took := time.Since(began)
	if n := sink.active.Load(); n != 0 {
		t.Fatalf("Run returned after %s with %d INSERTs still running", took, n)
	}
	if err == nil || !strings.Contains(err.Error(), "shutdown_timeout") {
		t.Fatalf("Run: %v; want the shutdown_timeout error", err)
	}
	if took < 500*time.Millisecond {
		t.Fatalf("Run returned after %s, before the canceled INSERTs could have ended (200ms + 300ms)", took)
	}
	if got := r.src.committed(unitTP); got != -1 {
		t.Fatalf("committed %d; nothing was inserted", got)
	}
	r.cancel()
	<-r.done // let the cleanup find Run returned, before goleak looks
	r.done <- err
}

// TestUnitShutdownJoinIsBounded: an INSERT that does not return even when
// canceled holds Run only cancelGrace, and Run says so.
func TestUnitShutdownJoinIsBounded(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.ShutdownTimeout = 100 * time.Millisecond
	release := make(chan struct{})
	defer close(release)
	sink := newFakeSink(func(int) insertScript { return insertScript{hang: true, linger: time.Hour, release: release} })
	r := start(t, cfg, sink)
	r.p.calls.grace = 200 * time.Millisecond
	r.src.send(unitTP, 0, rows(0, 2)...)
	r.insertStarted(t)
	began := time.Now()
	err := r.stop(t)
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "shutdown_timeout") {
		t.Fatalf("Run: %v; want the shutdown_timeout error first", err)
	}
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Fatalf("Run returned after %s; want shutdown_timeout + the grace, about 300ms", took)
	}
	if sink.active.Load() != 1 {
		t.Fatal("the stuck INSERT should still be running")
	}
}

// TestUnitNoGoroutineLeftAfterFailures: a run with inserts that fail for
// good (the acks of failed intents and failed inserts go through the one
// guarded send) and retried ones ends with every goroutine it started
// gone.
func TestUnitNoGoroutineLeftAfterFailures(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	errPermanent := errors.New("code: 53, TYPE_MISMATCH")
	cfg := unitConfig(t, "")
	cfg.ClickHouse.MaxInFlight = 4
	sink := newFakeSink(func(n int) insertScript {
		if n == 2 {
			return insertScript{err: errPermanent}
		}
		return insertScript{retries: 2, delay: 20 * time.Millisecond}
	})
	r := start(t, cfg, sink)
	r.src.send(unitTP, 0, rows(0, 8)...)
	err := r.wait(t)
	if err == nil {
		t.Fatal("Run should stop on the permanent INSERT error")
	}
	r.cancel()
	<-r.done
	r.done <- err
}

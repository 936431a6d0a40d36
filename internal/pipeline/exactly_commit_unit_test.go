package pipeline

// Unit tests of exactly-once's intent commits going through the committer,
// with the fake Source and Sink of unit_test.go: the owner goes on while an
// intent is out, the batch waits at the head of its table's queue until
// the intent is answered, and a failed intent is retried or stops the
// connector as a failed commit on the owner did.

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/status"
)

// gatedSource is eoSource whose n-th commit attempt (from 1) is held until
// gate is closed (or its context ends, failing it as a timeout would).
type gatedSource struct {
	*eoSource
	n     int32
	gate  chan struct{}
	tries atomic.Int32
	held  atomic.Bool // the n-th commit is being held
}

func (s *gatedSource) Commit(ctx context.Context, pos map[offsets.TP]offsets.Commit, meta map[offsets.TP]string) error {
	if s.tries.Add(1) == s.n {
		s.held.Store(true)
		select {
		case <-s.gate:
		case <-ctx.Done():
			s.held.Store(false)
			return ctx.Err()
		}
		s.held.Store(false)
	}
	return s.eoSource.Commit(ctx, pos, meta)
}

// TestUnitExactlyIntentOffTheOwner: batch 1's intent is recorded and its
// INSERT held; batch 2's intent commit is then held by the broker. While
// it is out, the owner goes on: it handles batch 1's ack, answers a pause
// and a resume, and decodes the next fetch into batch 3; batch 2 waits at
// the head of the queue, not inserted, and batch 3 behind it. Once the
// intent is answered, batch 2 is inserted with its token, then batch 3,
// and every offset is committed with ledgers that hold no pending entry.
func TestUnitExactlyIntentOffTheOwner(t *testing.T) {
	synctest.Test(t, testUnitExactlyIntentOffTheOwner)
}

func testUnitExactlyIntentOffTheOwner(t *testing.T) {
	cfg := unitConfig(t, "")
	cfg.ClickHouse.MaxInFlight = 2
	cfg.Kafka.RequestTimeout = 60 * time.Second
	cfg.Kafka.RebalanceTimeout = 120 * time.Second
	cfg.ShutdownTimeout = 5 * time.Second
	sink, insertGate := firstInsertHeld()
	p := newEO(t, cfg, sink)
	intentGate := make(chan struct{})
	src := &gatedSource{eoSource: &eoSource{fakeSource: newFakeSource()}, n: 2, gate: intentGate}
	r := launch(t, p, src.fakeSource, src, sink)

	r.src.send(eoP0, 0, rows(0, 2)...) // batch 1: intent (commit 1) recorded, INSERT held
	r.insertStarted(t)
	r.src.send(eoP0, 2, rows(2, 2)...) // batch 2: its intent (commit 2) held
	eventually(t, time.Second, "batch 2's intent commit out", src.held.Load)
	began := time.Now()

	close(insertGate)
	eventually(t, time.Second, "batch 1's ack handled while batch 2's intent is out", func() bool {
		s := r.p.Status()
		return s != nil && len(s.Tables) == 1 && s.Tables[0].Rows1m == 2 && s.Tables[0].InFlightBatches == 0
	})
	if st, err := r.p.Pause(context.Background()); err != nil || st != status.Pausing {
		t.Fatalf("pause while an intent is out: %s, %v; want PAUSING at once", st, err)
	}
	if st, err := r.p.Resume(context.Background()); err != nil || st != status.Running {
		t.Fatalf("resume while an intent is out: %s, %v; want RUNNING", st, err)
	}
	polls := r.src.polls.Load()
	r.src.send(eoP0, 4, rows(4, 2)...) // batch 3, sealed behind batch 2
	eventually(t, time.Second, "the next fetch decoded while the intent is out", func() bool {
		s := r.p.Status()
		return r.src.polls.Load() > polls && s != nil && len(s.Tables) == 1 && s.Tables[0].QueuedBatches == 2
	})
	if took := time.Since(began); took >= cfg.Kafka.RequestTimeout {
		t.Fatalf("the owner's work during the intent took %s, want it done before the intent's request_timeout (%s)", took, cfg.Kafka.RequestTimeout)
	}
	if !src.held.Load() {
		t.Fatal("the intent commit is no longer held: the test proves nothing")
	}
	sink.mu.Lock()
	calls := sink.calls
	sink.mu.Unlock()
	if got := sink.inserted("db.t"); got != 2 || calls != 1 {
		t.Fatalf("%d rows in %d INSERTs while batch 2's intent is out; want only batch 1's 2 rows in 1 (batch 2 waits for its intent)", got, calls)
	}
	if got := r.src.committed(eoP0); got != 0 {
		t.Fatalf("offset %d committed while the intent is out, want 0 (batch 1's intent only: one commit out at a time)", got)
	}

	close(intentGate)
	eventually(t, 2*time.Second, "every batch inserted and committed", func() bool {
		return sink.inserted("db.t") == 6 && r.src.committed(eoP0) == 6
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	src.emu.Lock()
	metas := append([]map[offsets.TP]string(nil), src.metas...)
	src.emu.Unlock()
	// The intents of batches 2 and 3, each with one entry over its range,
	// were committed in order; the last commit leaves no entry pending.
	var ranges [][2]int64
	for _, m := range metas {
		l, ok, err := eos.Decode(m[eoP0])
		if err != nil || !ok {
			t.Fatalf("ledger %q: %v", m[eoP0], err)
		}
		for _, en := range l.Entries {
			if n := len(ranges); n == 0 || ranges[n-1] != [2]int64{en.First, en.Last} {
				ranges = append(ranges, [2]int64{en.First, en.Last})
			}
		}
	}
	if want := [][2]int64{{0, 1}, {2, 3}, {4, 5}}; len(ranges) != len(want) || ranges[0] != want[0] || ranges[1] != want[1] || ranges[2] != want[2] {
		t.Fatalf("intents recorded over %v, want %v in order", ranges, want)
	}
	l, _, _ := eos.Decode(metas[len(metas)-1][eoP0])
	if l.Offset != 6 || len(l.Entries) != 0 {
		t.Fatalf("last ledger %+v; want offset 6 and no pending entry", l)
	}
}

// TestUnitExactlyIntentFailedAsBefore: an intent commit that times out
// (kafka.request_timeout) is retried after the backoff while the owner
// answers meanwhile, and the batch is inserted once its intent is
// recorded; an intent refused for good (a fenced static member) stops the
// connector with the intent's error, inserting nothing of the batch, and
// is not tried again.
func TestUnitExactlyIntentFailedAsBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := unitConfig(t, "")
		cfg.Kafka.RequestTimeout = 2 * time.Second
		cfg.Kafka.RebalanceTimeout = 20 * time.Second
		cfg.ClickHouse.RetryInitial, cfg.ClickHouse.RetryMax = 100*time.Millisecond, 100*time.Millisecond
		sink := newFakeSink(nil)
		p := newEO(t, cfg, sink)
		src := &gatedSource{eoSource: &eoSource{fakeSource: newFakeSource()}, n: 1, gate: make(chan struct{})}
		r := launch(t, p, src.fakeSource, src, sink)
		began := time.Now()
		r.src.send(eoP0, 0, rows(0, 2)...)
		eventually(t, time.Second, "the intent commit out", src.held.Load)
		if st, err := r.p.Pause(context.Background()); err != nil || st != status.Pausing {
			t.Fatalf("pause while an intent is out: %s, %v", st, err)
		}
		if _, err := r.p.Resume(context.Background()); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if took := time.Since(began); took >= cfg.Kafka.RequestTimeout {
			t.Fatalf("the pause was answered after %s, want before the intent's request_timeout (%s)", took, cfg.Kafka.RequestTimeout)
		}
		eventually(t, 2*cfg.Kafka.RequestTimeout, "the batch inserted after its intent was tried again", func() bool { return sink.inserted("db.t") == 2 })
		if took := time.Since(began); took < cfg.Kafka.RequestTimeout {
			t.Fatalf("inserted after %s, before the first intent commit could time out (%s)", took, cfg.Kafka.RequestTimeout)
		}
		if got := src.tries.Load(); got < 2 {
			t.Fatalf("%d commit attempts, want the timed-out intent tried again", got)
		}
		eventually(t, time.Second, "offset 2 committed", func() bool { return r.src.committed(eoP0) == 2 })
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		r, src, sink := startRefused(t, 20*time.Millisecond, kerr.FencedInstanceID, 1, "the intent commit tried")
		err := r.wait(t)
		if err == nil || !strings.Contains(err.Error(), "before its INSERT failed") || !strings.Contains(err.Error(), "not inserting it, stopping") ||
			!strings.Contains(err.Error(), kerr.FencedInstanceID.Message) {
			t.Fatalf("Run returned %v, want the stop naming the refused intent", err)
		}
		if got := sink.inserted("db.t"); got != 0 {
			t.Fatalf("%d rows inserted of a batch whose intent was refused", got)
		}
		if got := src.attempts(); got != 1 {
			t.Fatalf("%d intent commits, want 1 (a fenced member's intent is not retried)", got)
		}
	})
}

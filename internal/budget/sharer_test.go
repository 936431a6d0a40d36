package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// fakeServers is a Reader over counters the test moves.
type fakeServers struct {
	counts map[string]uint64
	err    error
}

func (f *fakeServers) read(context.Context) (map[string]Reading, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := map[string]Reading{}
	for k, v := range f.counts {
		out[k] = Reading{Count: v}
	}
	return out, nil
}

func TestSharer(t *testing.T) {
	srv := &fakeServers{counts: map[string]uint64{"a": 0, "b": 0}}
	sh := NewSharer(Settings{PerMinute: 120}, srv.read, 0, zerolog.Nop())
	clock := simEpoch
	sh.now = func() time.Time { return clock }
	ctx := context.Background()

	if got := sh.PerMinute("a", clock); got != 1.2 {
		t.Errorf("before any read: %v, want the least share", got)
	}
	sh.SetDemand("a", 300)
	sh.SetDemand("b", 50)
	sh.PerMinute("elsewhere", clock) // a server the reader does not know
	// a: 120/min, 60 of them ours; b: idle (a slow start).
	for range 8 {
		sh.Round(ctx)
		sh.Inserted("a", 5)
		srv.counts["a"] += 10
		clock = clock.Add(5 * time.Second)
	}
	shares := sh.Shares()
	a, b, e := shares["a"], shares["b"], shares["elsewhere"]
	if a.Reason != ReasonShared || a.Server != 120 || a.Own != 60 || a.Others != 60 || a.Price <= 0 || a.PerMinute >= 300 {
		t.Errorf("a: %+v", a)
	}
	if b.Reason != ReasonShared || b.Server != 0 || b.Price != 0 || b.PerMinute < 2.4 || b.PerMinute >= 50 {
		t.Errorf("b: %+v", b)
	}
	if e.Reason != ReasonAlone || e.PerMinute != 96 {
		t.Errorf("a server no read names: %+v, want the whole target", e)
	}
	if got := sh.PerMinute("a", clock); got != a.PerMinute {
		t.Errorf("PerMinute(a) %v, share %v", got, a.PerMinute)
	}

	// The servers cannot be read: the last price is kept, and the share
	// follows the demand.
	srv.err = errors.New("connection refused")
	sh.SetDemand("a", 600)
	sh.Round(ctx)
	a2 := sh.Shares()["a"]
	if a2.Reason != ReasonUnreadable || a2.Price != a.Price || a2.PerMinute != max(1.2, 2*a.PerMinute) {
		t.Errorf("unreadable: %+v, was %+v", a2, a)
	}
	// Readable again: the law goes on.
	srv.err = nil
	clock = clock.Add(5 * time.Second)
	sh.Round(ctx)
	if a3 := sh.Shares()["a"]; a3.Reason != ReasonShared {
		t.Errorf("readable again: %+v", a3)
	}
}

package gen

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

type event struct {
	ID        int64   `json:"id"`
	UserID    uint64  `json:"user_id"`
	TS        string  `json:"ts"`
	EventType string  `json:"event_type"`
	Channel   string  `json:"channel"`
	Cost      float64 `json:"cost"`
	Payload   string  `json:"payload"`
}

func TestEventShape(t *testing.T) {
	// f generates n events and checks every one is valid JSON with
	// consecutive ids, within a byte of the requested size.
	f := func(cfg Config, n int) {
		t.Helper()
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var buf []byte
		for i := 0; i < n; i++ {
			buf, _ = g.Append(buf[:0])
			var e event
			if err := json.Unmarshal(buf, &e); err != nil {
				t.Fatalf("%+v: event %d is not JSON: %v: %s", cfg, i, err, buf)
			}
			if e.ID != int64(cfg.StartID+i) {
				t.Fatalf("%+v: event %d has id %d", cfg, i, e.ID)
			}
			// the unpadded fields alone may exceed small sizes
			if cfg.Size >= 150 && (len(buf) < cfg.Size-1 || len(buf) > cfg.Size+1) {
				t.Fatalf("%+v: event %d is %d bytes", cfg, i, len(buf))
			}
			if e.UserID >= Users {
				t.Fatalf("%+v: user_id %d out of range", cfg, e.UserID)
			}
		}
	}
	f(Config{Size: 180, Seed: 1}, 1000)
	f(Config{Size: 180, Seed: 2, StartID: 5_000_000}, 1000)
	f(Config{Size: 1000, Seed: 1}, 100)
	f(Config{Size: 0, Seed: 1}, 100)
	f(Config{Size: 180, Seed: 1, Skew: 1.2}, 1000)
}

func TestReproducible(t *testing.T) {
	// The uniform stream must stay what loadgen always produced:
	// Event with a PCG(seed, 7) generator.
	g, err := New(Config{Size: 180, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 7))
	var a, b []byte
	for i := 0; i < 500; i++ {
		a, _ = g.Append(a[:0])
		b = Event(b[:0], rng, i, 180)
		if !bytes.Equal(a, b) {
			t.Fatalf("event %d differs:\n%s\n%s", i, a, b)
		}
	}
}

func TestSkew(t *testing.T) {
	// f counts how many of n events go to the most frequent user.
	f := func(skew float64, n int, minTop, maxTop int) {
		t.Helper()
		g, err := New(Config{Size: 100, Seed: 3, Skew: skew})
		if err != nil {
			t.Fatal(err)
		}
		counts := map[uint64]int{}
		top := 0
		var buf []byte
		for i := 0; i < n; i++ {
			var u uint64
			buf, u = g.Append(buf[:0])
			counts[u]++
			top = max(top, counts[u])
		}
		if top < minTop || top > maxTop {
			t.Fatalf("skew %g: hottest user has %d of %d events, want %d..%d", skew, top, n, minTop, maxTop)
		}
	}
	f(0, 10_000, 1, 5)           // uniform over a million users
	f(1.5, 10_000, 2_000, 9_000) // Zipf: user 0 takes a large share
}

func TestConfigErrors(t *testing.T) {
	f := func(cfg Config, want string) {
		t.Helper()
		_, err := New(cfg)
		if err == nil || err.Error() != want {
			t.Fatalf("New(%+v) = %v, want %q", cfg, err, want)
		}
	}
	f(Config{Size: -1}, "gen: size -1 is negative")
	f(Config{Skew: 0.5}, "gen: skew 0.5 must be 0 (uniform) or a Zipf exponent > 1")
	f(Config{Skew: 1}, "gen: skew 1 must be 0 (uniform) or a Zipf exponent > 1")
}

func TestParseProfile(t *testing.T) {
	f := func(in string, want Profile, wantErr string) {
		t.Helper()
		got, err := ParseProfile(in)
		if wantErr != "" {
			if err == nil || err.Error() != wantErr {
				t.Errorf("ParseProfile(%q) error %v, want %q", in, err, wantErr)
			}
			return
		}
		if err != nil || len(got) != len(want) {
			t.Fatalf("ParseProfile(%q) = %v, %v; want %v", in, got, err, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("ParseProfile(%q)[%d] = %v, want %v", in, i, got[i], want[i])
			}
		}
	}
	f("500:60s,10000:1m, 500:30s", Profile{{500, time.Minute}, {10000, time.Minute}, {500, 30 * time.Second}}, "")
	f("2.5:2s", Profile{{2.5, 2 * time.Second}}, "")
	f("500", nil, `rate profile "500": step "500" is not RATE:DURATION`)
	f("0:1s", nil, `rate profile "0:1s": rate "0" is not a positive number of events per second`)
	f("x:1s", nil, `rate profile "x:1s": rate "x" is not a positive number of events per second`)
	f("5:1", nil, `rate profile "5:1": duration "1" is not a positive duration like 60s`)
	f("5:-1s", nil, `rate profile "5:-1s": duration "-1s" is not a positive duration like 60s`)
}

// TestProfileSchedule: events are spread evenly within each step, and the
// steps follow each other.
func TestProfileSchedule(t *testing.T) {
	p := Profile{{10, time.Second}, {100, 2 * time.Second}}
	if p.Events() != 210 || p.Duration() != 3*time.Second {
		t.Fatalf("events %d duration %s, want 210 and 3s", p.Events(), p.Duration())
	}
	for _, c := range []struct {
		i  int
		at time.Duration
		ok bool
	}{{0, 0, true}, {9, 900 * time.Millisecond, true}, {10, time.Second, true}, {11, time.Second + 10*time.Millisecond, true}, {209, 2990 * time.Millisecond, true}, {210, 3 * time.Second, false}} {
		at, ok := p.At(c.i)
		if ok != c.ok || (ok && (at-c.at).Abs() > time.Microsecond) {
			t.Errorf("At(%d) = %s,%v want %s,%v", c.i, at, ok, c.at, c.ok)
		}
	}
	if p.RateAt(500*time.Millisecond) != 10 || p.RateAt(1500*time.Millisecond) != 100 || p.RateAt(4*time.Second) != 0 {
		t.Error("RateAt")
	}
}

func TestTopicPicker(t *testing.T) {
	// f draws n topics of the picker for topics names and skew and checks
	// each topic's count is within tol (relative) of TopicShares'.
	f := func(topics int, skew float64, n int, tol float64) {
		t.Helper()
		names := make([]string, topics)
		tp, err := newTopicPicker(Produce{Topics: names, TopicSkew: skew, Events: Config{Seed: 3}})
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]int, topics)
		for range n {
			counts[tp.pick()]++
		}
		shares := TopicShares(topics, skew)
		var sum float64
		for i, want := range shares {
			sum += want
			got := float64(counts[i]) / float64(n)
			// Topics expecting 10,000 events or more: 5% is 5 standard deviations.
			if want*float64(n) >= 10_000 && math.Abs(got-want) > tol*want {
				t.Errorf("%d topics, skew %g: topic %d got %.4f of the events, want %.4f", topics, skew, i, got, want)
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%d topics, skew %g: shares add up to %g", topics, skew, sum)
		}
		if skew > 0 && counts[0] <= counts[topics-1] {
			t.Errorf("%d topics, skew %g: first topic %d events, last %d", topics, skew, counts[0], counts[topics-1])
		}
	}
	f(100, 0, 100_000, 0) // round-robin: exact
	f(500, 0, 500_000, 0) // round-robin: exact
	f(100, 1.1, 1_000_000, 0.05)
	f(500, 1.3, 1_000_000, 0.05)
	if _, err := newTopicPicker(Produce{Topics: []string{"a", "b"}, TopicSkew: 0.9}); err == nil {
		t.Error("topic skew 0.9 accepted")
	}
}

package budget

import (
	"math"
	"testing"
	"time"
)

// at is simEpoch plus s seconds.
func at(s float64) time.Time { return simEpoch.Add(time.Duration(s * float64(time.Second))) }

// feed observes a server writing rate INSERTs per minute (this connector
// none of them) from second from to second to, every 5 s, and returns the
// last share.
func feed(c *Controller, from, to float64, server *uint64, rate, demand float64) Share {
	var sh Share
	for s := from; s <= to; s += 5 {
		sh = c.Observe(Sample{At: at(s), Server: *server, Demand: demand})
		*server += uint64(rate / 12)
	}
	return sh
}

// feedUptime observes a minute of a server an hour up, at 120/min.
func feedUptime(c *Controller, demand float64) Share {
	var sh Share
	for i := range 13 {
		sh = c.Observe(Sample{At: at(float64(5 * i)), Server: uint64(10 * i), Uptime: time.Hour + time.Duration(5*i)*time.Second, Demand: demand})
	}
	return sh
}

func TestShare(t *testing.T) {
	s := Settings{PerMinute: 120} // target 108, Min 1.2
	const demand = 300.0
	tests := []struct {
		name string
		run  func(t *testing.T, c *Controller) Share
		want func(t *testing.T, sh Share)
	}{
		{"before any sample: the least share",
			func(t *testing.T, c *Controller) Share { return c.Share() },
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonStarting || sh.PerMinute != 1.2 {
					t.Errorf("got %+v", sh)
				}
			}},
		{"less than a window: still starting, and never more than the demand",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				return feed(c, 0, 25, &n, 60, 0.5)
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonStarting || sh.PerMinute != 0.5 {
					t.Errorf("got %+v", sh)
				}
			}},
		{"first price on an idle server: a slow start from twice the least share to the whole demand",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				first := feed(c, 0, 30, &n, 0, demand)
				if first.Reason != ReasonShared || first.Price != 0 || first.PerMinute != 2.4 {
					t.Errorf("first price: %+v", first)
				}
				half := feed(c, 35, 45, &n, 0, demand)
				if math.Abs(half.PerMinute-4.8) > 1e-9 {
					t.Errorf("half a window later: %+v, want the share doubled", half)
				}
				return feed(c, 50, 180, &n, 0, demand)
			},
			func(t *testing.T, sh Share) {
				if sh.Price != 0 || sh.PerMinute != demand {
					t.Errorf("got %+v", sh)
				}
			}},
		{"at the target the price takes over from the slow start, capped as a first price is",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				feed(c, 0, 30, &n, 0, demand)
				var last Share
				for s := 35.0; s <= 120; s += 5 {
					last = feed(c, s, s, &n, 108, demand)
				}
				return last
			},
			func(t *testing.T, sh Share) {
				// Between where the slow start got to and half a fair split
				// with the others (54 × 300/408 = 39.7), the leak since.
				if sh.Price <= 0 || sh.PerMinute < 10 || sh.PerMinute > 60 {
					t.Errorf("got %+v, want a price holding the share between the slow start's and half a split", sh)
				}
			}},
		{"first price on a server a little over the target: the price the others hold there (φ*)",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				return feed(c, 0, 30, &n, 120, 10*demand) // a demand large enough for the cap below not to bind
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonShared || math.Abs(sh.Server-120) > 3 {
					t.Fatalf("got %+v", sh)
				}
				want := DefaultGain / DefaultLeak * math.Log(sh.Server/108)
				if math.Abs(sh.Price-want) > 1e-9 || sh.PerMinute != 10*demand*math.Exp(-want) {
					t.Errorf("price %v share %v, want price %v", sh.Price, sh.PerMinute, want)
				}
			}},
		{"first price on a server at twice the target: capped, half a split as if the others wanted what they send",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				return feed(c, 0, 30, &n, 216, demand)
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonShared || math.Abs(sh.Server-216) > 3 {
					t.Fatalf("got %+v", sh)
				}
				// T/2 × demand/(demand + others): 54 × 300/(300+216).
				if want := 54 * demand / (demand + sh.Server); math.Abs(sh.PerMinute-want) > 1e-9 {
					t.Errorf("share %v (price %v), want %v", sh.PerMinute, sh.Price, want)
				}
			}},
		{"over the target, the price rises; under it, it falls",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				feed(c, 0, 30, &n, 108, demand) // priced at about 0
				up := feed(c, 35, 120, &n, 150, demand)
				if up.Price <= 0 {
					t.Errorf("price %v after 90 s at 150/min, target 108", up.Price)
				}
				down := feed(c, 125, 240, &n, 60, demand)
				if down.Price >= up.Price {
					t.Errorf("price %v after 2 min at 60/min, was %v", down.Price, up.Price)
				}
				return down
			},
			func(t *testing.T, sh Share) {}},
		{"the price never passes MaxPrice and the share never falls under Min",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				return feed(c, 0, 1200, &n, 100000, demand)
			},
			func(t *testing.T, sh Share) {
				if sh.Price != DefaultMaxPrice || sh.PerMinute != 1.2 {
					t.Errorf("got %+v", sh)
				}
			}},
		{"own INSERTs are told apart from the others'",
			func(t *testing.T, c *Controller) Share {
				var sh Share
				for i := range 7 {
					sh = c.Observe(Sample{At: at(float64(5 * i)), Server: uint64(30 * i), Own: uint64(10 * i), Demand: demand})
				}
				return sh
			},
			func(t *testing.T, sh Share) {
				if sh.Server != 360 || sh.Own != 120 || sh.Others != 240 {
					t.Errorf("got %+v", sh)
				}
			}},
		{"the server's count goes back (a restart): the price is kept",
			func(t *testing.T, c *Controller) Share {
				n := uint64(1000)
				p := feed(c, 0, 60, &n, 216, demand).Price
				sh := c.Observe(Sample{At: at(65), Server: 3, Demand: demand / 2})
				if sh.Price != p {
					t.Errorf("price %v after the reset, was %v", sh.Price, p)
				}
				return sh
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonReset || sh.PerMinute != max(1.2, demand/2*math.Exp(-sh.Price)) {
					t.Errorf("got %+v", sh)
				}
			}},
		{"the uptime goes back (a restart that already counted as many INSERTs): a reset",
			func(t *testing.T, c *Controller) Share {
				if sh := feedUptime(c, demand); sh.Reason != ReasonShared {
					t.Fatalf("got %+v before the restart", sh)
				}
				return c.Observe(Sample{At: at(65), Server: 200, Uptime: 4 * time.Second, Demand: demand})
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonReset {
					t.Errorf("got %+v", sh)
				}
			}},
		{"the uptime jumps ahead (another server answers at the address): a reset",
			func(t *testing.T, c *Controller) Share {
				feedUptime(c, demand)
				return c.Observe(Sample{At: at(65), Server: 200, Uptime: 30 * time.Hour, Demand: demand})
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonReset {
					t.Errorf("got %+v", sh)
				}
			}},
		{"the uptime follows on: no reset",
			func(t *testing.T, c *Controller) Share {
				feedUptime(c, demand)
				return c.Observe(Sample{At: at(65), Server: 200, Uptime: time.Hour + 66*time.Second, Demand: demand})
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonShared {
					t.Errorf("got %+v", sh)
				}
			}},
		{"unreadable after a price: the last price, following the demand",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				p := feed(c, 0, 60, &n, 216, demand).Price
				sh := c.Unreadable(at(70), 2*demand)
				if sh.Price != p {
					t.Errorf("price %v, was %v", sh.Price, p)
				}
				return sh
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonUnreadable || sh.PerMinute != max(1.2, 2*demand*math.Exp(-sh.Price)) {
					t.Errorf("got %+v", sh)
				}
			}},
		{"never read: the whole target, as if alone",
			func(t *testing.T, c *Controller) Share { return c.Unreadable(at(0), demand) },
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonAlone || sh.PerMinute != 108 {
					t.Errorf("got %+v", sh)
				}
			}},
		{"a sample older than the last is ignored",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				before := feed(c, 0, 60, &n, 216, demand)
				after := c.Observe(Sample{At: at(10), Server: 0, Demand: 1})
				if after != before {
					t.Errorf("got %+v, was %+v", after, before)
				}
				return after
			},
			func(t *testing.T, sh Share) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.want(t, tc.run(t, New(s)))
		})
	}
}

func TestSettingsDefaults(t *testing.T) {
	got := New(Settings{PerMinute: 200, Target: 2}).Settings()
	want := Settings{PerMinute: 200, Target: DefaultTarget, Window: DefaultWindow, Gain: DefaultGain,
		Leak: DefaultLeak, Min: 2, MaxPrice: DefaultMaxPrice}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

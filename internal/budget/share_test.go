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
	s := Settings{PerMinute: 120} // target 96, Min 1.2
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
		{"starting with no demand yet: the least share, never 0 (no budget at all to the scheduler)",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				return feed(c, 0, 25, &n, 60, 0)
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonStarting || sh.PerMinute != 1.2 {
					t.Errorf("got %+v", sh)
				}
			}},
		{"first price on an idle server: a slow start from twice the least share to the whole budget",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				first := feed(c, 0, 30, &n, 0, demand)
				if first.Reason != ReasonShared || first.Price != 0 || first.PerMinute != 2.4 {
					t.Errorf("first price: %+v", first)
				}
				later := feed(c, 35, 60, &n, 0, demand)
				if math.Abs(later.PerMinute-4.8) > 1e-9 {
					t.Errorf("a window later: %+v, want the share doubled", later)
				}
				return feed(c, 65, 300, &n, 0, demand)
			},
			func(t *testing.T, sh Share) {
				// The demand is more than the budget: the room caps it.
				if sh.Price != 0 || sh.PerMinute != 120 {
					t.Errorf("got %+v", sh)
				}
			}},
		{"at the target the price takes over from the slow start, capped as a first price is",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				feed(c, 0, 30, &n, 0, demand)
				var last Share
				for s := 35.0; s <= 120; s += 5 {
					last = feed(c, s, s, &n, 96, demand)
				}
				return last
			},
			func(t *testing.T, sh Share) {
				// A price no higher than half a fair split with the others
				// (48 × 300/396), and a share no more than the room: the
				// 24 the others leave of the budget, its part
				// wish/(wish + 96).
				wish := demand * math.Exp(-sh.Price)
				if sh.Price <= 0 || wish < 48*demand/396-1e-9 {
					t.Errorf("got %+v, want a price under the first price's cap", sh)
				}
				if want := 24 * wish / (wish + 96); math.Abs(sh.PerMinute-want) > 1e-9 {
					t.Errorf("share %v, want the room %v", sh.PerMinute, want)
				}
			}},
		{"first price on a server a little over the target: the price the others hold there (φ*)",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				return feed(c, 0, 30, &n, 108, 10*demand) // a demand large enough for the cap below not to bind
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonShared || math.Abs(sh.Server-108) > 3 {
					t.Fatalf("got %+v", sh)
				}
				want := DefaultGain / DefaultLeak * math.Log(sh.Server/96)
				if math.Abs(sh.Price-want) > 1e-9 {
					t.Errorf("price %v, want %v", sh.Price, want)
				}
				// The share is the room: of the 12 left under the budget,
				// the part wish/(wish + others).
				wish := 10 * demand * math.Exp(-want)
				if room := (120 - sh.Server) * wish / (wish + sh.Server); math.Abs(sh.PerMinute-room) > 1e-9 {
					t.Errorf("share %v, want the room %v", sh.PerMinute, room)
				}
			}},
		{"first price on a server at twice the target: capped, half a split as if the others wanted what they send",
			func(t *testing.T, c *Controller) Share {
				var n uint64
				return feed(c, 0, 30, &n, 192, demand)
			},
			func(t *testing.T, sh Share) {
				if sh.Reason != ReasonShared || math.Abs(sh.Server-192) > 3 {
					t.Fatalf("got %+v", sh)
				}
				// T/2 × demand/(demand + others): 48 × 300/(300+192).
				if want := 48 * demand / (demand + sh.Server); math.Abs(demand*math.Exp(-sh.Price)-want) > 1e-9 {
					t.Errorf("price %v, want the share before the room %v", sh.Price, want)
				}
				// The others alone are over the budget: no room, the least.
				if sh.PerMinute != 1.2 {
					t.Errorf("share %v, want the least, 1.2", sh.PerMinute)
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
				if sh.Reason != ReasonAlone || sh.PerMinute != 96 {
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

func TestRoom(t *testing.T) {
	c := New(Settings{PerMinute: 120}) // Min 1.2
	tests := []struct {
		name                    string
		wish, server, own, prev float64
		want                    float64
	}{
		{"alone on an idle server: the whole budget", 300, 0, 0, 0, 120},
		{"alone and sending: the whole budget", 300, 100, 100, 0, 120},
		{"wanting what it sends beside others: its wish, under its room", 30, 90, 30, 0, 30},
		{"wanting more than it sends: its part wish/(wish + others) of the room", 60, 90, 30, 0, 30 + 30*60.0/120},
		{"the server over the budget: a cut by the same part", 50, 150, 50, 0, 50 - 30*50.0/150},
		{"joining beside others: a part of the room only", 25, 100, 0, 0, 20 * 25.0 / 125},
		{"the others alone over the budget: the least", 300, 300, 0, 0, 1.2},
		{"a wish under the room is the share", 10, 20, 10, 0, 10},
		{"held (sending its share less the scheduler's reserve): the last share is kept", 30, 100, 18, 25, 25},
		{"held, the server near the budget (past its reserve): no longer kept", 30, 110, 18, 25, 18 + 10*30.0/(30+92)},
		{"its own count above the server's (a cluster's shards): taken as the server's", 80, 50, 80, 0, 80},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.room(tc.wish, tc.server, tc.own, tc.prev); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("room(wish %v, server %v, own %v, last %v) = %v, want %v", tc.wish, tc.server, tc.own, tc.prev, got, tc.want)
			}
		})
	}
}

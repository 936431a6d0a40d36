// Package budget shares one ClickHouse server's INSERT budget
// (clickhouse.max_inserts_per_minute) among the connectors that write to
// it, with no coordinator: each connector reads the server's own count of
// INSERTs (system.events' InsertQuery, cumulative since the server
// started) every few seconds and takes a share of the budget in proportion
// to what it has to write. The server's count holds every INSERT, whoever
// sent it: the other connectors' and other clients' (which are not sinks
// and are not throttled, so they shrink what the sinks get).
//
// The law, in one place (docs/sizing.md, "Sharing a server's budget"):
//
//	R       = the server's INSERTs per minute over the last Window (from its counter)
//	O       = this connector's INSERTs per minute over the same window
//	T       = Target × budget                       (what the sum aims at)
//	price φ ← φ + dt × (Gain × ln(R / T) − Leak × φ),  φ ≥ 0
//	wish    = demand × e^−φ
//	room    = O + (budget − R) × wish / (wish + R − O)
//	          (no less than the last share while R ≤ (1 − pace.Reserve) × budget)
//	share   = max(Min, min(wish, room))
//
// Every connector runs the same law on the same R. The Gain term is an
// integral controller on the server's total: while R exceeds T every
// price rises, while R is below it every price falls, so the total is
// driven toward the budget whatever the number of connectors. The Leak
// pulls each price toward 0 and so toward the one value the integral and
// the leak balance at, which depends on R alone: φ* = (Gain/Leak) ×
// ln(R/T). Prices that started apart (a connector that joined late, one
// whose price was pushed while another's was not) therefore converge to
// the same φ*, and equal prices give shares in proportion to demand. The
// price of the first decision is φ* of the R observed then, so a connector
// joining half-way starts at the price the others have converged to (capped
// so that a rate caught while the others are still settling does not
// starve it: Observe says how).
//
// The cost of having no coordinator is a bias: at equilibrium R/T =
// (total demand/T)^(1/(1+Gain/Leak)), so R sits a little above T when the
// sinks want much more than the budget (Target 0.8 leaves room for it) and
// a little below it when they want barely more (Gain/Leak = 20: demand 10×
// the target puts R at 1.12 T, 3× at 1.05 T, 2× at 1.03 T).
//
// The room is what holds the sum within the budget while the prices
// settle (pods starting, joining, leaving) and whatever the bias: each
// connector may send what it sends now plus its part of what the budget
// leaves (a cut, its part of the excess, when the server is over it).
// The parts wish/(wish + others' rate) sum to about 1 when each connector
// wants about what it sends, so the connectors grow into the room
// together rather than each into all of it; one that wants more than it
// sends (a joiner) takes a larger part, and the price, which the room
// keeps near T rather than far under it, makes the others yield. In
// equilibrium R is under the budget and the room does not bind. Gain/Leak
// trades that bias against how fast shares become fair (Leak: a time
// constant of 10 minutes, though a joining connector is fair within a
// minute or two as it starts at φ*), and Gain is bounded by the delay of
// the loop: the window, and the scheduler's own minute (internal/pace
// holds a minute's INSERTs within the allowance, so a cut shows in R up to
// a minute later). The simulation, which runs the scheduler's rules
// (sim_test.go), oscillates at 1.5 to 2 times the default Gain.
//
// Edge cases, each handled in Observe and Unreadable:
//   - the server's count went down or its uptime does not follow on (a
//     restart, or another server behind the address): the window starts
//     again and the price is kept until a new rate is known;
//   - the server cannot be read after it was read: the last price is kept,
//     so the share still follows this connector's demand, priced as it was
//     (never the whole budget: the other connectors probably cannot read
//     it either, and all taking the whole budget would multiply it at the
//     moment the server comes back);
//   - the server was never read (system.events not readable by this user,
//     or down since the start): the share is the whole target, as if this
//     connector wrote alone, and Share.Reason says so;
//   - no price yet (the first Window after the first sample): the share is
//     Min; the first price is φ* of the rate over that window, and where
//     that is 0 (nobody is being held) a slow start: twice Min, doubling
//     every window (the window then shows what the last doubling sent)
//     while the server is under its target, handed to the price when it
//     reaches it, so connectors starting together do not each take the
//     whole budget (they reach it in about two and a half minutes).
//
// A Controller does no I/O and reads no clock: callers pass the time in.
// A Sharer (sharer.go) is the I/O side: it reads every server's count
// through a Reader (writer.Writer.InsertQueries, writer.Cluster's per
// shard) every few seconds on a goroutine of its own, feeds one Controller
// per server, and answers the scheduler's allowance (internal/pace's
// Allowance) with the latest share.
//
// Concurrency: a Controller is owned by one goroutine; a Sharer is safe
// for concurrent use.
package budget

import (
	"math"
	"time"

	"sink/internal/pace"
)

// Settings are the budget of one server and the law's tuning.
type Settings struct {
	// PerMinute is the server's budget: INSERTs per minute, summed over
	// every writer.
	PerMinute float64
	// Target is the fraction of PerMinute the sum aims at (default 0.8):
	// room for the bias of the law and for the window's lag, so that the
	// room (the cap that holds the sum within PerMinute) binds only while
	// the prices settle.
	Target float64
	// Window is how far back the server's rate is measured (default 30s).
	Window time.Duration
	// Gain is the integral gain, per minute (default 2).
	Gain float64
	// Leak is the pull toward the common price, per minute (default 0.1).
	Leak float64
	// Min is the least share ever given, INSERTs per minute (default 1% of
	// PerMinute, at least 1 and at most PerMinute): a connector is never
	// starved by a price.
	Min float64
	// MaxPrice caps φ (default 10: shares down to e^−10 of demand).
	MaxPrice float64
}

// Defaults of Settings.
const (
	DefaultTarget   = 0.8
	DefaultWindow   = 30 * time.Second
	DefaultGain     = 2
	DefaultLeak     = 0.1
	DefaultMinShare = 0.01
	DefaultMaxPrice = 10.0
)

func (s Settings) withDefaults() Settings {
	if s.Target <= 0 || s.Target > 1 {
		s.Target = DefaultTarget
	}
	if s.Window <= 0 {
		s.Window = DefaultWindow
	}
	if s.Gain <= 0 {
		s.Gain = DefaultGain
	}
	if s.Leak <= 0 {
		s.Leak = DefaultLeak
	}
	if s.Min <= 0 {
		s.Min = min(max(DefaultMinShare*s.PerMinute, 1), s.PerMinute)
	}
	if s.MaxPrice <= 0 {
		s.MaxPrice = DefaultMaxPrice
	}
	return s
}

// Sample is one reading, taken at At.
type Sample struct {
	At time.Time
	// Server is the server's cumulative InsertQuery count (on a cluster,
	// summed over the shard's replicas: a replica's fetches do not count).
	Server uint64
	// Own is this connector's cumulative count of INSERTs it sent to the
	// server (any table), counted by itself: it splits the server's rate
	// into this connector's and the others' in Share, nothing more.
	Own uint64
	// Demand is how many INSERTs per minute this connector would send to
	// the server unhindered.
	Demand float64
	// Uptime is how long the server has run (0: unknown). It tells a
	// restart, or another server answering at the address, from a count
	// that merely went on.
	Uptime time.Duration
}

// Reason says what decided a Share.
type Reason string

const (
	ReasonStarting   Reason = "starting"   // too few samples for a rate yet
	ReasonShared     Reason = "shared"     // the law
	ReasonReset      Reason = "reset"      // the server's count went back (a restart): last price kept
	ReasonUnreadable Reason = "unreadable" // the server cannot be read: last price kept
	ReasonAlone      Reason = "alone"      // never read: the whole target, as if alone
)

// Reasons lists every Reason, for metric labels.
var Reasons = []Reason{ReasonStarting, ReasonShared, ReasonReset, ReasonUnreadable, ReasonAlone}

// Share is the controller's decision.
type Share struct {
	// PerMinute is this connector's allowance: INSERTs per minute to the server.
	PerMinute float64
	// Server, Own and Others are the measured INSERTs per minute over the
	// window: the server's total, this connector's, everyone else's.
	Server, Own, Others float64
	// Demand is the demand the share was computed from.
	Demand float64
	// Price is φ: the share is Demand × e^−Price.
	Price float64
	// Reason says what decided it.
	Reason Reason
}

type point struct {
	at          time.Time
	server, own uint64
	uptime      time.Duration
}

// uptimeSlack is how much more a server's uptime may grow than the time
// between two samples (the two clocks, the query's own time).
const uptimeSlack = 5 * time.Second

// restarted reports whether x comes from another life of the server than
// prev (or another server): its count went back, or its uptime does not
// follow on. (The server's count rising less than this connector's own
// INSERTs is not taken as a sign: on a cluster a batch counts against
// every shard though a shard it has no rows for gets no INSERT.)
func restarted(prev point, x Sample) bool {
	if x.Server < prev.server {
		return true
	}
	if x.Uptime == 0 || prev.uptime == 0 {
		return false
	}
	return x.Uptime < prev.uptime || x.Uptime-prev.uptime > x.At.Sub(prev.at)+uptimeSlack
}

// Controller holds one server's samples and this connector's price.
type Controller struct {
	s      Settings
	win    []point // samples within the window, oldest first
	last   time.Time
	price  float64
	priced bool    // price set from a measured rate at least once
	ramp   float64 // the slow start's cap on the share; 0: over
	read   bool    // the server was read at least once
	share  Share
}

// New starts a controller for s. Until the first price (a window after the
// first sample) the share is Min (ReasonStarting).
func New(s Settings) *Controller {
	c := &Controller{s: s.withDefaults()}
	c.share = Share{PerMinute: c.s.Min, Reason: ReasonStarting}
	return c
}

// Settings are the controller's settings with defaults applied.
func (c *Controller) Settings() Settings { return c.s }

// Share is the current decision.
func (c *Controller) Share() Share { return c.share }

func (c *Controller) target() float64 { return c.s.Target * c.s.PerMinute }

// Observe takes a sample and decides again. Samples must come in time
// order; one older than the last is ignored.
func (c *Controller) Observe(x Sample) Share {
	if c.read && !x.At.After(c.last) {
		return c.share
	}
	c.read = true
	prev := c.share.PerMinute
	if n := len(c.win); n > 0 {
		// A restarted server (or a different one behind the address): the
		// window starts again.
		if restarted(c.win[n-1], x) {
			c.last = x.At
			c.win = append(c.win[:0], point{x.At, x.Server, x.Own, x.Uptime})
			c.share = c.keep(x.Demand, ReasonReset)
			return c.share
		}
	}
	dt := x.At.Sub(c.last)
	c.last = x.At
	c.win = append(c.win, point{x.At, x.Server, x.Own, x.Uptime})
	c.trimWindow(x.At.Add(-c.s.Window))
	if len(c.win) < 2 {
		c.share = c.keep(x.Demand, ReasonStarting)
		return c.share
	}
	first := c.win[0]
	mins := x.At.Sub(first.at).Minutes()
	rs := float64(x.Server-first.server) / mins
	ro := float64(x.Own-min(x.Own, first.own)) / mins
	span := x.At.Sub(first.at)
	switch {
	case !c.priced && span < c.s.Window:
		// The first price needs a whole window: it sets where this
		// connector starts among the others.
		c.share = c.keep(x.Demand, ReasonStarting)
	case !c.priced:
		c.firstPrice(x.Demand, rs, ro)
		c.share = c.decide(x.Demand, ReasonShared)
	case span < c.s.Window/2:
		// A window started again (after a reset): too short a span to
		// act on; the price is kept.
		c.share = c.keep(x.Demand, ReasonReset)
	default:
		c.adjust(x.Demand, min(dt, c.s.Window).Minutes(), rs, ro)
		c.share = c.decide(x.Demand, ReasonShared)
	}
	if c.priced {
		c.share.PerMinute = c.room(c.share.PerMinute, rs, ro, prev)
	}
	c.share.Server, c.share.Own, c.share.Others = rs, ro, max(0, rs-ro)
	return c.share
}

// trimWindow drops samples older than cut, the window's start, keeping
// the newest one at or before it so the rate spans the whole window.
func (c *Controller) trimWindow(cut time.Time) {
	i := 0
	for i+1 < len(c.win) && !c.win[i+1].at.After(cut) {
		i++
	}
	c.win = c.win[i:]
}

// firstPrice sets the first price, from the first whole window's rates:
// rs the server's, ro this connector's own. It starts at the price the
// other connectors have converged to if they run this law. Where that is
// 0 (the server under its target: nobody is being held), the share starts
// at twice the least and doubles every window while the server stays
// under its target, until the price decides (a slow start): connectors
// starting together each see a server the others were not writing to
// yet, and must not each take the whole budget at once.
//
// φ* is steep (a tenth over T is 2 in price), so an R caught while the
// others have not settled would starve this connector for many minutes.
// It is capped at the price this connector would pay if the others wanted
// no more than they send now and it took half of a fair split of the
// target with them: demand × e^−φ ≥ T/2 × demand/(demand + others' rate).
func (c *Controller) firstPrice(demand, rs, ro float64) {
	c.price = min(c.equilibrium(rs), c.joinCap(demand, rs-ro))
	c.priced = true
	if c.price == 0 {
		c.ramp = 2 * c.s.Min
	}
}

// adjust moves the price by the law over d minutes since the last
// sample, and grows or ends a slow start.
func (c *Controller) adjust(demand, d, rs, ro float64) {
	c.price += d * (c.s.Gain*c.logRatio(rs) - c.s.Leak*c.price)
	c.price = min(max(c.price, 0), c.s.MaxPrice)
	switch {
	case c.ramp > 0 && rs < c.target():
		c.ramp *= math.Exp2(d / c.s.Window.Minutes())
	case c.ramp > 0:
		// The server reached its target: the price takes over from
		// where the slow start got to, no higher than the first
		// price's cap (the server may have dipped under its target
		// only for a moment while others were writing: a joiner's
		// slow start must not become its price).
		c.price = min(max(c.price, math.Log(max(demand, c.s.Min)/c.ramp)), c.joinCap(demand, rs-ro), c.s.MaxPrice)
		c.ramp = 0
	}
}

// room caps a share by what the budget leaves: this connector's own rate
// plus its part of the room between the server's rate and the budget
// (negative when the server is over it, and then a cut). Its part is
// wish/(wish + others' rate): every connector that wants more than it
// sends sees the same room, and these parts sum to about 1 when each
// wants about what it sends, so together they grow into the room rather
// than each into all of it. A connector that joins wants more than it
// sends and so takes a larger part; the law's price, which rises while
// the server is near its budget, makes the others yield to it.
//
// While the server is under the budget less the scheduler's reserve the
// room is never under the last share: a connector held by its share sends
// only about (1 − pace.Reserve) of it (the scheduler keeps the rest of
// the minute for deadlines), and a room of what it sends would shrink its
// share a tenth a window for no cause, keeping a connector that fell
// behind where it fell while the others keep theirs.
//
// On a cluster this connector counts a batch against every shard, also
// one that got none of its rows, so its own rate is taken as at most the
// server's.
func (c *Controller) room(wish, rs, ro, prev float64) float64 {
	ro = min(ro, rs)
	others := rs - ro
	part := 1.0
	if wish+others > 0 {
		part = wish / (wish + others)
	}
	room := ro + (c.s.PerMinute-rs)*part
	if rs <= c.s.PerMinute*(1-pace.Reserve) {
		room = max(room, prev)
	}
	return max(c.s.Min, min(wish, room))
}

// Unreadable reports that the server could not be read at now: the share
// keeps the last price (or the whole target if it was never read).
func (c *Controller) Unreadable(now time.Time, demand float64) Share {
	if !c.priced {
		c.share = Share{PerMinute: c.target(), Demand: demand, Reason: ReasonAlone}
		return c.share
	}
	c.share = c.keep(demand, ReasonUnreadable)
	return c.share
}

// keep decides with the last price, keeping the last measured rates.
func (c *Controller) keep(demand float64, r Reason) Share {
	prev := c.share
	s := c.decide(demand, r)
	if !c.priced && demand > 0 {
		// No price yet: nothing is known of the others. The least share
		// until the first rate (a window), so connectors starting
		// together do not each send the whole budget meanwhile. (With no
		// demand yet it stays the least, never 0: the scheduler reads an
		// allowance of 0 as no budget at all.)
		s.PerMinute = min(c.s.Min, demand)
	}
	s.Server, s.Own, s.Others = prev.Server, prev.Own, prev.Others
	return s
}

func (c *Controller) decide(demand float64, r Reason) Share {
	demand = max(demand, 0)
	share := demand * math.Exp(-c.price)
	if c.ramp > 0 {
		if share <= c.ramp {
			c.ramp = 0 // the slow start is over: the price decides
		} else {
			share = c.ramp
		}
	}
	return Share{PerMinute: max(c.s.Min, share), Demand: demand, Price: c.price, Reason: r}
}

// logRatio is ln(R/T), with R floored so an idle server gives a finite
// pull down.
func (c *Controller) logRatio(rs float64) float64 {
	t := c.target()
	return math.Log(max(rs, t/100) / t)
}

// joinCap is the highest price a connector starts at: the one that gives it
// half of a fair split of the target with the others if they wanted no
// more than they send (others, INSERTs per minute).
func (c *Controller) joinCap(demand, others float64) float64 {
	return max(0, math.Log(2*(max(demand, 0)+max(others, 0))/c.target()))
}

// equilibrium is φ* for a server rate: where Gain × ln(R/T) = Leak × φ.
func (c *Controller) equilibrium(rs float64) float64 {
	return min(max(c.s.Gain/c.s.Leak*c.logRatio(rs), 0), c.s.MaxPrice)
}

// Package pace holds the INSERTs a ClickHouse server receives per minute,
// summed over every table the connector writes to it, within a budget
// (clickhouse.max_inserts_per_minute) by choosing which table's open batch
// is sealed when. It is the policy of docs/sizing.md's "Many tables"
// recipe, in one place:
//
//   - A batch that fills (max_rows, max_bytes) is sealed at once, as
//     without a budget: the pipeline seals it and tells the Scheduler.
//   - A batch whose wait (max_wait, or adaptive batching's wait) has
//     passed is eligible, when its bound is a minute or more. Eligible
//     batches are sealed one at a time as the budget allows, the one with
//     the earliest deadline first: small tables are held longer, so each
//     INSERT carries more rows.
//   - A batch is never held past its deadline: then it is sealed whatever
//     the budget says. Latency wins; when that takes a server past its
//     budget the Scheduler counts it and says so (Status, Exceeded, and
//     one Episode per stretch of time over it). The deadline is its
//     table's latency bound less its servers' lead (Lead): the longest
//     time a recent INSERT there took from its seal until its rows were
//     in (the wait for an insert slot and a connection, retries, the
//     INSERT itself), plus the longest recent delay of a seal past its
//     deadline, plus Slack, so that the rows are in by the bound, not
//     merely sealed by it.
//   - When the caller says memory is short, the largest open batch goes
//     (the oldest among equals), whatever the budget says.
//
// The budget of a server is held two ways at once: a sliding window of
// the last minute never holds more INSERTs than the allowance, and a
// token bucket (allowance/60 tokens a second, at most BurstSeconds of
// them saved up) spreads them over the minute instead of spending them
// all in its first second. Every seal counts, whatever sealed it.
//
// A batch whose bound is under a minute is never sealed early: it goes at
// its bound, and the window keeps a reserve for it (the most seals it can
// make in a minute at that pace, floor(60s / bound) + 1). Eligible
// batches of longer bounds are sealed early only while the window keeps
// that reserve, and at least Reserve of the allowance, for the deadlines
// that come while it is full: a deadline then finds room, and does not
// take the server past its budget. A flush of everything (Flushed: shutdown, rebalance, pause) counts in
// the window too, but never as over the budget.
//
// When the allowance is a share of a larger budget (Ceiling: several
// connectors share a server), the share may be far under what the open
// batches' bounds need for minutes (a connector starting), and batches
// opened together would all reach their bound in the same minute. Their
// deadlines are then spread: eligible batches go ahead of their deadline,
// at the pace their bounds need and at most the whole budget's (spread).
//
// Earliest deadline first on the allowance's pace meets every deadline
// that can be met at that pace, and spends the budget only on batches
// that have waited their wait: with many small tables each one's batch
// grows for about tables × 60s / allowance.
//
// The allowance per minute comes from an Allowance, asked on each
// decision, so a share computed elsewhere (across the pods that write to
// one server) can replace the fixed one from the configuration.
//
// The package does no I/O, reads no clock and takes no locks: the caller
// passes the time in (the benthos batch policy and Prometheus' remote-write
// queue manager shapes). Concurrency: a Scheduler is owned by one
// goroutine.
package pace

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Allowance says how many INSERTs per minute a server may receive from
// this connector now; 0 or less: no budget (every batch is sealed on its
// own triggers).
type Allowance interface {
	PerMinute(server string, now time.Time) float64
}

// Ceiling is an Allowance that is a share of a larger budget (the
// server's whole clickhouse.max_inserts_per_minute, shared by several
// connectors): Ceiling says that budget. The Scheduler then spreads the
// batches whose deadlines would fall due together over the minutes before
// them, at the whole budget's pace, rather than sealing them all at their
// deadline (see spread).
type Ceiling interface {
	Ceiling(server string) float64
}

// Fixed is the allowance of clickhouse.max_inserts_per_minute: the same for
// every server at all times.
type Fixed float64

// PerMinute is f.
func (f Fixed) PerMinute(string, time.Time) float64 { return float64(f) }

// Reason says why Due hands out a batch.
type Reason uint8

const (
	// Budget: the batch was eligible and its servers had room.
	Budget Reason = iota + 1
	// Deadline: the batch reached its table's latency bound.
	Deadline
	// Memory: memory is short and the batch was the largest.
	Memory
)

func (r Reason) String() string {
	switch r {
	case Budget:
		return "budget"
	case Deadline:
		return "deadline"
	case Memory:
		return "memory"
	}
	return "unknown"
}

// Window is the span the budget is counted over.
const Window = time.Minute

// Reserve is the least share of the allowance (at least one INSERT) that
// eligible batches leave in the window for the batches whose deadline
// comes.
const Reserve = 0.1

// BurstSeconds is how many seconds of allowance the token bucket saves up
// at most (and at least one token): enough to let a few tables that became
// eligible together go at once, little enough to keep the INSERTs spread
// over the minute.
const BurstSeconds = 3

// Slack is the least lead (Lead): the loop's own delay between a deadline
// and its seal, and the row's between the INSERT's end and the sink
// hearing of it.
const Slack = 500 * time.Millisecond

// LeadWindow is how long an INSERT's time counts in its servers' lead.
const LeadWindow = 5 * time.Minute

// maxLeadShare is the most of a batch's bound its lead takes: INSERTs
// that take longer (a server in trouble) do not make every batch go at
// once.
const maxLeadShare = 4

// maxTook is how many INSERT times a server keeps at most within
// LeadWindow (the newest).
const maxTook = 1024

// entry is one open batch.
type entry struct {
	servers  []string
	opened   time.Time
	eligible time.Time
	deadline time.Time
	wait     time.Duration
	bound    time.Duration
	// due: when the Scheduler first knew the deadline had come (its
	// deadline, or when the deadline was set if already past): a seal
	// after it is late.
	due    time.Time
	bytes  int
	need   float64 // its bound is under a Window: the most seals it makes in one at its bound's pace
	spread bool    // Due handed it out to spread deadlines (spread)
}

// server is one server's budget state.
type server struct {
	name   string
	starts []time.Time // the seals of the last Window, oldest first
	tokens float64
	at     time.Time // when tokens was last brought up to date
	short  float64   // the need of its open batches
	// over: the server is in an episode over its budget; episodes counts
	// them, exceeded the INSERTs past the allowance.
	over       bool
	overSince  time.Time
	lastSpread time.Time // the last seal by spread
	episodes   int64
	exceeded   int64
	// took: the INSERTs of the last LeadWindow, each one's time from its
	// seal until its rows were in (Took); late: the seals past their
	// deadline, each one's delay (the owner busy when it fell due); lead:
	// Slack and the longest of each, brought up to date when they change.
	took, late spans
	lead       time.Duration
}

// spans are durations, each with when it was seen, oldest first: the
// last LeadWindow of them, at most maxTook.
type spans []span

type span struct {
	at time.Time
	d  time.Duration
}

// add counts d, seen at now.
func (ss *spans) add(now time.Time, d time.Duration) {
	*ss = append(*ss, span{at: now, d: max(d, 0)})
	if n := len(*ss); n > maxTook {
		*ss = append((*ss)[:0], (*ss)[n-maxTook:]...)
	}
}

// prune drops the spans seen LeadWindow before now or earlier.
func (ss *spans) prune(now time.Time) {
	cut := 0
	for cut < len(*ss) && !(*ss)[cut].at.After(now.Add(-LeadWindow)) {
		cut++
	}
	if cut > 0 {
		*ss = append((*ss)[:0], (*ss)[cut:]...)
	}
}

// longest is the longest of ss (0: none).
func (ss spans) longest() time.Duration {
	var l time.Duration
	for _, x := range ss {
		l = max(l, x.d)
	}
	return l
}

// Scheduler decides, for the open batches of many tables, which one is
// sealed when. K names an open batch (a table, or a table-partition).
type Scheduler[K comparable] struct {
	allow   Allowance
	open    map[K]*entry
	servers map[string]*server
	events  []Episode
	gaps    map[string]time.Duration // spread's spacing per server, from latestStarts
	seen    time.Time                // the latest time a call passed in
}

// see notes now as the latest time passed in.
func (s *Scheduler[K]) see(now time.Time) {
	if now.After(s.seen) {
		s.seen = now
	}
}

// New makes a Scheduler that asks allow for each server's budget.
func New[K comparable](allow Allowance) *Scheduler[K] {
	return &Scheduler[K]{allow: allow, open: map[K]*entry{}, servers: map[string]*server{}}
}

// Open tells the Scheduler that k has an open batch, whose first row came
// at opened, which may be sealed on the budget from opened+wait on and
// whose rows must be in by opened+bound (bound 0: no deadline; a bound
// shorter than wait makes the deadline the wait), and whose INSERT goes to
// servers. Its deadline, when it is sealed whatever the budget says, is
// the bound less its servers' lead (Lead). Calling it again for an open k
// updates wait and bound (a new adaptive target) and keeps opened.
func (s *Scheduler[K]) Open(k K, servers []string, opened time.Time, wait, bound time.Duration) {
	e := s.open[k]
	if e == nil {
		e = &entry{opened: opened}
		s.open[k] = e
	}
	s.unneed(e)
	e.servers = servers
	e.eligible = e.opened.Add(wait)
	e.wait, e.bound = wait, bound
	for _, name := range servers {
		if s.servers[name] == nil {
			s.servers[name] = &server{name: name}
		}
	}
	s.place(e)
}

// place sets e's deadline, and its need when its bound is under a
// Window, from its bound and its servers' lead now.
func (s *Scheduler[K]) place(e *entry) {
	s.unneed(e)
	e.deadline = time.Time{}
	if e.bound <= 0 {
		return
	}
	span := e.wait // a wait past the bound (adaptive batching's pushback) wins
	if e.wait <= e.bound {
		span = e.bound - s.lead(e)
	}
	span = max(span, time.Millisecond)
	e.deadline = e.opened.Add(span)
	e.due = e.deadline
	if e.due.Before(s.seen) {
		e.due = s.seen
	}
	if max(e.bound, e.wait) < Window {
		// The most seals it can make in a Window at its deadline's pace.
		e.need = math.Floor(float64(Window)/float64(span)) + 1
	}
	for _, name := range e.servers {
		s.servers[name].short += e.need
	}
}

// lead is how long before its bound e is sealed at the latest: its
// servers' largest Lead, at most a quarter of its bound.
func (s *Scheduler[K]) lead(e *entry) time.Duration {
	var l time.Duration
	for _, name := range e.servers {
		l = max(l, s.servers[name].lead, Slack)
	}
	return min(l, e.bound/maxLeadShare)
}

// prune drops sv's INSERT times and late seals older than LeadWindow at
// now, and sets its lead: Slack, plus the longest INSERT time and the
// longest delay of a seal past its deadline it holds.
func (sv *server) prune(now time.Time) {
	sv.took.prune(now)
	sv.late.prune(now)
	sv.lead = sv.took.longest() + sv.late.longest() + Slack
}

// Lead is how long before a batch's bound its INSERT into server is
// sealed at the latest, so that its rows are in by the bound: Slack plus
// the longest time an INSERT into it took from its seal until its rows
// were in (Took) plus the longest delay of a seal past its deadline, over
// the last LeadWindow; at most a quarter of the bound (Open).
func (s *Scheduler[K]) Lead(server string, now time.Time) time.Duration {
	sv := s.servers[server]
	if sv == nil {
		return Slack
	}
	sv.prune(now)
	return sv.lead
}

// Took tells the Scheduler that an INSERT into servers ended at now, d
// after its batch was sealed (the wait for an insert slot and a
// connection, retries and the INSERT itself): the open batches' deadlines
// on those servers move by the new lead.
func (s *Scheduler[K]) Took(servers []string, now time.Time, d time.Duration) {
	s.see(now)
	for _, name := range servers {
		sv := s.servers[name]
		if sv == nil {
			sv = &server{name: name}
			s.servers[name] = sv
		}
		sv.took.add(now, d)
		sv.prune(now)
	}
	s.replace(servers)
}

// replace sets again the deadline of each open batch on one of servers.
func (s *Scheduler[K]) replace(servers []string) {
	for _, e := range s.open {
		for _, name := range e.servers {
			if slices.Contains(servers, name) {
				s.place(e)
				break
			}
		}
	}
}

// unneed takes e's need off its servers.
func (s *Scheduler[K]) unneed(e *entry) {
	for _, name := range e.servers {
		if sv := s.servers[name]; sv != nil {
			sv.short = max(sv.short-e.need, 0)
		}
	}
	e.need = 0
}

// Size tells the Scheduler how many bytes k's open batch holds (for the
// choice when memory is short).
func (s *Scheduler[K]) Size(k K, bytes int) {
	if e := s.open[k]; e != nil {
		e.bytes = bytes
	}
}

// IsOpen reports whether k has an open batch the Scheduler knows of.
func (s *Scheduler[K]) IsOpen(k K) bool { return s.open[k] != nil }

// Forget drops k's open batch without counting an INSERT (its records
// were dropped: a lost partition).
func (s *Scheduler[K]) Forget(k K) {
	if e := s.open[k]; e != nil {
		s.unneed(e)
	}
	delete(s.open, k)
}

// Sealed tells the Scheduler that k's batch (open or not: a seal by rows
// or bytes of a batch it was not told about counts too) was sealed at now
// and goes to servers: each of them counts one INSERT.
func (s *Scheduler[K]) Sealed(k K, servers []string, now time.Time) {
	s.sealed(k, servers, now, false)
}

// Flushed is Sealed for a batch sealed because the connector flushes
// everything (shutdown, a rebalance, a pause): it counts in the window,
// but never as over the budget.
func (s *Scheduler[K]) Flushed(k K, servers []string, now time.Time) {
	s.sealed(k, servers, now, true)
}

func (s *Scheduler[K]) sealed(k K, servers []string, now time.Time, flush bool) {
	s.see(now)
	spread := false
	var late time.Duration // how long past its deadline it was sealed
	if e := s.open[k]; e != nil {
		if servers == nil {
			servers = e.servers
		}
		s.unneed(e)
		spread = e.spread
		if !e.deadline.IsZero() && now.After(e.due) {
			late = now.Sub(e.due)
		}
	}
	delete(s.open, k)
	for _, name := range servers {
		sv := s.servers[name]
		if sv == nil {
			sv = &server{name: name}
			s.servers[name] = sv
		}
		s.take(sv, now, flush, spread)
		if late > 0 && !flush {
			sv.late.add(now, late)
			sv.prune(now)
		}
	}
}

// take counts one INSERT against sv at now. A spread seal is over the
// budget only past the whole budget (Ceiling), not the share: it keeps the
// server within the budget by going ahead of a deadline.
func (s *Scheduler[K]) take(sv *server, now time.Time, flush, spread bool) {
	a := s.allow.PerMinute(sv.name, now)
	s.refill(sv, a, now)
	sv.starts = append(sv.starts, now)
	if a <= 0 {
		return
	}
	sv.tokens-- // may go below zero: a forced seal is a debt paid by later ones
	limit := a
	if c, ok := s.allow.(Ceiling); ok && spread {
		limit = max(a, c.Ceiling(sv.name))
	}
	if n := len(sv.starts); float64(n) > limit && !flush {
		sv.exceeded++
		if !sv.over {
			sv.over, sv.overSince = true, now
			sv.episodes++
			s.events = append(s.events, Episode{Server: sv.name, Start: true, At: now, Count: n, PerMinute: a})
		}
	}
}

// refill prunes sv's window and brings its tokens up to now; leaving an
// episode over budget is noticed here too.
func (s *Scheduler[K]) refill(sv *server, a float64, now time.Time) {
	cut := 0
	for cut < len(sv.starts) && !sv.starts[cut].After(now.Add(-Window)) {
		cut++
	}
	if cut > 0 {
		sv.starts = append(sv.starts[:0], sv.starts[cut:]...)
	}
	if a <= 0 {
		sv.tokens, sv.at = 0, now
		return
	}
	burst := max(1, a*BurstSeconds/60)
	if sv.at.IsZero() {
		sv.tokens = burst
	} else if now.After(sv.at) {
		sv.tokens = min(burst, sv.tokens+now.Sub(sv.at).Seconds()*a/60)
	}
	sv.at = now
	if sv.over && float64(len(sv.starts)) <= a {
		sv.over = false
		s.events = append(s.events, Episode{Server: sv.name, At: now, Count: len(sv.starts), PerMinute: a, Since: sv.overSince})
	}
}

// room reports whether sv may take an INSERT on the budget at now, and if
// not, how long until it may (0: not known, e.g. waiting for the window).
func (s *Scheduler[K]) room(sv *server, now time.Time) (bool, time.Duration) {
	a := s.allow.PerMinute(sv.name, now)
	s.refill(sv, a, now)
	if a <= 0 {
		return true, 0
	}
	var wait time.Duration
	if sv.tokens < 1 {
		wait = time.Duration((1 - sv.tokens) * 60 / a * float64(time.Second))
	}
	if limit := early(a, sv.short); len(sv.starts) >= limit {
		// The window frees a place when enough of its oldest INSERTs
		// leave it.
		i := max(len(sv.starts)-limit, 0)
		wait = max(wait, sv.starts[i].Add(Window).Sub(now)+time.Nanosecond)
	}
	if wait > 0 {
		return false, wait
	}
	return true, 0
}

// early is how many INSERTs the window may hold for a batch to be sealed
// before its deadline: the allowance less the reserve, Reserve of it or
// short (the need of the open batches bound under a minute), at least one
// (so an allowance under 2 a minute keeps none).
func early(a, short float64) int {
	keep := max(1, math.Ceil(a*Reserve), math.Ceil(short))
	return max(int(math.Floor(a-keep)), 1)
}

// Due returns the open batch to seal now and why; ok is false when none
// is due. memShort says that memory is short: the largest open batch goes.
// The caller seals it, calls Sealed, and asks again until ok is false.
func (s *Scheduler[K]) Due(now time.Time, memShort bool) (k K, why Reason, ok bool) {
	s.see(now)
	// A deadline first: the earliest one that has passed.
	if key, ok := s.pastDeadline(now); ok {
		return key, Deadline, true
	}
	if memShort {
		if key, ok := s.largest(); ok {
			return key, Memory, true
		}
	}
	keys := s.eligible(now)
	for _, key := range keys {
		if e := s.open[key]; e.need == 0 && s.fits(e, now) {
			return key, Budget, true
		}
	}
	if key, ok := s.spread(keys, now); ok {
		return key, Deadline, true
	}
	return k, 0, false
}

// pastDeadline is the open batch whose deadline passed first (ok false
// when none has passed at now).
func (s *Scheduler[K]) pastDeadline(now time.Time) (best K, found bool) {
	var bestE *entry
	for key, e := range s.open {
		if !e.deadline.IsZero() && !now.Before(e.deadline) && (!found || e.deadline.Before(bestE.deadline)) {
			best, bestE, found = key, e, true
		}
	}
	return best, found
}

// largest is the open batch of the most bytes, the one opened first among
// equals (ok false when none is open).
func (s *Scheduler[K]) largest() (best K, found bool) {
	var bestE *entry
	for key, e := range s.open {
		if !found || e.bytes > bestE.bytes || (e.bytes == bestE.bytes && e.opened.Before(bestE.opened)) {
			best, bestE, found = key, e, true
		}
	}
	return best, found
}

// spreadPace is the share of a server's whole budget (Ceiling) that the
// spread of deadlines sends at most: the rest of the minute is the
// reserve, as for eligible batches.
const spreadPace = 1 - Reserve

// spread returns the eligible batch (of keys, earliest deadline first) to
// seal now so that deadlines falling due together do not all go in one
// minute. It applies only to a share of a larger budget (Ceiling): a share
// can be far under what the open batches' bounds need (a connector
// starting, whose share grows for minutes), and batches opened together
// would then all reach their bound, and go, together. Each server's open
// batches bound a minute or more are lined up, latest deadline first, at
// spreadPace × the server's whole budget: a batch's latest start is its
// deadline, or the latest start of the one after it less one spacing if
// that is earlier. A batch whose latest start has come is sealed now, one
// per spacing on each server and while the last minute holds less than
// the whole budget less its reserve: the herd goes at the whole budget's
// pace ahead of its deadlines instead of at once on them. These seals
// count against the share like a deadline's (latency wins over the
// share), never past the whole budget on their own.
func (s *Scheduler[K]) spread(keys []K, now time.Time) (K, bool) {
	var zero K
	c, ok := s.allow.(Ceiling)
	if !ok || len(keys) == 0 {
		return zero, false
	}
	latest := s.latestStarts(c, now)
	for _, key := range keys {
		e := s.open[key]
		l, ok := latest[e]
		if !ok || now.Before(l) || !s.spreadRoom(e, c, now) {
			continue
		}
		for _, name := range e.servers {
			s.servers[name].lastSpread = now
		}
		e.spread = true
		return key, true
	}
	return zero, false
}

// latestStarts is the latest start of each open batch bound a minute or
// more on a server whose allowance is a share of a larger budget (spread).
func (s *Scheduler[K]) latestStarts(c Ceiling, now time.Time) map[*entry]time.Time {
	latest := map[*entry]time.Time{}
	s.gaps = map[string]time.Duration{}
	byServer := map[string][]*entry{}
	for _, e := range s.open {
		if e.deadline.IsZero() || e.need > 0 {
			continue
		}
		for _, name := range e.servers {
			byServer[name] = append(byServer[name], e)
		}
	}
	for name, es := range byServer {
		ceil := c.Ceiling(name)
		if ceil <= 0 || ceil <= s.allow.PerMinute(name, now) {
			continue // the share is the whole budget: no herd to foresee
		}
		// The spacing: the whole budget's pace, or slower, the open
		// batches spread evenly over their bound (on average), which is
		// the pace they need; the connectors that share the server then
		// spread theirs at no more than the sum of their needs.
		var bounds time.Duration
		for _, e := range es {
			bounds += e.deadline.Sub(e.opened)
		}
		gap := max(spreadGap(ceil), bounds/time.Duration(len(es)*len(es)))
		s.gaps[name] = gap
		sort.Slice(es, func(i, j int) bool { return es[i].deadline.Before(es[j].deadline) })
		// Each goes a little ahead of its deadline (spreadLead), so that
		// it is sealed as spread and not on the deadline, where it would
		// count as over the share.
		lead := spreadLead(gap)
		next := es[len(es)-1].deadline.Add(-lead)
		for i := len(es) - 1; i >= 0; i-- {
			next = minTime(es[i].deadline.Add(-lead), next)
			if old, ok := latest[es[i]]; !ok || next.Before(old) {
				latest[es[i]] = next
			}
			next = next.Add(-gap)
		}
	}
	return latest
}

// spreadPoll is the least Next waits for a spread seal (one may be held by
// the whole budget's window, which Next does not foresee).
const spreadPoll = 100 * time.Millisecond

// spreadGap is the least spacing of spread seals on a server of budget
// ceil.
func spreadGap(ceil float64) time.Duration {
	return time.Duration(float64(Window) / (ceil * spreadPace))
}

// spreadLead is how far ahead of its deadline a batch goes at the
// latest when spread: a second, or the spacing if shorter.
func spreadLead(gap time.Duration) time.Duration { return min(gap, time.Second) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// spreadRoom reports whether every server of e may take a spread seal
// now: one spacing after the last, and the last minute under the whole
// budget less its reserve.
func (s *Scheduler[K]) spreadRoom(e *entry, c Ceiling, now time.Time) bool {
	for _, name := range e.servers {
		sv := s.servers[name]
		ceil := c.Ceiling(name)
		gap, ok := s.gaps[name]
		if ceil <= 0 || !ok {
			return false
		}
		s.refill(sv, s.allow.PerMinute(name, now), now)
		if len(sv.starts) >= early(ceil, sv.short) {
			return false
		}
		// One spacing after the last, unless this is its last chance to
		// go ahead of its deadline (the one before it in the line took
		// its place late).
		if !sv.lastSpread.IsZero() && now.Sub(sv.lastSpread) < gap && now.Before(e.deadline.Add(-spreadLead(gap))) {
			return false
		}
	}
	return true
}

// eligible lists the open batches whose wait has passed, earliest deadline
// first (no deadline last), then oldest first.
func (s *Scheduler[K]) eligible(now time.Time) []K {
	var keys []K
	for key, e := range s.open {
		if !now.Before(e.eligible) {
			keys = append(keys, key)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := s.open[keys[i]], s.open[keys[j]]
		switch {
		case a.deadline.IsZero() != b.deadline.IsZero():
			return !a.deadline.IsZero()
		case !a.deadline.Equal(b.deadline):
			return a.deadline.Before(b.deadline)
		}
		return a.opened.Before(b.opened)
	})
	return keys
}

// fits reports whether every server of e has room now.
func (s *Scheduler[K]) fits(e *entry, now time.Time) bool {
	for _, name := range e.servers {
		if ok, _ := s.room(s.servers[name], now); !ok {
			return false
		}
	}
	return true
}

// Next is how long until Due may hand out a batch without being told
// anything new (ok false: nothing to wait for).
func (s *Scheduler[K]) Next(now time.Time) (d time.Duration, ok bool) {
	d = time.Duration(math.MaxInt64)
	var latest map[*entry]time.Time
	c, spreads := s.allow.(Ceiling)
	if spreads {
		latest = s.latestStarts(c, now)
	}
	for _, e := range s.open {
		if !e.deadline.IsZero() {
			d = min(d, max(e.deadline.Sub(now), 0))
		}
		if e.need > 0 {
			continue // it goes at its deadline
		}
		if now.Before(e.eligible) {
			d = min(d, e.eligible.Sub(now))
			continue
		}
		var w time.Duration
		for _, name := range e.servers {
			if fit, until := s.room(s.servers[name], now); !fit {
				w = max(w, until)
			}
		}
		if l, ok := latest[e]; ok {
			// Its latest start, and a spacing after the last spread seal.
			sw := max(l.Sub(now), 0)
			for _, name := range e.servers {
				if sv := s.servers[name]; !sv.lastSpread.IsZero() {
					gap := s.gaps[name]
					sw = max(sw, minTime(sv.lastSpread.Add(gap), e.deadline.Add(-spreadLead(gap))).Sub(now))
				}
			}
			w = min(w, max(sw, spreadPoll))
		}
		d = min(d, w)
	}
	if d == time.Duration(math.MaxInt64) {
		return 0, false
	}
	return d, true
}

// Episode is a server going over its budget (Start) or back within it.
type Episode struct {
	Server    string
	Start     bool
	At        time.Time
	Count     int       // INSERTs in the last Window at At
	PerMinute float64   // the allowance at At
	Since     time.Time // when it began (an end's)
}

// Episodes hands out the episodes begun or ended since the last call, for
// one log line each.
func (s *Scheduler[K]) Episodes() []Episode {
	ev := s.events
	s.events = nil
	return ev
}

// ServerStatus is one server's budget at one instant.
type ServerStatus struct {
	Server string `json:"server"`
	// PerMinute is the allowance; LastMinute the INSERTs counted in the
	// last Window.
	PerMinute  float64 `json:"budget_per_minute"`
	LastMinute int     `json:"inserts_last_minute"`
	// Over: latency bounds forced INSERTs past the budget in the last
	// Window; Exceeded counts those INSERTs since start, Episodes the
	// stretches of time over it.
	Over     bool  `json:"over_budget"`
	Exceeded int64 `json:"exceeded_total"`
	Episodes int64 `json:"episodes_total"`
}

// Status is every server's budget at now, by name.
func (s *Scheduler[K]) Status(now time.Time) []ServerStatus {
	out := make([]ServerStatus, 0, len(s.servers))
	for _, sv := range s.servers {
		a := s.allow.PerMinute(sv.name, now)
		s.refill(sv, a, now)
		out = append(out, ServerStatus{Server: sv.name, PerMinute: a, LastMinute: len(sv.starts),
			Over: sv.over, Exceeded: sv.exceeded, Episodes: sv.episodes})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

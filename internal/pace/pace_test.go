package pace

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestDue pins each rule on a few batches at one instant.
func TestDue(t *testing.T) {
	srv := []string{"ch"}
	type batch struct {
		key         string
		openedAgo   time.Duration
		wait, bound time.Duration
		bytes       int
	}
	for _, tc := range []struct {
		name     string
		budget   float64
		spent    int // INSERTs already counted in the last seconds
		memShort bool
		batches  []batch
		want     string
		why      Reason
	}{
		{name: "nothing open", budget: 60},
		{name: "wait not passed", budget: 60, batches: []batch{{key: "a", openedAgo: time.Second, wait: 5 * time.Second, bound: time.Minute}}},
		{name: "eligible with room", budget: 60, batches: []batch{{key: "a", openedAgo: 6 * time.Second, wait: 5 * time.Second, bound: time.Minute}},
			want: "a", why: Budget},
		{name: "earliest deadline first", budget: 60, batches: []batch{
			{key: "late", openedAgo: 50 * time.Second, wait: 5 * time.Second, bound: 2 * time.Minute},
			{key: "soon", openedAgo: 40 * time.Second, wait: 5 * time.Second, bound: 90 * time.Second},
		}, want: "soon", why: Budget},
		{name: "a bound under a minute waits for it", budget: 60, batches: []batch{
			{key: "tight", openedAgo: 10 * time.Second, wait: 5 * time.Second, bound: 20 * time.Second},
		}},
		{name: "window full holds an eligible batch", budget: 3, spent: 3, batches: []batch{
			{key: "a", openedAgo: 30 * time.Second, wait: 5 * time.Second, bound: 2 * time.Minute},
		}},
		{name: "deadline wins over a full window", budget: 3, spent: 3, batches: []batch{
			{key: "a", openedAgo: 2 * time.Minute, wait: 5 * time.Second, bound: 2 * time.Minute},
		}, want: "a", why: Deadline},
		{name: "memory short: the largest goes, eligible or not", budget: 3, spent: 3, memShort: true, batches: []batch{
			{key: "small", openedAgo: 30 * time.Second, wait: 5 * time.Second, bound: 2 * time.Minute, bytes: 10},
			{key: "big", openedAgo: time.Second, wait: 5 * time.Second, bound: 2 * time.Minute, bytes: 1000},
		}, want: "big", why: Memory},
		{name: "no deadline: held until the budget allows", budget: 60, batches: []batch{
			{key: "a", openedAgo: time.Hour, wait: 5 * time.Second},
		}, want: "a", why: Budget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New[string](Fixed(tc.budget))
			now := t0.Add(time.Hour)
			for i := 0; i < tc.spent; i++ {
				s.Sealed(fmt.Sprint("x", i), srv, now.Add(-time.Duration(tc.spent-i)*time.Second))
			}
			for _, b := range tc.batches {
				s.Open(b.key, srv, now.Add(-b.openedAgo), b.wait, b.bound)
				s.Size(b.key, b.bytes)
			}
			k, why, ok := s.Due(now, tc.memShort)
			if tc.want == "" {
				if ok {
					t.Fatalf("Due gave %q (%v), want nothing", k, why)
				}
				return
			}
			if !ok || k != tc.want || why != tc.why {
				t.Fatalf("Due = %q %v %v, want %q %v", k, why, ok, tc.want, tc.why)
			}
		})
	}
}

// table is one simulated table: a row every every, a latency bound.
type table struct {
	name   string
	every  time.Duration
	bound  time.Duration
	opened time.Time // zero: no open batch
	next   time.Time
	rows   int
	worst  time.Duration // the longest from a batch's first row to its rows in
	seals  int
	insert time.Duration // how long each INSERT takes from its seal until its rows are in
}

// simStep is the fake clock's tick in simulate: a batch may be sealed up
// to one tick after its deadline.
const simStep = 100 * time.Millisecond

// simulate runs tables against a budget on a fake clock for d, sealing
// what Due hands out (wait 5s for every table), and returns every seal's
// time.
func simulate(t *testing.T, s *Scheduler[string], tables []*table, d time.Duration) []time.Time {
	t.Helper()
	srv := []string{"ch"}
	var seals []time.Time
	type running struct {
		end  time.Time
		took time.Duration
	}
	var inserts []running
	for now := t0; now.Before(t0.Add(d)); now = now.Add(simStep) {
		// The INSERTs that ended tell their time (the owner hears of it
		// on its next turn).
		for len(inserts) > 0 && !inserts[0].end.After(now) {
			s.Took(srv, now, inserts[0].took)
			inserts = inserts[1:]
		}
		for _, tb := range tables {
			for !tb.next.After(now) {
				if tb.opened.IsZero() {
					tb.opened = tb.next
					s.Open(tb.name, srv, tb.opened, 5*time.Second, tb.bound)
				}
				tb.rows++
				tb.next = tb.next.Add(tb.every)
			}
		}
		for {
			k, _, ok := s.Due(now, false)
			if !ok {
				break
			}
			for _, tb := range tables {
				if tb.name == k {
					tb.worst = max(tb.worst, now.Add(tb.insert).Sub(tb.opened))
					tb.opened, tb.rows = time.Time{}, 0
					tb.seals++
					inserts = append(inserts, running{end: now.Add(tb.insert), took: tb.insert})
					sort.Slice(inserts, func(i, j int) bool { return inserts[i].end.Before(inserts[j].end) })
				}
			}
			s.Sealed(k, srv, now)
			seals = append(seals, now)
		}
		// Between decisions, Next must never sleep past a deadline.
		if d, ok := s.Next(now); ok && d < 0 {
			t.Fatalf("Next = %v", d)
		}
	}
	return seals
}

// maxPerWindow is the most seals in any Window of the run.
func maxPerWindow(seals []time.Time) int {
	most, j := 0, 0
	for i := range seals {
		for seals[j].Add(Window).Compare(seals[i]) <= 0 {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

func tables(n int, prefix string, every, bound time.Duration) []*table {
	var out []*table
	for i := 0; i < n; i++ {
		// Spread their first rows over a second, as topics do.
		out = append(out, &table{name: fmt.Sprintf("%s%03d", prefix, i), every: every, bound: bound,
			next: t0.Add(time.Duration(i) * time.Second / time.Duration(n))})
	}
	return out
}

// TestHundredTablesWithinBudget: 100 tables that tolerate two minutes
// each, a budget of 60 a minute: no minute holds more than 60 INSERTs and
// no batch waits past its bound.
func TestHundredTablesWithinBudget(t *testing.T) {
	s := New[string](Fixed(60))
	all := tables(100, "t", 50*time.Millisecond, 2*time.Minute)
	seals := simulate(t, s, all, 10*time.Minute)
	if got := maxPerWindow(seals); got > 60 {
		t.Errorf("%d INSERTs in one minute, budget 60", got)
	}
	for _, tb := range all {
		if tb.worst > tb.bound+simStep {
			t.Errorf("%s: a batch waited %v, bound %v", tb.name, tb.worst, tb.bound)
		}
		if tb.seals < 3 {
			t.Errorf("%s: %d seals in 10 minutes", tb.name, tb.seals)
		}
	}
	// Not starved either: the budget is used, about 60 a minute.
	if n := len(seals); n < 9*55 {
		t.Errorf("%d INSERTs in 10 minutes, want close to 600", n)
	}
	st := s.Status(t0.Add(10 * time.Minute))
	if len(st) != 1 || st[0].Exceeded != 0 || st[0].Over {
		t.Errorf("status %+v: never over budget", st)
	}
}

// TestSlowInsertsWithinBound: 100 tables that tolerate two minutes, a
// budget of 60 a minute, INSERTs that take 3 s from seal to rows in: a
// batch is sealed early enough that its rows are in by its bound, the
// budget still holds and is never exceeded, and the tables are still held
// close to their bound.
func TestSlowInsertsWithinBound(t *testing.T) {
	s := New[string](Fixed(60))
	all := tables(100, "t", 50*time.Millisecond, 2*time.Minute)
	for _, tb := range all {
		tb.insert = 3 * time.Second
	}
	seals := simulate(t, s, all, 10*time.Minute)
	if got := maxPerWindow(seals); got > 60 {
		t.Errorf("%d INSERTs in one minute, budget 60", got)
	}
	for _, tb := range all {
		if tb.worst > tb.bound {
			t.Errorf("%s: rows in %v after their batch's first, bound %v", tb.name, tb.worst, tb.bound)
		}
		if tb.worst < tb.bound-10*time.Second {
			t.Errorf("%s: rows in within %v: the budget should hold the table close to its bound %v", tb.name, tb.worst, tb.bound)
		}
	}
	st := s.Status(t0.Add(10 * time.Minute))
	if len(st) != 1 || st[0].Exceeded != 0 || st[0].Over {
		t.Errorf("status %+v: never over budget", st)
	}
}

// TestLead: a batch's deadline is its bound less its servers' lead, the
// longest INSERT time and the longest late seal of the last LeadWindow
// plus Slack, at most a quarter of its bound.
func TestLead(t *testing.T) {
	srv := []string{"ch"}
	type took struct{ ago, d time.Duration } // an INSERT that ended ago before the batch opened
	for _, tc := range []struct {
		name  string
		bound time.Duration
		took  []took
		late  time.Duration // a seal this long past its deadline, a minute before
		lead  time.Duration
	}{
		{name: "no INSERT yet", bound: 2 * time.Minute, lead: Slack},
		{name: "the longest INSERT", bound: 2 * time.Minute, took: []took{{3 * time.Second, time.Second}, {2 * time.Second, 3 * time.Second}, {time.Second, 2 * time.Second}},
			lead: 3*time.Second + Slack},
		{name: "at most a quarter of the bound", bound: 2 * time.Minute, took: []took{{time.Second, time.Minute}}, lead: 30 * time.Second},
		{name: "INSERTs older than the window forgotten", bound: 2 * time.Minute, took: []took{{LeadWindow + time.Second, 20 * time.Second}, {time.Second, time.Second}},
			lead: time.Second + Slack},
		{name: "a late seal counts", bound: 2 * time.Minute, took: []took{{time.Second, time.Second}}, late: 2 * time.Second, lead: 3*time.Second + Slack},
		{name: "a bound under a minute too", bound: 20 * time.Second, took: []took{{time.Second, 2 * time.Second}}, lead: 2*time.Second + Slack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New[string](Fixed(3))
			opened := t0.Add(time.Hour)
			if tc.late > 0 {
				due := opened.Add(-time.Minute)
				s.Open("late", srv, due.Add(-2*time.Minute+Slack), time.Second, 2*time.Minute)
				if _, why, ok := s.Due(due, false); !ok || why != Deadline {
					t.Fatalf("the late batch's deadline: %v %v", why, ok)
				}
				s.Sealed("late", srv, due.Add(tc.late)) // sealed late: its owner was busy
			}
			for _, x := range tc.took {
				s.Took(srv, opened.Add(-x.ago), x.d)
			}
			if got := min(s.Lead("ch", opened), tc.bound/4); got != tc.lead {
				t.Errorf("Lead = %v, want %v", got, tc.lead)
			}
			s.Open("a", srv, opened, time.Second, tc.bound)
			deadline := opened.Add(tc.bound - tc.lead)
			// A full window: only the deadline seals.
			for i := 0; i < 3; i++ {
				s.Sealed(fmt.Sprint("x", i), srv, deadline.Add(-time.Duration(3-i)*time.Second))
			}
			if k, why, ok := s.Due(deadline.Add(-time.Millisecond), false); ok {
				t.Fatalf("Due gave %q (%v) at bound less %v", k, why, tc.bound-deadline.Sub(opened)+time.Millisecond)
			}
			if k, why, ok := s.Due(deadline, false); !ok || k != "a" || why != Deadline {
				t.Fatalf("Due at bound less %v = %q %v %v, want a deadline", tc.lead, k, why, ok)
			}
		})
	}
}

// TestTightTablesKeepTheirBound: a few tables with a 10 s bound keep it,
// and the rest share what is left of the budget.
func TestTightTablesKeepTheirBound(t *testing.T) {
	s := New[string](Fixed(60))
	tight := tables(3, "tight", 100*time.Millisecond, 10*time.Second)
	loose := tables(50, "loose", 100*time.Millisecond, 2*time.Minute)
	seals := simulate(t, s, append(tight, loose...), 10*time.Minute)
	if got := maxPerWindow(seals); got > 60 {
		t.Errorf("%d INSERTs in one minute, budget 60", got)
	}
	for _, tb := range append(tight, loose...) {
		if tb.worst > tb.bound+simStep {
			t.Errorf("%s: a batch waited %v, bound %v", tb.name, tb.worst, tb.bound)
		}
	}
	for _, tb := range tight {
		if tb.seals < 50 {
			t.Errorf("%s: %d seals in 10 minutes, want one at least every 10 s", tb.name, tb.seals)
		}
	}
}

// TestLatencyWins: 100 tables bound to 30 s cannot stay within 60 a
// minute; they keep their bound, and the Scheduler says the budget was
// exceeded, in one episode.
func TestLatencyWins(t *testing.T) {
	s := New[string](Fixed(60))
	all := tables(100, "t", 100*time.Millisecond, 30*time.Second)
	seals := simulate(t, s, all, 5*time.Minute)
	for _, tb := range all {
		if tb.worst > tb.bound+simStep {
			t.Errorf("%s: a batch waited %v, bound %v", tb.name, tb.worst, tb.bound)
		}
	}
	if got := maxPerWindow(seals); got <= 60 {
		t.Errorf("at most %d INSERTs a minute: 100 tables bound to 30 s need about 200", got)
	}
	st := s.Status(t0.Add(5 * time.Minute))
	if st[0].Exceeded == 0 || !st[0].Over || st[0].Episodes != 1 {
		t.Errorf("status %+v: want over budget, exceeded counted, one episode", st[0])
	}
	ev := s.Episodes()
	if len(ev) != 1 || !ev[0].Start {
		t.Fatalf("episodes %+v: want one start", ev)
	}
	// Once the load is gone, the episode ends.
	now := t0.Add(7 * time.Minute)
	s.Status(now)
	ev = s.Episodes()
	if len(ev) != 1 || ev[0].Start || !ev[0].Since.Equal(st0Since(t, ev)) {
		t.Fatalf("episodes %+v: want one end", ev)
	}
}

func st0Since(t *testing.T, ev []Episode) time.Time {
	t.Helper()
	if ev[0].Since.IsZero() {
		t.Fatal("an episode's end has no start time")
	}
	return ev[0].Since
}

// TestSpread: with a budget the token bucket spreads INSERTs over the
// minute instead of spending the window in its first seconds.
func TestSpread(t *testing.T) {
	s := New[string](Fixed(60))
	all := tables(200, "t", 100*time.Millisecond, 10*time.Minute)
	seals := simulate(t, s, all, 3*time.Minute)
	perSecond := map[int64]int{}
	for _, at := range seals {
		perSecond[at.Unix()]++
	}
	for sec, n := range perSecond {
		if n > BurstSeconds+1 {
			t.Errorf("%d INSERTs in the second at %v", n, time.Unix(sec, 0).UTC())
		}
	}
}

// TestNextWakesForDeadlineAndTokens: Next says when Due will have
// something, never later.
func TestNextWakesForDeadlineAndTokens(t *testing.T) {
	srv := []string{"ch"}
	s := New[string](Fixed(6)) // a token every 10 s, burst 1
	s.Sealed("x", srv, t0)     // spends the one token
	s.Open("a", srv, t0, time.Second, time.Minute)
	d, ok := s.Next(t0.Add(2 * time.Second))
	if !ok || d <= 0 || d > 8*time.Second {
		t.Fatalf("Next = %v %v, want the next token in ≤ 8s", d, ok)
	}
	if _, _, ok := s.Due(t0.Add(2*time.Second+d-time.Millisecond), false); ok {
		t.Errorf("due before Next said")
	}
	if k, why, ok := s.Due(t0.Add(2*time.Second+d), false); !ok || k != "a" || why != Budget {
		t.Errorf("Due at Next = %q %v %v", k, why, ok)
	}
	if _, ok := New[string](Fixed(6)).Next(t0); ok {
		t.Errorf("Next with nothing open")
	}
}

// TestNoBudget: allowance 0 lets every eligible batch go.
func TestNoBudget(t *testing.T) {
	s := New[string](Fixed(0))
	srv := []string{"ch"}
	for i := 0; i < 10; i++ {
		k := fmt.Sprint(i)
		s.Open(k, srv, t0, time.Second, time.Minute)
	}
	n := 0
	for {
		k, _, ok := s.Due(t0.Add(time.Second), false)
		if !ok {
			break
		}
		s.Sealed(k, nil, t0.Add(time.Second))
		n++
	}
	if n != 10 {
		t.Errorf("%d sealed, want all 10", n)
	}
}

// TestServersCountApart: each server has its own budget; a batch going to
// two counts on both.
func TestServersCountApart(t *testing.T) {
	s := New[string](Fixed(4)) // early seals while fewer than 3 in the window
	s.Sealed("a", []string{"s1"}, t0)
	s.Sealed("a2", []string{"s1"}, t0)
	s.Sealed("b", []string{"s1", "s2"}, t0)
	s.Open("c", []string{"s2"}, t0, 0, time.Hour)
	s.Open("d", []string{"s1"}, t0, 0, time.Hour)
	k, _, ok := s.Due(t0.Add(30*time.Second), false)
	if !ok || k != "c" {
		t.Fatalf("Due = %q %v, want c (s2 has room, s1 has none)", k, ok)
	}
	st := s.Status(t0.Add(30 * time.Second))
	if st[0].LastMinute != 3 || st[1].LastMinute != 1 {
		t.Errorf("status %+v", st)
	}
}

// TestReserveAndFlush: eligible batches leave Reserve of the window to
// deadlines, and a flush past the budget is not an episode over it.
func TestReserveAndFlush(t *testing.T) {
	srv := []string{"ch"}
	s := New[string](Fixed(10)) // keeps 1 back: 9 early seals a minute
	for i := 0; i < 9; i++ {
		s.Sealed(fmt.Sprint("x", i), srv, t0.Add(time.Duration(i)*time.Second))
	}
	s.Open("a", srv, t0, time.Second, time.Hour)
	if k, _, ok := s.Due(t0.Add(20*time.Second), false); ok {
		t.Errorf("Due gave %q with 9 of 10 in the window: the last is kept for deadlines", k)
	}
	s.Open("b", srv, t0.Add(-time.Hour), time.Second, time.Hour)
	if k, why, ok := s.Due(t0.Add(20*time.Second), false); !ok || k != "b" || why != Deadline {
		t.Errorf("Due = %q %v %v, want b by its deadline", k, why, ok)
	}
	s.Sealed("b", srv, t0.Add(20*time.Second))
	for i := 0; i < 5; i++ {
		s.Flushed(fmt.Sprint("f", i), srv, t0.Add(21*time.Second))
	}
	st := s.Status(t0.Add(21 * time.Second))
	if st[0].LastMinute != 15 || st[0].Over || st[0].Exceeded != 0 || len(s.Episodes()) != 0 {
		t.Errorf("status %+v: a flush counts, never as over the budget", st[0])
	}
}

// TestShortBoundsWidenTheReserve: open batches bound under a minute need
// 60s / bound a minute each on their own, and early seals leave that much.
func TestShortBoundsWidenTheReserve(t *testing.T) {
	srv := []string{"ch"}
	s := New[string](Fixed(60))
	for i := 0; i < 3; i++ { // 3 × 60s/5s = 36 a minute
		s.Open(fmt.Sprint("tight", i), srv, t0.Add(10*time.Second), 2*time.Second, 5*time.Second)
	}
	for i := 0; i < 24; i++ {
		s.Sealed(fmt.Sprint("x", i), srv, t0.Add(-40*time.Second+time.Duration(i)*100*time.Millisecond))
	}
	s.Open("loose", srv, t0, time.Second, time.Hour)
	if k, _, ok := s.Due(t0.Add(11*time.Second), false); ok {
		t.Errorf("Due gave %q with 24 in the window: 36 are kept for the 5 s bounds", k)
	}
	s.Forget("tight0") // 24 needed now: one early seal fits
	if k, why, ok := s.Due(t0.Add(11*time.Second), false); !ok || k != "loose" || why != Budget {
		t.Errorf("Due = %q %v %v, want loose early", k, why, ok)
	}
}

// share is an allowance of perMinute that is a share of a budget of ceil.
type share struct{ perMinute, ceil float64 }

func (a share) PerMinute(string, time.Time) float64 { return a.perMinute }
func (a share) Ceiling(string) float64              { return a.ceil }

// TestSpreadDeadlines: n batches opened together with the same bound, under an
// allowance of 1 a minute, on a simulated clock. Under a share of a
// budget of 60 their deadlines are spread ahead of the bound at the pace
// the bounds need (no minute holds more than the budget); under a fixed
// allowance of 1 all but one go at their bound together (latency wins:
// there is no larger budget to spread them on), and are reported.
func TestSpreadDeadlines(t *testing.T) {
	const bound = 2 * time.Minute
	for _, tc := range []struct {
		name  string
		allow Allowance
		n     int
		// most is the most INSERTs in any minute: at most that when
		// spread, at least that when not.
		most   int
		spread bool
	}{
		{name: "share of a larger budget: spread", allow: share{1, 60}, n: 100, most: 54, spread: true},
		{name: "few tables: spread at their need", allow: share{1, 60}, n: 10, most: 6, spread: true},
		{name: "fixed allowance: at the bound", allow: Fixed(1), n: 100, most: 99},
		{name: "share that is the whole budget: the budget spreads them", allow: share{60, 60}, n: 100, most: 54, spread: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New[int](tc.allow)
			srv := []string{"ch"}
			opened := make([]time.Time, tc.n)
			for k := range tc.n {
				opened[k] = t0
				s.Open(k, srv, t0, 5*time.Second, bound)
			}
			var seals []time.Time
			held := time.Duration(0)
			for at := time.Duration(0); at < 3*time.Minute; at += 100 * time.Millisecond {
				now := t0.Add(at)
				for {
					k, _, ok := s.Due(now, false)
					if !ok {
						break
					}
					held = max(held, now.Sub(opened[k]))
					s.Sealed(k, srv, now)
					seals = append(seals, now)
					opened[k] = now
					s.Open(k, srv, now, 5*time.Second, bound)
				}
			}
			most := 0
			for i := range seals {
				j := i
				for j < len(seals) && seals[j].Sub(seals[i]) < time.Minute {
					j++
				}
				most = max(most, j-i)
			}
			if tc.spread && most > tc.most || !tc.spread && most < tc.most {
				t.Errorf("%d INSERTs in the busiest minute, want %s %d", most, map[bool]string{true: "at most", false: "at least"}[tc.spread], tc.most)
			}
			if held > bound {
				t.Errorf("a batch held %v, bound %v", held, bound)
			}
			// Spread seals keep the server within its whole budget and
			// are not reported as over it; seals at the bound past a fixed
			// allowance are.
			st := s.Status(t0.Add(3 * time.Minute))
			if over := st[0].Exceeded > 0; over == tc.spread {
				t.Errorf("%d INSERTs counted over the budget, spread %v", st[0].Exceeded, tc.spread)
			}
		})
	}
}

// BenchmarkDue asks Due once per op over 200 open batches on one server
// (the owner asks on every turn of its loop): none due yet, and memory
// short (the largest goes):
//
//	go test ./internal/pace -run '^$' -bench Due
func BenchmarkDue(b *testing.B) {
	srv := []string{"ch"}
	for _, memShort := range []bool{false, true} {
		b.Run(fmt.Sprintf("memShort=%v", memShort), func(b *testing.B) {
			s := New[string](Fixed(60))
			now := t0.Add(time.Hour)
			for i := 0; i < 200; i++ {
				key := fmt.Sprint("t", i)
				s.Open(key, srv, now.Add(-time.Duration(i%5)*time.Second), 5*time.Second, 2*time.Minute)
				s.Size(key, 1000+i%17)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, ok := s.Due(now, memShort); ok != memShort {
					b.Fatalf("Due ok = %v", ok)
				}
			}
		})
	}
}

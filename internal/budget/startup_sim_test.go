package budget

import (
	"fmt"
	"testing"
	"time"

	"sink/internal/pace"
)

// startPod is a connector in the start-up simulation: its own scheduler
// (internal/pace, the real one) over tables that all open their first
// batch at the pod's start and always have rows (a sealed batch opens
// again at once), each with the same wait and latency bound; its share
// from its own Controller, sampling the server every 5 s.
type startPod struct {
	tables int
	phase  time.Duration

	share *shareAllowance
	ctl   *Controller
	sched *pace.Scheduler[int]
	own   uint64
	sent  []int
}

// shareAllowance is the Controller's share as the scheduler's allowance,
// with the server's whole budget as its ceiling (as a Sharer answers).
type shareAllowance struct {
	ctl    *Controller
	budget float64
}

func (a *shareAllowance) PerMinute(string, time.Time) float64 { return a.ctl.Share().PerMinute }
func (a *shareAllowance) Ceiling(string) float64              { return a.budget }

// TestStartupSpreadsDeadlines: tables that open together with the same
// bound, under a share that starts small (the slow start), do not all
// reach their bound and go in the same minute: the scheduler spreads them
// at the whole budget's pace ahead of their deadlines. Every minute's sum
// over the pods stays within the budget, and no batch is held past its
// bound.
func TestStartupSpreadsDeadlines(t *testing.T) {
	const (
		budget = 60.0
		wait   = 5 * time.Second
		bound  = 2 * time.Minute
		length = 8 * time.Minute
		dt     = 100 * time.Millisecond
	)
	cases := []struct {
		name   string
		tables []int // per pod
	}{
		{"one pod, 100 tables (50/min at their bound)", []int{100}},
		{"three pods, 30 tables each (45/min at their bound)", []int{30, 30, 30}},
		{"two pods, 50 and 10 tables", []int{50, 10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := []string{"s"}
			var pods []*startPod
			for i, n := range tc.tables {
				ctl := New(Settings{PerMinute: budget})
				a := &shareAllowance{ctl: ctl, budget: budget}
				pods = append(pods, &startPod{tables: n, phase: time.Duration(i) * time.Second,
					share: a, ctl: ctl, sched: pace.New[int](a), sent: make([]int, int(length/time.Minute))})
			}
			opened := make([][]time.Time, len(pods))
			for i, p := range pods {
				opened[i] = make([]time.Time, p.tables)
				for k := range p.tables {
					opened[i][k] = simEpoch
					p.sched.Open(k, srv, simEpoch, wait, bound)
				}
			}
			var server uint64
			total := make([]int, int(length/time.Minute))
			held := time.Duration(0)
			for at := time.Duration(0); at < length; at += dt {
				now := simEpoch.Add(at)
				m := int(at / time.Minute)
				for i, p := range pods {
					if at%(5*time.Second) == p.phase {
						// Demand: every table at its bound.
						p.ctl.Observe(Sample{At: now, Server: server, Own: p.own, Demand: float64(p.tables) * float64(time.Minute) / float64(bound)})
					}
					for {
						k, _, ok := p.sched.Due(now, false)
						if !ok {
							break
						}
						held = max(held, now.Sub(opened[i][k]))
						p.sched.Sealed(k, srv, now)
						p.own++
						server++
						total[m]++
						p.sent[m]++
						opened[i][k] = now
						p.sched.Open(k, srv, now, wait, bound)
					}
				}
			}
			for m, n := range total {
				line := fmt.Sprintf("min %d total %3d:", m, n)
				for i, p := range pods {
					line += fmt.Sprintf(" pod%d %3d (share %5.1f)", i, p.sent[m], p.ctl.Share().PerMinute)
				}
				t.Log(line)
				if float64(n) > budget {
					t.Errorf("minute %d: %d INSERTs, budget %.0f", m, n, budget)
				}
			}
			if held > bound {
				t.Errorf("a batch was held %v, bound %v", held, bound)
			}
		})
	}
}

package budget

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Reading is one server's count of INSERT queries (writer.InsertCount has
// the same fields and converts to it).
type Reading struct {
	Count  uint64
	Uptime time.Duration
}

// Reader reads every server's count, by server name (the names the
// scheduler asks the allowance of). Servers it could not read are left
// out of the map, and err says why; the others are still used. It bounds
// its own time (clickhouse.query_timeout).
type Reader func(ctx context.Context) (map[string]Reading, error)

// DefaultInterval is how often a Sharer reads the servers: one small query
// on system.events per server (per replica on a cluster).
const DefaultInterval = 5 * time.Second

// Sharer is the I/O side around the Controllers: it reads every server's
// count every Interval on a goroutine of its own (Run), counts this
// connector's INSERTs to each (Inserted), takes its demand (SetDemand), and
// answers the scheduler's PerMinute with the latest share. One Controller
// per server, made on first mention.
//
// Concurrency: every method is safe for concurrent use; Run is called once.
type Sharer struct {
	settings Settings
	read     Reader
	interval time.Duration
	log      zerolog.Logger
	now      func() time.Time

	mu      sync.Mutex
	servers map[string]*shareState
	rounds  int // reads that answered
}

type shareState struct {
	ctl    *Controller
	own    uint64
	demand float64
	failed bool // the last read of it failed (logged once per stretch)
}

// NewSharer makes a Sharer giving each server a share of s.PerMinute, reading
// with read every interval (DefaultInterval if 0).
func NewSharer(s Settings, read Reader, interval time.Duration, log zerolog.Logger) *Sharer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Sharer{settings: s, read: read, interval: interval, log: log, now: time.Now, servers: map[string]*shareState{}}
}

func (s *Sharer) state(server string) *shareState {
	st := s.servers[server]
	if st == nil {
		st = &shareState{ctl: New(s.settings)}
		s.servers[server] = st
	}
	return st
}

// PerMinute is the share of server now: the scheduler's Allowance
// (internal/pace). It never does I/O.
func (s *Sharer) PerMinute(server string, _ time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state(server).ctl.Share().PerMinute
}

// Ceiling is the whole budget of server, which its share is part of: the
// scheduler spreads deadlines that fall due together at its pace
// (internal/pace's Ceiling).
func (s *Sharer) Ceiling(string) float64 { return s.settings.PerMinute }

// Inserted counts n INSERTs this connector sent to server.
func (s *Sharer) Inserted(server string, n int) {
	s.mu.Lock()
	s.state(server).own += uint64(n)
	s.mu.Unlock()
}

// SetDemand says how many INSERTs per minute this connector would send to
// server unhindered (docs/sizing.md: its tables' batches at their own
// triggers).
func (s *Sharer) SetDemand(server string, perMinute float64) {
	s.mu.Lock()
	s.state(server).demand = perMinute
	s.mu.Unlock()
}

// Shares is every server's current share, by name.
func (s *Sharer) Shares() map[string]Share {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Share, len(s.servers))
	for name, st := range s.servers {
		out[name] = st.ctl.Share()
	}
	return out
}

// Run reads the servers every interval until ctx ends.
func (s *Sharer) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round reads every server once and feeds the controllers. A server the
// read left out is unreadable this round; so is one the scheduler asks
// about that no read has ever named (a name the reader does not know: it
// gets the whole target, ReasonAlone, and the log says so).
func (s *Sharer) Round(ctx context.Context) {
	readings, err := s.read(ctx)
	if ctx.Err() != nil {
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(readings) > 0 {
		s.rounds++
	}
	for name, r := range readings {
		st := s.state(name)
		if st.failed {
			s.log.Info().Str("server", name).Msg("insert budget: the server's INSERT count is readable again")
			st.failed = false
		}
		prev := st.ctl.Share().Reason
		sh := st.ctl.Observe(Sample{At: now, Server: r.Count, Own: st.own, Demand: st.demand, Uptime: r.Uptime})
		if sh.Reason != prev && sh.Reason != ReasonShared {
			s.log.Info().Str("server", name).Str("reason", string(sh.Reason)).Float64("share_per_minute", sh.PerMinute).
				Msg("insert budget: the share of the server's budget is decided another way")
		}
	}
	for name, st := range s.servers {
		if _, ok := readings[name]; ok {
			continue
		}
		if !st.failed {
			ev := s.log.Warn().Str("server", name)
			if err != nil {
				ev = ev.Err(err)
			}
			if s.rounds > 0 && err == nil {
				ev.Msg("insert budget: the server is not among those whose INSERT count is read; it gets the whole budget, as if this connector wrote to it alone")
			} else {
				ev.Msg("insert budget: reading the server's INSERT count failed; keeping the last share")
			}
			st.failed = true
		}
		st.ctl.Unreadable(now, st.demand)
	}
}

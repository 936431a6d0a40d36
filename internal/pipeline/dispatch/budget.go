package dispatch

import (
	"context"
	"strings"
	"time"

	"sink/config"
	"sink/internal/batch"
	"sink/internal/pace"
	"sink/internal/status"
	"sink/internal/tables"
)

// The budget of INSERTs per minute per server
// (clickhouse.max_inserts_per_minute; internal/pace holds the policy).
// Dispatch tells the Scheduler when a batch opens (Opened) and when any
// batch is sealed (Sealed), asks it which batch goes when its timer fires
// (Due) and when to wake up next (Next). Batches that fill are sealed by
// rows or bytes as without a budget; a batch whose wait passed is sealed
// only when the Scheduler says (reason budget), by its table's latency
// bound at the latest (reason deadline), or when held batches take half
// of batch.buffer_memory (reason memory, the largest). The triggers
// themselves are those of the cadence under it (fixed or adaptive).

// ServerNamer is the Sink's optional answer to which servers receive a
// table's INSERTs (writer.Cluster: the shards its batches are split over),
// each with a budget of its own. Called from the owner goroutine.
type ServerNamer interface {
	Servers(db, table string) []string
}

// ShareUsage is the optional side of an Allowance that shares each
// server's budget with the other connectors writing to it
// (internal/budget's Sharer): it is told this connector's INSERTs to each
// server and its demand there.
type ShareUsage interface {
	Inserted(server string, n int)
	SetDemand(server string, perMinute float64)
}

// budget is the cadence of a budget of INSERTs per server, over the
// triggers of another cadence.
type budget struct {
	Cadence // the triggers (fixed or adaptive), and its own bookkeeping
	cfg     *config.Config
	d       *Dispatch
	allow   pace.Allowance
	sched   *pace.Scheduler[*Open]
	// servers is the servers each table's INSERTs count against
	// (serversOf); demand, the INSERTs per minute last told to a shared
	// budget, by server (demand).
	servers map[*tables.Table][]string
	demand  map[string]float64
}

func newBudget(cfg *config.Config, d *Dispatch, under Cadence, allow pace.Allowance) *budget {
	return &budget{Cadence: under, cfg: cfg, d: d, allow: allow, sched: pace.New[*Open](allow),
		servers: map[*tables.Table][]string{}}
}

// serversOf names the servers a batch of ts is inserted into, each with
// its own budget: the configured addresses (one server, or one load
// balancer's view of a replicated set), or on a cluster each shard the
// table's batches are split over (ServerNamer).
func (c *budget) serversOf(ts *tables.Table) []string {
	servers, ok := c.servers[ts]
	if !ok {
		if sn, ok := c.d.Sink.(ServerNamer); ok {
			servers = sn.Servers(ts.Target().Database, ts.Target().Name)
		}
		if len(servers) == 0 {
			servers = []string{strings.Join(c.cfg.ClickHouse.Addrs, ",")}
		}
		c.servers[ts] = servers
	}
	return servers
}

// latencyBound is how long a row of ts may take from its record's
// timestamp (its produce time) until it is in the table: its routes'
// max_latency when set (the smallest), else the larger of batch.max_wait
// and batch.max_latency. The budget never holds a batch of ts so long that
// its rows are in later (but never shorter than the batch's own wait,
// which adaptive batching may stretch on ClickHouse's pushback): the
// Scheduler seals it its servers' lead before (pace.Lead), from the time
// its first record was produced (opened).
func (c *budget) latencyBound(ts *tables.Table) time.Duration {
	b := c.cfg.Batch
	bound := max(b.MaxWait, b.MaxLatency)
	if ts.MaxLatency() > 0 {
		bound = ts.MaxLatency()
	}
	return bound
}

// opened is when a's batch counts as opened for its latency bound at now,
// its first row's arrival: its oldest record's timestamp, when that is
// less than the bound before now (no later than now: a producer's clock
// ahead of ours). A record without a timestamp, or one older than the
// bound (a backlog being read: its bound is missed already, and counting
// from its timestamp would seal every batch at once), counts from
// kafka.fetch_max_wait before now, what a record may have spent waiting
// in Kafka.
func (c *budget) opened(a *Open, now time.Time) time.Time {
	if a.oldest <= 0 {
		return now.Add(-c.cfg.Kafka.FetchMaxWait)
	}
	ts := time.Unix(0, a.oldest)
	switch {
	case ts.After(now):
		return now
	case ts.Before(now.Add(-c.latencyBound(a.key.table))):
		return now.Add(-c.cfg.Kafka.FetchMaxWait)
	}
	return ts
}

// Opened tells the Scheduler that a's batch got its first row (or its
// wait changed) at now.
func (c *budget) Opened(a *Open, now time.Time) {
	ts := a.key.table
	a.active = now
	c.sched.Open(a, c.serversOf(ts), c.opened(a, now), a.acc.Policy().MaxWait, c.latencyBound(ts))
}

// Inserted tells the Scheduler how long the INSERT of b of ts took from
// its seal until its rows were in (now): its servers' lead (pace.Lead).
func (c *budget) Inserted(ts *tables.Table, b *Batch, took time.Duration, now time.Time) {
	c.sched.Took(c.serversOf(ts), now, now.Sub(b.Sealed))
	c.Cadence.Inserted(ts, b, took, now)
}

// Sealed counts the INSERT of a's batch b: a flush of everything
// (shutdown, revoke, pause) counts, but never as over the budget.
func (c *budget) Sealed(a *Open, b *Batch) {
	now := b.Sealed
	a.active = now
	servers := c.serversOf(a.key.table)
	switch b.Reason {
	case batch.ReasonShutdown, batch.ReasonRevoke, batch.ReasonPause:
		c.sched.Flushed(a, servers, now)
	default:
		c.sched.Sealed(a, servers, now)
	}
	if u, ok := c.allow.(ShareUsage); ok {
		for _, s := range servers {
			u.Inserted(s, 1)
		}
	}
	c.episodes()
	c.Cadence.Sealed(a, b)
}

// Forget forgets a, no longer open.
func (c *budget) Forget(a *Open) { c.sched.Forget(a) }

// demandWindow is how long after its last seal a batch still counts toward
// its servers' demand: a table that writes every few minutes keeps a claim
// on its share in between.
const demandWindow = 2 * time.Minute

// tellDemand tells a shared budget this connector's demand on each
// server: the INSERTs per minute its batches would make at their own
// triggers, unhindered (a minute over each batch's wait), summed over the
// batches open now or sealed within demandWindow. Batches that fill by
// rows or bytes before their wait make more; those the budget does not
// hold anyway, and the server's count has them.
func (c *budget) tellDemand(now time.Time) {
	u, ok := c.allow.(ShareUsage)
	if !ok {
		return
	}
	d := make(map[string]float64, len(c.demand))
	c.d.q.eachOpen(func(a *Open) {
		wait := a.acc.Policy().MaxWait
		if wait <= 0 || a.active.IsZero() || (a.acc.Empty() && now.Sub(a.active) > demandWindow) {
			return
		}
		for _, s := range c.serversOf(a.key.table) {
			d[s] += time.Minute.Seconds() / wait.Seconds()
		}
	})
	for s := range c.demand {
		if _, ok := d[s]; !ok {
			u.SetDemand(s, 0)
		}
	}
	for s, v := range d {
		u.SetDemand(s, v)
	}
	c.demand = d
}

// Due seals what the Scheduler hands out now.
func (c *budget) Due(now time.Time, seal func(a *Open, why batch.Reason)) {
	short := c.memShort()
	for {
		a, why, ok := c.sched.Due(now, short)
		if !ok {
			break
		}
		if c.d.q.acc(a.key) != a || a.acc.Empty() {
			c.sched.Forget(a)
			continue
		}
		reason := batch.ReasonBudget
		switch why {
		case pace.Deadline:
			reason = batch.ReasonDeadline
		case pace.Memory:
			reason = batch.ReasonMemory
		}
		seal(a, reason)
		if why == pace.Memory {
			short = c.memShort()
		}
	}
}

// Next is when the Scheduler hands out the next batch: at once when the
// open batches hold half the buffer.
func (c *budget) Next(now time.Time) time.Duration {
	next := time.Hour
	if d, ok := c.sched.Next(now); ok && d < next {
		next = d
	}
	if c.memShort() {
		next = 0
	}
	return next
}

// memShort reports that the open batches hold half of
// batch.buffer_memory or more, telling the Scheduler their sizes: then
// the largest is sealed, budget or not, so that the budget's holding
// never pauses fetching.
func (c *budget) memShort() bool {
	if c.d.q.openBytes() < int(c.cfg.Batch.BufferMemory)/2 {
		return false
	}
	c.d.q.eachOpen(func(a *Open) { c.sched.Size(a, a.acc.Data().Bytes()) })
	return true
}

// episodes logs each server's going over its budget and coming back.
func (c *budget) episodes() {
	log := c.d.Log
	for _, e := range c.sched.Episodes() {
		if e.Start {
			log.Warn().Str("server", e.Server).Int("inserts_last_minute", e.Count).Float64("budget_per_minute", e.PerMinute).
				Msg("insert budget exceeded: tables' latency bounds need more INSERTs than clickhouse.max_inserts_per_minute allows; latency wins (docs/sizing.md, Many tables)")
			continue
		}
		log.Info().Str("server", e.Server).Int("inserts_last_minute", e.Count).Float64("budget_per_minute", e.PerMinute).
			Dur("over_for", e.At.Sub(e.Since)).Msg("insert budget: back within it")
	}
}

// Budgets reports every server's budget to the metrics and s.
func (c *budget) Budgets(s *status.Snapshot) {
	now := c.d.Now()
	c.tellDemand(now)
	for _, st := range c.sched.Status(now) {
		c.d.Metrics.Budget(st.Server, st.PerMinute, st.LastMinute, st.Exceeded)
		s.Budgets = append(s.Budgets, status.Budget{Server: st.Server, PerMinute: st.PerMinute, LastMinute: st.LastMinute,
			OverBudget: st.Over, ExceededTotal: st.Exceeded})
	}
	c.episodes()
}

// Tick passes the periodic look to the triggers' cadence.
func (c *budget) Tick(ctx context.Context) { c.Cadence.Tick(ctx) }

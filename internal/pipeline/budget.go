package pipeline

import (
	"context"
	"strings"
	"time"

	"sink/internal/batch"
	"sink/internal/pace"
	"sink/internal/status"
	"sink/internal/tables"
)

// The budget of INSERTs per minute per server
// (clickhouse.max_inserts_per_minute; internal/pace holds the policy).
// The owner tells the Scheduler when a batch opens (added) and when any
// batch is sealed (seal), asks it which batch goes when its timer fires
// (sealExpired) and when to wake up next (armTimer). Batches that fill
// are sealed by rows or bytes as without a budget; a batch whose wait
// passed is sealed only when the Scheduler says (reason budget), by its
// table's latency bound at the latest (reason deadline), or when held
// batches take half of batch.buffer_memory (reason memory, the largest).

// WithAllowance makes the budget of each server come from a (a share of a
// server's budget computed across the pods that write to it, for
// instance) instead of clickhouse.max_inserts_per_minute; the budget is
// then on even when that is 0.
func WithAllowance(a pace.Allowance) Option { return func(p *Pipeline) { p.allow = a } }

// initBudget makes the Scheduler when a budget is set.
func (p *Pipeline) initBudget() {
	if p.allow == nil {
		if p.cfg.ClickHouse.MaxInsertsPerMinute <= 0 {
			return
		}
		p.allow = pace.Fixed(p.cfg.ClickHouse.MaxInsertsPerMinute)
	}
	p.sched = pace.New[accKey](p.allow)
}

// serversOf names the servers a batch of ts is inserted into, each with
// its own budget: the configured addresses (one server, or one load
// balancer's view of a replicated set), or on a cluster each shard the
// table's batches are split over (serverNamer).
func (p *Pipeline) serversOf(ts *tables.Table) []string {
	servers, ok := p.servers[ts]
	if !ok {
		if sn, ok := p.w.(serverNamer); ok {
			servers = sn.Servers(ts.Target().Database, ts.Target().Name)
		}
		if len(servers) == 0 {
			servers = []string{strings.Join(p.cfg.ClickHouse.Addrs, ",")}
		}
		if p.servers == nil {
			p.servers = map[*tables.Table][]string{}
		}
		p.servers[ts] = servers
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
// its first record was produced (budgetOpened).
func (p *Pipeline) latencyBound(ts *tables.Table) time.Duration {
	b := p.cfg.Batch
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
func (p *Pipeline) opened(a *accState, now time.Time) time.Time {
	if a.oldest <= 0 {
		return now.Add(-p.cfg.Kafka.FetchMaxWait)
	}
	ts := time.Unix(0, a.oldest)
	switch {
	case ts.After(now):
		return now
	case ts.Before(now.Add(-p.latencyBound(a.key.table))):
		return now.Add(-p.cfg.Kafka.FetchMaxWait)
	}
	return ts
}

// rebound follows ts's latency bound, which a route resolved per topic
// tightened: the controller is rebuilt with the new bound in adaptive
// mode, and the open batches get the new triggers.
func (p *Pipeline) rebound(ts *tables.Table) {
	delete(p.adapt, ts)
	p.adaptTable(ts)
	pol := p.policy(ts)
	p.disp.eachOpenOf(ts, func(a *accState) { a.acc.SetPolicy(pol) })
}

// budgetOpened tells the Scheduler that a's batch got its first row at now.
func (p *Pipeline) budgetOpened(a *accState, now time.Time) {
	ts := a.key.table
	a.active = now
	p.sched.Open(a.key, p.serversOf(ts), p.opened(a, now), a.acc.Policy().MaxWait, p.latencyBound(ts))
}

// budgetInserted tells the Scheduler how long the INSERT of a batch of ts
// sealed at sealed took until its rows were in (now): its servers' lead
// (pace.Lead).
func (p *Pipeline) budgetInserted(ts *tables.Table, sealed, now time.Time) {
	if p.sched != nil {
		p.sched.Took(p.serversOf(ts), now, now.Sub(sealed))
	}
}

// budgetSealed counts the INSERT of a's batch, sealed at now for why: a
// flush of everything (shutdown, revoke, pause) counts, but never as over
// the budget.
func (p *Pipeline) budgetSealed(a *accState, now time.Time, why batch.Reason) {
	a.active = now
	servers := p.serversOf(a.key.table)
	switch why {
	case batch.ReasonShutdown, batch.ReasonRevoke, batch.ReasonPause:
		p.sched.Flushed(a.key, servers, now)
	default:
		p.sched.Sealed(a.key, servers, now)
	}
	if u, ok := p.allow.(shareUsage); ok {
		for _, s := range servers {
			u.Inserted(s, 1)
		}
	}
	p.budgetEpisodes()
}

// demandWindow is how long after its last seal a batch still counts toward
// its servers' demand: a table that writes every few minutes keeps a claim
// on its share in between.
const demandWindow = 2 * time.Minute

// budgetDemand tells a shared budget this connector's demand on each
// server: the INSERTs per minute its batches would make at their own
// triggers, unhindered (a minute over each batch's wait), summed over the
// batches open now or sealed within demandWindow. Batches that fill by
// rows or bytes before their wait make more; those the budget does not
// hold anyway, and the server's count has them.
func (p *Pipeline) budgetDemand(now time.Time) {
	u, ok := p.allow.(shareUsage)
	if !ok {
		return
	}
	d := make(map[string]float64, len(p.demand))
	p.disp.eachOpen(func(a *accState) {
		wait := a.acc.Policy().MaxWait
		if wait <= 0 || a.active.IsZero() || (a.acc.Empty() && now.Sub(a.active) > demandWindow) {
			return
		}
		for _, s := range p.serversOf(a.key.table) {
			d[s] += time.Minute.Seconds() / wait.Seconds()
		}
	})
	for s := range p.demand {
		if _, ok := d[s]; !ok {
			u.SetDemand(s, 0)
		}
	}
	for s, v := range d {
		u.SetDemand(s, v)
	}
	p.demand = d
}

// budgetDue seals what the Scheduler hands out now.
func (p *Pipeline) budgetDue(writeCtx context.Context) {
	now := p.now()
	short := p.memShort()
	for {
		k, why, ok := p.sched.Due(now, short)
		if !ok {
			break
		}
		a := p.disp.acc(k)
		if a == nil || a.acc.Empty() {
			p.sched.Forget(k)
			continue
		}
		reason := batch.ReasonBudget
		switch why {
		case pace.Deadline:
			reason = batch.ReasonDeadline
		case pace.Memory:
			reason = batch.ReasonMemory
		}
		p.seal(writeCtx, a, reason)
		if why == pace.Memory {
			short = p.memShort()
		}
	}
}

// memShort reports that the open batches hold half of
// batch.buffer_memory or more, telling the Scheduler their sizes: then
// the largest is sealed, budget or not, so that the budget's holding
// never pauses fetching.
func (p *Pipeline) memShort() bool {
	if p.disp.openBytes() < int(p.cfg.Batch.BufferMemory)/2 {
		return false
	}
	p.disp.eachOpen(func(a *accState) { p.sched.Size(a.key, a.acc.Data().Bytes()) })
	return true
}

// budgetEpisodes logs each server's going over its budget and coming back.
func (p *Pipeline) budgetEpisodes() {
	for _, e := range p.sched.Episodes() {
		if e.Start {
			p.log.Warn().Str("server", e.Server).Int("inserts_last_minute", e.Count).Float64("budget_per_minute", e.PerMinute).
				Msg("insert budget exceeded: tables' latency bounds need more INSERTs than clickhouse.max_inserts_per_minute allows; latency wins (docs/sizing.md, Many tables)")
			continue
		}
		p.log.Info().Str("server", e.Server).Int("inserts_last_minute", e.Count).Float64("budget_per_minute", e.PerMinute).
			Dur("over_for", e.At.Sub(e.Since)).Msg("insert budget: back within it")
	}
}

// budgetStatus reports every server's budget to the metrics and s.
func (p *Pipeline) budgetStatus(s *status.Snapshot) {
	if p.sched == nil {
		return
	}
	p.budgetDemand(p.now())
	for _, st := range p.sched.Status(p.now()) {
		p.m.Budget(st.Server, st.PerMinute, st.LastMinute, st.Exceeded)
		s.Budgets = append(s.Budgets, status.Budget{Server: st.Server, PerMinute: st.PerMinute, LastMinute: st.LastMinute,
			OverBudget: st.Over, ExceededTotal: st.Exceeded})
	}
	p.budgetEpisodes()
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

// The budget of INSERTs per minute per server
// (clickhouse.max_inserts_per_minute; internal/pace).
const (
	// InsertBudget is the allowance, InsertBudgetRate the INSERTs the
	// server received from the sink in the last minute.
	InsertBudget     = "sink_insert_budget_per_minute"
	InsertBudgetRate = "sink_insert_budget_inserts_last_minute"
	// InsertBudgetExceeded counts the INSERTs latency bounds forced past
	// the budget.
	InsertBudgetExceeded = "sink_insert_budget_exceeded_total"
)

// budgetVecs are the budget's collectors, made on first use so a sink
// without a budget serves none.
type budgetVecs struct {
	budget, rate *prometheus.GaugeVec
	exceeded     *prometheus.CounterVec
	seen         map[string]int64
}

// Budget reports one server's budget: the allowance, the INSERTs of the
// last minute, and the total of INSERTs over it so far (a counter: only
// its growth is added). Owner goroutine only.
func (m *Metrics) Budget(server string, perMinute float64, lastMinute int, exceededTotal int64) {
	if m == nil {
		return
	}
	if m.budget == nil {
		b := &budgetVecs{
			budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: InsertBudget,
				Help: "The INSERTs per minute the server may receive from this connector (clickhouse.max_inserts_per_minute, or its share)."}, []string{"server"}),
			rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: InsertBudgetRate,
				Help: "INSERTs the connector sent the server in the last 60 seconds, against sink_insert_budget_per_minute."}, []string{"server"}),
			exceeded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: InsertBudgetExceeded,
				Help: "INSERTs sent past the server's budget because a table's latency bound (or memory) would not wait: latency wins over the budget."}, []string{"server"}),
			seen: map[string]int64{},
		}
		m.reg.MustRegister(b.budget, b.rate, b.exceeded)
		m.budget = b
	}
	b := m.budget
	b.budget.WithLabelValues(server).Set(perMinute)
	b.rate.WithLabelValues(server).Set(float64(lastMinute))
	c := b.exceeded.WithLabelValues(server)
	if d := exceededTotal - b.seen[server]; d > 0 {
		c.Add(float64(d))
		b.seen[server] = exceededTotal
	}
}

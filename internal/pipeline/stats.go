package pipeline

import (
	"time"
)

// statsInterval is how often the info-level summary line is written.
var statsInterval = 10 * time.Second

func (p *Pipeline) logStats(elapsed time.Duration, prev Stats) {
	lag := p.in.Lag()
	cur := p.Stats()
	rows, inserts := cur.Rows-prev.Rows, cur.Inserts-prev.Inserts
	perInsert := 0.0
	if inserts > 0 {
		perInsert = float64(rows) / float64(inserts)
	}
	retries := p.disp.Retries()
	p.log.Info().
		Float64("rows_per_sec", float64(rows)/elapsed.Seconds()).
		Int64("rows", rows).
		Int64("inserts", inserts).
		Float64("rows_per_insert", perInsert).
		Int64("records", cur.Records-prev.Records).
		Int64("dlq", cur.DLQ-prev.DLQ).
		Int64("lag", lag).
		Int("buffered_bytes", p.memUsed()).
		Int("in_flight", p.disp.InFlight()).
		Bool("paused", p.paused).
		Int64("retries_total", retries).
		Msg("stats")
}

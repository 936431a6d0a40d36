package pipeline

import (
	"time"

	"sink/internal/metrics"
	"sink/internal/offsets"
)

// statsInterval is how often the info-level summary line is written.
var statsInterval = 10 * time.Second

// topicMetrics returns topic's metric handle (nil without metrics).
func (p *Pipeline) topicMetrics(topic string) *metrics.Topic {
	if p.m == nil {
		return nil
	}
	t, ok := p.topicM[topic]
	if !ok {
		t = p.m.Topic(topic)
		p.topicM[topic] = t
	}
	return t
}

// partMetrics returns tp's metric handle (nil without metrics).
func (p *Pipeline) partMetrics(tp offsets.TP) *metrics.Partition {
	if p.m == nil {
		return nil
	}
	h, ok := p.partM[tp]
	if !ok {
		h = p.m.Partition(tp.Topic, tp.Partition)
		p.partM[tp] = h
	}
	return h
}

func (p *Pipeline) logStats(elapsed time.Duration, prev Stats) {
	var lag int64
	for _, l := range p.lag {
		lag += l
	}
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

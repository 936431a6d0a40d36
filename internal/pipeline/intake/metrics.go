package intake

import (
	"sink/internal/metrics"
	"sink/internal/offsets"
)

// topicMetrics returns topic's metric handle (nil without metrics).
func (in *Intake) topicMetrics(topic string) *metrics.Topic {
	if in.m == nil {
		return nil
	}
	t, ok := in.topicM[topic]
	if !ok {
		t = in.m.Topic(topic)
		in.topicM[topic] = t
	}
	return t
}

// partMetrics returns tp's metric handle (nil without metrics).
func (in *Intake) partMetrics(tp offsets.TP) *metrics.Partition {
	if in.m == nil {
		return nil
	}
	h, ok := in.partM[tp]
	if !ok {
		h = in.m.Partition(tp.Topic, tp.Partition)
		in.partM[tp] = h
	}
	return h
}

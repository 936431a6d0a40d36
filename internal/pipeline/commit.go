package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sink/internal/offsets"
)

// commitOffsets commits pos (with meta, the exactly-once ledgers) on the
// owner goroutine, waiting at most kafka.request_timeout: a coordinator
// that does not answer fails the commit, which the next one retries (an
// intent commit's failure is retried by its own backoff).
func (p *Pipeline) commitOffsets(pos map[offsets.TP]offsets.Commit, meta map[offsets.TP]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Kafka.RequestTimeout)
	defer cancel()
	return p.cons.Commit(ctx, pos, meta)
}

// committedSummary lists the committed position of every partition this
// member tracks ("t[0] up to offset 150, t[1] up to offset 7", or "nothing new").
func (p *Pipeline) committedSummary() string {
	tps := p.tracker.Partitions()
	slices.SortFunc(tps, func(a, b offsets.TP) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	var parts []string
	for _, tp := range tps {
		if c, ok := p.tracker.Position(tp); ok {
			parts = append(parts, fmt.Sprintf("%s[%d] up to offset %d", tp.Topic, tp.Partition, c.Offset))
		}
	}
	if len(parts) == 0 {
		return "nothing new"
	}
	return strings.Join(parts, ", ")
}

package pipeline

import (
	"sink/internal/consumer"
	"sink/internal/writer"
)

// The production adapters satisfy the ports, and what exactly-once and
// pausing need beyond them.
var (
	_ Source          = (*consumer.Consumer)(nil)
	_ clientSource    = (*consumer.Consumer)(nil)
	_ pauseSource     = (*consumer.Consumer)(nil)
	_ seekSource      = (*consumer.Consumer)(nil)
	_ positionsSource = (*consumer.Consumer)(nil)
	_ Sink            = (*writer.Writer)(nil)
	_ connSink        = (*writer.Writer)(nil)
)

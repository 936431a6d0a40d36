package pipeline

import (
	"sink/internal/consumer"
	"sink/internal/writer"
)

// The production adapters satisfy the ports, and what exactly-once needs
// beyond them.
var (
	_ Source       = (*consumer.Consumer)(nil)
	_ clientSource = (*consumer.Consumer)(nil)
	_ Sink         = (*writer.Writer)(nil)
	_ connSink     = (*writer.Writer)(nil)
)

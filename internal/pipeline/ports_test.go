package pipeline

import (
	"sink/internal/consumer"
	"sink/internal/eos/eosio"
	"sink/internal/writer"
)

// The production adapters satisfy the ports, what exactly-once needs
// beyond them, and what pausing and seeking need.
var (
	_ Source          = (*consumer.Consumer)(nil)
	_ pauseSource     = (*consumer.Consumer)(nil)
	_ seekSource      = (*consumer.Consumer)(nil)
	_ positionsSource = (*consumer.Consumer)(nil)
	_ Sink            = (*writer.Writer)(nil)
	_ placementSink   = (*writer.Cluster)(nil)
	_ ExactlyOnce     = (*eosio.IO)(nil)
)

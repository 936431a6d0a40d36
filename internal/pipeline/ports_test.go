package pipeline

import (
	"sink/internal/budget"
	"sink/internal/consumer"
	"sink/internal/eos/eosio"
	"sink/internal/writer"
)

// The production adapters satisfy the ports, what exactly-once needs
// beyond them, and the optional capabilities the pipeline asks them for.
var (
	_ Source              = (*consumer.Consumer)(nil)
	_ pauseSource         = (*consumer.Consumer)(nil)
	_ seekSource          = (*consumer.Consumer)(nil)
	_ positionsSource     = (*consumer.Consumer)(nil)
	_ protocolSource      = (*consumer.Consumer)(nil)
	_ Sink                = (*writer.Writer)(nil)
	_ partsReader         = (*writer.Writer)(nil)
	_ latestSink          = (*writer.Writer)(nil)
	_ TableCreator        = (*writer.Writer)(nil)
	_ columnAdder         = (*writer.Writer)(nil)
	_ truncater           = (*writer.Writer)(nil)
	_ Sink                = (*writer.Cluster)(nil)
	_ placementSink       = (*writer.Cluster)(nil)
	_ serverNamer         = (*writer.Cluster)(nil)
	_ partsReader         = (*writer.Cluster)(nil)
	_ columnAdder         = (*writer.Cluster)(nil)
	_ truncater           = (*writer.Cluster)(nil)
	_ ExactlyOnce         = (*eosio.IO)(nil)
	_ Sampler             = consumer.Sampler{}
	_ shareUsage          = (*budget.Sharer)(nil)
	_ consumer.Rebalancer = (*Pipeline)(nil)
)

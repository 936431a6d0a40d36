package pipeline

import (
	"sink/internal/budget"
	"sink/internal/cdc"
	"sink/internal/consumer"
	"sink/internal/eos/eosio"
	"sink/internal/pipeline/delivery"
	"sink/internal/pipeline/dispatch"
	"sink/internal/tables"
	"sink/internal/writer"
)

// The production adapters satisfy the ports, what exactly-once needs
// beyond them, and the optional capabilities the pipeline asks them for.
var (
	_ Source               = (*consumer.Consumer)(nil)
	_ pauseSource          = (*consumer.Consumer)(nil)
	_ seekSource           = (*consumer.Consumer)(nil)
	_ positionsSource      = (*consumer.Consumer)(nil)
	_ protocolSource       = (*consumer.Consumer)(nil)
	_ Sink                 = (*writer.Writer)(nil)
	_ dispatch.PartsReader = (*writer.Writer)(nil)
	_ cdc.Store            = (*writer.Writer)(nil)
	_ tables.Creator       = (*writer.Writer)(nil)
	_ tables.ColumnAdder   = (*writer.Writer)(nil)
	_ cdc.Truncater        = (*writer.Writer)(nil)
	_ Sink                 = (*writer.Cluster)(nil)
	_ delivery.Placer      = (*writer.Cluster)(nil)
	_ dispatch.ServerNamer = (*writer.Cluster)(nil)
	_ dispatch.PartsReader = (*writer.Cluster)(nil)
	_ tables.ColumnAdder   = (*writer.Cluster)(nil)
	_ cdc.Truncater        = (*writer.Cluster)(nil)
	_ delivery.IO          = (*eosio.IO)(nil)
	_ tables.Sampler       = consumer.Sampler{}
	_ dispatch.ShareUsage  = (*budget.Sharer)(nil)
	_ consumer.Rebalancer  = (*Pipeline)(nil)
)

// Package assemble turns a validated config into the connected parts of
// the daemon: the ClickHouse side (a writer, or a cluster writer when a
// route has a target), the exactly-once I/O, the schema registry client,
// the sampler schema.create types a new table by, the shared INSERT
// budget, the pipeline options that wire them in, the pipeline itself and
// the consumer that feeds it; and the Lifecycle `sink run` runs them with
// (lifecycle.go): a run started, stopped in place on request and started
// again, the group's offsets moved while stopped. `sink run` and `sink
// check` both build through Open and Parts.Pipeline, so what check checks
// is what run builds; check leaves out only what would change something
// (the consumer: it joins no group; the budget's reader goroutine; and it
// asks the pipeline to create no table).
//
// Concurrency: a Parts is built, used and closed by one goroutine (the
// command's). The parts it holds keep their own contracts: the pipeline
// owns its state once Run starts, and the budget sharer reads on a
// goroutine of its own between StartSharing and Close. A Lifecycle's Run
// goroutine owns the lifecycle; its other methods are safe from any
// goroutine (lifecycle.go).
package assemble

import (
	"context"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/budget"
	"sink/internal/consumer"
	"sink/internal/decode/column"
	"sink/internal/eos/eosio"
	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/registry"
	"sink/internal/tables"
	"sink/internal/writer"
)

// Sink is the ClickHouse side the daemon writes through: a
// *writer.Writer, or a *writer.Cluster when a route has a target.
type Sink interface {
	pipeline.Sink
	tables.Creator
	writer.InsertCounter
	Conn() driver.Conn
	Close() error
}

// Parts are the connected parts of one daemon, made by Open.
type Parts struct {
	// Sink is where batches are inserted and tables described; Cluster is
	// the same value when it is a cluster writer, else nil.
	Sink    Sink
	Cluster *writer.Cluster
	// ExactlyOnce is the exactly-once I/O (delivery: exactly_once), else nil.
	ExactlyOnce *eosio.IO
	// Registry is the schema registry client (schema_registry.urls), else nil.
	Registry *registry.Client
	// Sampler reads topics' newest records (schema.create, sink check).
	Sampler consumer.Sampler
	// Sharer shares each server's budget with its other writers
	// (clickhouse.share_budget with max_inserts_per_minute), else nil.
	Sharer *budget.Sharer

	metrics *metrics.Metrics
	log     zerolog.Logger
	closers []func() // in the order opened; Close runs them backwards
	tables  []string // what the last Pipeline built (Summary)
}

// Opener is the signature of Open: what `sink run` and `sink check` are
// given to build with.
type Opener func(ctx context.Context, cfg *config.Config, m *metrics.Metrics, log zerolog.Logger) (*Parts, error)

// Open connects the parts cfg asks for, in the order run needs them: the
// ClickHouse side, the shared budget, the exactly-once I/O, the schema
// registry client. m (nil: no metrics) and log receive the cluster
// writer's events. On an error, what was opened is closed again. It also
// sets how much String buffer memory the process keeps between batches
// for reuse (consumer.SpareLimit).
func Open(ctx context.Context, cfg *config.Config, m *metrics.Metrics, log zerolog.Logger) (*Parts, error) {
	p := &Parts{Sampler: consumer.Sampler{Kafka: cfg.Kafka}, metrics: m, log: log}
	column.SetSpareLimit(consumer.SpareLimit(cfg))
	for _, open := range []func(context.Context, *config.Config) error{p.openSink, p.openBudget, p.openExactlyOnce, p.openRegistry} {
		if err := open(ctx, cfg); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

// openSink opens the writer, or the cluster writer when a route has a
// target (target: local or distributed), with the dead-letter tables'
// routes so that their rows are placed as the route's are.
func (p *Parts) openSink(ctx context.Context, cfg *config.Config) error {
	if !slices.ContainsFunc(cfg.Routes, func(r config.Route) bool { return r.Target != "" }) {
		w, err := writer.Open(ctx, cfg.Name, cfg.ClickHouse)
		if err != nil {
			return err
		}
		p.Sink = w
		p.closers = append(p.closers, func() { _ = w.Close() })
		return nil
	}
	c, err := writer.OpenCluster(ctx, cfg.Name, cfg.ClickHouse, append(slices.Clip(cfg.Routes), cfg.DLQRoutes()...))
	if err != nil {
		return err
	}
	c.Observe(clusterEvents{p.metrics, p.log})
	p.Sink, p.Cluster = c, c
	p.closers = append(p.closers, func() { _ = c.Close() })
	return nil
}

// openBudget makes the sharer of each server's budget with its other
// writers when clickhouse.share_budget asks for it. It reads nothing
// until StartSharing.
func (p *Parts) openBudget(_ context.Context, cfg *config.Config) error {
	if ch := cfg.ClickHouse; ch.MaxInsertsPerMinute > 0 && ch.ShareBudget {
		p.Sharer = budget.NewSharer(budget.Settings{PerMinute: ch.MaxInsertsPerMinute}, writer.ShareReader(p.Sink, ch.QueryTimeout), 0, p.log)
	}
	return nil
}

// openExactlyOnce prepares the exactly-once I/O; on a cluster its table
// checks read every shard.
func (p *Parts) openExactlyOnce(_ context.Context, cfg *config.Config) error {
	if !cfg.ExactlyOnce() {
		return nil
	}
	io, err := eosio.NewIO(cfg, p.Sink.Conn())
	if err != nil {
		return err
	}
	if p.Cluster != nil {
		io.OnCluster(p.Cluster)
	}
	p.ExactlyOnce = io
	p.closers = append(p.closers, io.Close)
	return nil
}

// openRegistry makes the client of schema_registry, which the
// registry-framed formats look their schemas up in.
func (p *Parts) openRegistry(_ context.Context, cfg *config.Config) error {
	if !cfg.SchemaRegistry.Enabled() {
		return nil
	}
	rc, err := registry.New(cfg.SchemaRegistry, registry.Options{})
	if err != nil {
		return err
	}
	p.Registry = rc
	return nil
}

// Options are the pipeline options that wire the parts in.
func (p *Parts) Options() []pipeline.Option {
	opts := []pipeline.Option{pipeline.WithMetrics(p.metrics)}
	if p.Sharer != nil {
		opts = append(opts, pipeline.WithAllowance(p.Sharer))
	}
	if p.ExactlyOnce != nil {
		opts = append(opts, pipeline.WithExactlyOnce(p.ExactlyOnce))
	}
	opts = append(opts, pipeline.WithSampler(p.Sampler))
	if p.Registry != nil {
		opts = append(opts, pipeline.WithRegistry(p.Registry))
	}
	return opts
}

// Pipeline builds the pipeline of cfg over the parts, with Options and
// then extra (sink check: pipeline.WithoutCreate). cfg is the config Open
// was given, or one with fewer routes (check leaves out the routes whose
// table schema.create would create).
func (p *Parts) Pipeline(ctx context.Context, cfg *config.Config, log zerolog.Logger, extra ...pipeline.Option) (*pipeline.Pipeline, error) {
	pl, err := pipeline.New(ctx, cfg, log, p.Sink, append(p.Options(), extra...)...)
	if err != nil {
		return nil, err
	}
	p.tables = p.tables[:0]
	for _, t := range pl.Catalog().Targets() {
		p.tables = append(p.tables, t.FullName())
	}
	return pl, nil
}

// Consumer joins cfg's consumer group with pl's hooks and attaches it to
// pl: the last part, made once the pipeline can take the group's
// callbacks. The caller closes it (leaving the group) after pl.Run.
func (p *Parts) Consumer(ctx context.Context, cfg *config.Config, log zerolog.Logger, pl *pipeline.Pipeline) (*consumer.Consumer, error) {
	cons, err := consumer.New(ctx, cfg, log, consumer.HooksOf(pl))
	if err != nil {
		return nil, err
	}
	pl.Attach(cons)
	return cons, nil
}

// StartSharing starts reading the other writers' INSERTs for the shared
// budget, off the pipeline's goroutine, until Close. Without a sharer it
// does nothing.
func (p *Parts) StartSharing() {
	if p.Sharer == nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Sharer.Run(ctx) }()
	p.closers = append(p.closers, func() { stop(); <-done })
}

// Close closes the parts in the reverse order of their opening: the
// sharer's reads stop and the exactly-once I/O closes before the
// ClickHouse pools they use.
func (p *Parts) Close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
	p.closers = nil
}

// Summary is what the parts are, in words: the kind of sink, the optional
// parts present, the pipeline options and the tables the last Pipeline
// resolved. run logs it (at debug level); a test compares run's with
// check's.
type Summary struct {
	Sink                                                         string // "writer" or "cluster"
	ExactlyOnce, ExactlyOnceOnCluster, Registry, Sharer, Metrics bool
	Sampled                                                      []string // the sampler's brokers
	Options                                                      int
	Tables                                                       []string
}

// Summary says what the parts are (see Summary).
func (p *Parts) Summary() Summary {
	s := Summary{Sink: "writer", ExactlyOnce: p.ExactlyOnce != nil, Registry: p.Registry != nil,
		Sharer: p.Sharer != nil, Metrics: p.metrics != nil, Sampled: p.Sampler.Kafka.Brokers,
		Options: len(p.Options()), Tables: slices.Clone(p.tables)}
	if p.Cluster != nil {
		s.Sink = "cluster"
		s.ExactlyOnceOnCluster = s.ExactlyOnce
	}
	return s
}

// clusterEvents passes the cluster writer's outcomes to the metrics (which
// may be nil: no http.listen) and logs the schema holds.
type clusterEvents struct {
	*metrics.Metrics
	log zerolog.Logger
}

func (e clusterEvents) SchemaHeld(table, diffs string) {
	e.log.Warn().Str("table", table).Str("differences", diffs).
		Msg("cluster: holding the table's parts: its local tables have different columns on different replicas (a half-applied ALTER?); waiting for them to agree")
	e.Metrics.SchemaHeld(table, diffs)
}

func (e clusterEvents) SchemaReleased(table string, waited time.Duration, agreed bool) {
	if agreed {
		e.log.Info().Str("table", table).Dur("waited", waited).Msg("cluster: the local tables agree again; inserting the held parts")
	}
	e.Metrics.SchemaReleased(table, waited, agreed)
}

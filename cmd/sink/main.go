// Command sink moves Kafka topics into ClickHouse in large, few inserts.
//
// main only parses the command line, wires the components and stops them
// in reverse order; everything else lives in internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/budget"
	"sink/internal/command/check"
	"sink/internal/consumer"
	"sink/internal/eos/eosio"
	"sink/internal/errtext"
	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/registry"
	"sink/internal/status"
	"sink/internal/writer"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

const usage = `sink moves Kafka topics into ClickHouse in large, few inserts.

Usage:
  sink run     --config FILE   consume and insert until SIGTERM/SIGINT; serves
                               /metrics, /healthz, /readyz, GET /status, the
                               status page at / and, with http.admin: true,
                               POST /pause and /resume on http.listen
  sink check   --config FILE   validate the config, reach Kafka and ClickHouse,
                               check every route's table and columns, list the
                               fields of recent records that no column takes
                               (and the DDL schema.evolve would run), then exit
  sink report  --table DB.TABLE [--since 2h] [--split T] [--config FILE] ...
                               inserts per minute into a table, from ClickHouse's
                               query_log and part_log; before/after a split
  sink advise  --config FILE [--window 60s] [--inserts-per-minute N]
                               measure each routed topic's rate and recommend
                               fetch and batch settings, showing the arithmetic
  sink offsets show|reset --config FILE [--to WHERE | TOPIC:PARTITION=OFFSET ...]
                               the group's committed offsets, lag and pending
                               ledger; move them (dry run unless --execute)
  sink import  [--out DIR] [--brokers LIST] [--native HOST:PORT] FILE|DIR ...
                               turn Kafka Connect configs of ClickHouse's official
                               sink into sink YAML (one per connector, keeping the
                               consumer group), with what became of every key
  sink version                 print the version

Every config key can be overridden from the environment: SINK_ + the key path
in upper case with __ between levels, e.g. SINK_CLICKHOUSE__PASSWORD,
SINK_KAFKA__BROKERS=a:9092,b:9092, SINK_BATCH__MAX_WAIT=2s.

Each command prints its own flags with --help (e.g. sink report --help).

Exit status: 0 after a clean shutdown (all batches flushed and committed), a
passed check, a printed report or advice, or an import with no key left
unsupported; 1 on a config, connection or fatal pipeline error (or a key the
import could not carry); 2 on usage errors; 130 when a second signal
interrupts the shutdown.
`

const runUsage = `Usage: sink run --config FILE

Joins the connector's consumer group, consumes its topics and inserts their
records into ClickHouse in large batches until SIGTERM or SIGINT; then it
stops fetching, flushes every batch, commits and leaves the group, all within
shutdown_timeout (a second signal exits at once, without the flush). Offsets
are committed only below records already in ClickHouse or the dead-letter
topic or table. Logs go to stderr (log.level, log.format); the config's
warnings, deprecated keys among them, are logged at start.

With http.listen it serves /metrics, /healthz, /readyz, GET /status and the
status page at /; with http.admin: true also POST /pause and /resume.
Every key of FILE can be overridden from the environment: SINK_ + the key path
in upper case with __ between levels, e.g. SINK_CLICKHOUSE__PASSWORD.

Exit status: 0 after a clean shutdown (all batches flushed and committed), 1 on
a config, connection or fatal pipeline error, 2 on usage errors, 130 when a
second signal interrupts the shutdown.

Flags:
`

const checkUsage = `Usage: sink check --config FILE

Checks what sink run would need, in the order it needs it, and prints one line
per finding: the config (with its warnings and deprecated keys), the brokers
and topics, the dead-letter topic, the ClickHouse server and its features, on
a cluster every shard and replica, the schema registry, every route's table
and columns, and what exactly_once needs. It also decodes a sample of each
topic's newest records and lists the fields no column takes (with the DDL
schema.evolve would run), and for a missing schema.create table the CREATE
TABLE run would execute. It runs none of them, joins no group and commits
nothing.

Exit status: 0 when every check passed (the last line is "check: ok"), 1 on
the first problem (the one run would stop on) or a config error, 2 on usage
errors.

Flags:
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run", "check":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		fs.SetOutput(stderr)
		text := runUsage
		if cmd == "check" {
			text = checkUsage
		}
		fs.Usage = func() { fmt.Fprint(stderr, text); fs.PrintDefaults() }
		path := fs.String("config", "", "the connector's YAML config `file` (required)")
		if err := fs.Parse(rest); err != nil {
			return parseExit(err)
		}
		if *path == "" || fs.NArg() > 0 {
			fmt.Fprintf(stderr, "sink %s: --config FILE is required and takes no other arguments\n", cmd)
			return 2
		}
		cfg, err := config.Load(*path, os.Environ())
		if err != nil {
			fmt.Fprintf(stderr, "sink: %v\n", err)
			return 1
		}
		if cmd == "check" {
			ctx, cancel := context.WithTimeout(context.Background(), check.Timeout(cfg))
			defer cancel()
			if err := check.Run(ctx, cfg, stdout); err != nil {
				fmt.Fprintf(stderr, "sink check: %v\n", err)
				return 1
			}
			return 0
		}
		return run(cfg, stderr)
	case "report":
		return reportCmd(rest, stdout, stderr)
	case "advise":
		return adviseCmd(rest, stdout, stderr)
	case "offsets":
		return offsetsCmd(rest, stdout, stderr)
	case "import":
		return importCmd(rest, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "sink", version)
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sink: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// parseExit is the exit status after a command's flags failed to parse:
// 0 for --help (the usage was asked for and printed), 2 otherwise (the
// flag package has printed the problem and the usage).
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func newLogger(cfg config.Log, out io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.Level)
	if err != nil {
		level = zerolog.InfoLevel // config.Validate already rejected bad levels
	}
	if cfg.Format == "console" {
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: time.RFC3339}
	}
	// Every error a log line carries is cut to about 1 KB, start and end
	// kept (a decode error can quote its input at every nesting level).
	zerolog.ErrorMarshalFunc = errtext.Marshal
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

func run(cfg *config.Config, stderr io.Writer) int {
	log := newLogger(cfg.Log, stderr).With().Str("connector", cfg.Name).Logger()
	ctx, stop := signals(log)
	defer stop()
	for _, w := range cfg.Warnings() {
		log.Warn().Msg(w)
	}
	if os.Getenv("GOMEMLIMIT") == "" { // the operator's own limit wins
		limit := consumer.MemoryLimit(cfg)
		debug.SetMemoryLimit(limit)
		log.Debug().Int64("bytes", limit).Msg("Go memory limit derived from batch.buffer_memory")
	}

	// The HTTP server starts first and stops last, so /healthz answers and
	// /readyz explains "not ready" for the whole life of the process.
	var (
		m  *metrics.Metrics
		st *status.Handler
	)
	if cfg.HTTP.Listen != "" {
		m = metrics.New(cfg.Kafka.Group)
		st = status.New(status.InfoFor(cfg, version), status.WorkerID(cfg.HTTP.Listen), m)
		srv, err := metrics.ServeHandler(cfg.HTTP.Listen, st.Routes(m.Handler()))
		if err != nil {
			fmt.Fprintf(stderr, "sink: %v\n", err)
			return 1
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Close(sctx)
		}()
		log.Info().Str("addr", srv.Addr()).Bool("admin", cfg.HTTP.Admin).
			Msg("serving /metrics, /healthz, /readyz, /status and the status page at /")
	}

	w, err := openSink(ctx, cfg, m, log)
	if err != nil && ctx.Err() != nil {
		// SIGTERM while connecting to ClickHouse (a slow server, or a
		// cluster's nodes being read): nothing was consumed yet.
		log.Info().Msg("stopped before the pipeline started")
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sink: %v\n", err)
		return 1
	}
	defer w.Close()
	m.SetPinger(func(ctx context.Context) error { return w.Conn().Ping(ctx) })
	opts := []pipeline.Option{pipeline.WithMetrics(m)}
	if ch := cfg.ClickHouse; ch.MaxInsertsPerMinute > 0 && ch.ShareBudget {
		// Each server's budget is shared with its other writers: read
		// their INSERTs off the pipeline's goroutine, for as long as it runs.
		sh := budget.NewSharer(budget.Settings{PerMinute: ch.MaxInsertsPerMinute}, writer.ShareReader(w, ch.QueryTimeout), 0, log)
		sctx, stopShare := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); sh.Run(sctx) }()
		defer func() { stopShare(); <-done }()
		opts = append(opts, pipeline.WithAllowance(sh))
	}
	if cfg.ExactlyOnce() {
		io, err := eosio.NewIO(cfg, w.Conn())
		if err != nil {
			fmt.Fprintf(stderr, "sink: %v\n", err)
			return 1
		}
		defer io.Close()
		if c, ok := w.(*writer.Cluster); ok {
			io.OnCluster(c) // the table checks read every shard
		}
		opts = append(opts, pipeline.WithExactlyOnce(io))
	}
	// schema.create samples a topic's newest records with a client of its
	// own; the registry-framed formats look their schemas up in
	// schema_registry.
	opts = append(opts, pipeline.WithSampler(consumer.Sampler{Kafka: cfg.Kafka}))
	if cfg.SchemaRegistry.Enabled() {
		rc, err := registry.New(cfg.SchemaRegistry, registry.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "sink: %v\n", err)
			return 1
		}
		opts = append(opts, pipeline.WithRegistry(rc))
	}
	p, err := pipeline.New(ctx, cfg, log, w, opts...)
	if err != nil && ctx.Err() != nil {
		// Stopped while New waited (schema.create on an empty topic):
		// nothing was consumed, so there is nothing to flush.
		log.Info().Msg("stopped before the pipeline started")
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sink: %v\n", err)
		return 1
	}
	if cfg.ExactlyOnce() {
		if err := p.CheckExactlyOnce(ctx); err != nil {
			fmt.Fprintf(stderr, "sink: %v\n", err)
			return 1
		}
	}
	cons, err := consumer.New(ctx, cfg, log, consumer.HooksOf(p))
	if err != nil {
		fmt.Fprintf(stderr, "sink: %v\n", err)
		return 1
	}
	p.Attach(cons)
	if st != nil {
		st.SetController(p)
	}
	log.Info().Str("version", version).Strs("topics", cfg.Kafka.Topics).Str("group", cfg.Kafka.Group).
		Int("max_rows", cfg.Batch.MaxRows).Str("max_bytes", cfg.Batch.MaxBytes.String()).
		Dur("max_wait", cfg.Batch.MaxWait).Bool("ignore_partitions", cfg.Batch.IgnorePartitions).
		Msg("started")
	err = p.Run(ctx)
	cons.Close() // leaves the group: after the final commit, before the ClickHouse pool closes
	if err != nil {
		// The reason the run ended is the last line, after every log line
		// of the flush and the leave.
		fmt.Fprintf(stderr, "sink: %s\n", errtext.Of(err))
		return 1
	}
	log.Info().Msg("stopped")
	return 0
}

// clusterSink is what run needs of the ClickHouse side: a writer.Writer,
// or a writer.Cluster when a route has a cluster target.
type clusterSink interface {
	pipeline.Sink
	writer.InsertCounter
	Conn() driver.Conn
	Close() error
}

// openSink opens the writer, or the cluster writer when a route has a
// target (target: local or distributed).
func openSink(ctx context.Context, cfg *config.Config, m *metrics.Metrics, log zerolog.Logger) (clusterSink, error) {
	for _, r := range cfg.Routes {
		if r.Target != "" {
			c, err := writer.OpenCluster(ctx, cfg.Name, cfg.ClickHouse, append(slices.Clip(cfg.Routes), cfg.DLQRoutes()...))
			if err != nil {
				return nil, err
			}
			c.Observe(clusterEvents{m, log})
			return c, nil
		}
	}
	return writer.Open(ctx, cfg.Name, cfg.ClickHouse)
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

// signals cancels the returned context on the first SIGTERM/SIGINT; a second
// one exits at once, abandoning the flush.
func signals(log zerolog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s, ok := <-ch
		if !ok {
			return
		}
		log.Info().Str("signal", s.String()).Msg("stopping: flushing open batches (send again to exit at once)")
		cancel()
		if _, ok := <-ch; ok {
			log.Warn().Msg("second signal: exiting without flushing; uncommitted records will be consumed again")
			os.Exit(130)
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

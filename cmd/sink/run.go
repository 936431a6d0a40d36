package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/assemble"
	"sink/internal/command/connectimport"
	"sink/internal/consumer"
	"sink/internal/errtext"
	"sink/internal/metrics"
	"sink/internal/status"
)

// newLogger is the daemon's logger: log.level and log.format, written to out.
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

// run is `sink run`: it starts the components in order (HTTP server,
// ClickHouse side and the other parts, the connector's lifecycle, which
// builds the pipeline and the consumer), runs the connector until a
// signal (stopped and resumed meanwhile through the REST API, as often as
// asked), and stops them in reverse order.
func run(cfg *config.Config, stderr io.Writer) int {
	log := newLogger(cfg.Log, stderr).With().Str("connector", cfg.Name).Logger()
	ctx, stop := signals(log)
	defer stop()
	for _, w := range cfg.Warnings() {
		log.Warn().Msg(w)
	}
	setMemoryLimit(cfg, log)
	fail := func(err error) int { fmt.Fprintf(stderr, "sink: %v\n", err); return 1 }

	// The HTTP server starts first and stops last, so /healthz answers and
	// /readyz explains "not ready" for the whole life of the process.
	side, err := serveHTTP(cfg, log)
	if err != nil {
		return fail(err)
	}
	defer side.close()
	parts, err := openParts(ctx, cfg, side.m, log)
	if err != nil {
		return startFailed(ctx, err, log, fail)
	}
	defer parts.Close()
	side.m.SetPinger(func(ctx context.Context) error { return parts.Sink.Conn().Ping(ctx) })
	parts.StartSharing()
	offs, err := assemble.GroupOffsets(cfg, parts)
	if err != nil {
		return fail(err)
	}
	lc := assemble.NewLifecycle(cfg, log, side.m, func(ctx context.Context) (assemble.Instance, error) {
		inst, err := parts.Start(ctx, cfg, log)
		if err == nil {
			logStarted(cfg, log)
		}
		return inst, err
	}, offs)
	side.control(lc)
	err = lc.Run(ctx)
	var start *assemble.StartError
	switch {
	case errors.As(err, &start):
		return startFailed(ctx, start.Err, log, fail)
	case err != nil:
		// The reason the run ended is the last line, after every log line
		// of the flush and the leave.
		fmt.Fprintf(stderr, "sink: %s\n", errtext.Of(err))
		return 1
	}
	log.Info().Msg("stopped")
	return 0
}

// logStarted says that a run of the connector started, with its settings.
func logStarted(cfg *config.Config, log zerolog.Logger) {
	log.Info().Str("version", version).Strs("topics", cfg.Kafka.Topics).Str("group", cfg.Kafka.Group).
		Int("max_rows", cfg.Batch.MaxRows).Str("max_bytes", cfg.Batch.MaxBytes.String()).
		Dur("max_latency", cfg.Batch.MaxLatency).Dur("batch_wait", cfg.Batch.MaxWait).Bool("ignore_partitions", cfg.Batch.IgnorePartitions).
		Msg("started")
}

// startFailed is run's exit when a part could not be made: 0 when a
// signal came meanwhile (a slow server, a cluster's nodes being read, or
// schema.create waiting on an empty topic: nothing was consumed, so there
// is nothing to flush), else 1 with the error.
func startFailed(ctx context.Context, err error, log zerolog.Logger, fail func(error) int) int {
	if ctx.Err() != nil {
		log.Info().Msg("stopped before the pipeline started")
		return 0
	}
	return fail(err)
}

// setMemoryLimit derives the Go memory limit from batch.buffer_memory
// unless the operator set GOMEMLIMIT (theirs wins).
func setMemoryLimit(cfg *config.Config, log zerolog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := consumer.MemoryLimit(cfg)
	debug.SetMemoryLimit(limit)
	log.Debug().Int64("bytes", limit).Msg("Go memory limit derived from batch.buffer_memory")
}

// httpSide is run's HTTP side: the metrics, the status handler and their
// server, all nil without http.listen.
type httpSide struct {
	m   *metrics.Metrics
	st  *status.Handler
	srv *metrics.Server
}

// serveHTTP starts the server of http.listen (none when it is "").
func serveHTTP(cfg *config.Config, log zerolog.Logger) (httpSide, error) {
	if cfg.HTTP.Listen == "" {
		return httpSide{}, nil
	}
	m := metrics.New(cfg.Kafka.Group)
	info := status.InfoFor(cfg, version)
	info.Config = connectimport.ConnectConfig(cfg)
	st := status.New(info, status.WorkerID(cfg.HTTP.Listen), m)
	srv, err := metrics.ServeHandler(cfg.HTTP.Listen, st.Routes(m.Handler()))
	if err != nil {
		return httpSide{}, err
	}
	log.Info().Str("addr", srv.Addr()).Bool("admin", cfg.HTTP.Admin).
		Msg("serving /metrics, /healthz, /readyz, /status, the status page at / and Kafka Connect's /connectors/… API")
	return httpSide{m: m, st: st, srv: srv}, nil
}

// control gives the status handler the connector to report on, pause,
// stop and resume, and whose offsets to serve.
func (w httpSide) control(lc *assemble.Lifecycle) {
	if w.st != nil {
		w.st.SetController(lc)
	}
}

// close stops the server, giving requests in flight 5 s.
func (w httpSide) close() {
	if w.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.srv.Close(ctx)
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

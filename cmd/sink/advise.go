package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"sink/config"
	"sink/internal/command/advise"
)

const adviseUsage = `Usage: sink advise --config FILE [--window 60s] [--inserts-per-minute N] [--max-latency D]

Measures each routed topic's current rate (records/s from the growth of its
end offsets over --window; bytes/s from the average size of a sample of its
newest records) and prints recommended kafka.fetch_min_bytes, fetch_max_wait,
request_timeout and batch.max_rows, max_bytes, max_latency for the target, with
the arithmetic and the inserts/min and latency to expect. It joins no group and
commits nothing.

Flags:
`

func adviseCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("advise", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adviseUsage); fs.PrintDefaults() }
	path := fs.String("config", "", "the connector's YAML config (required); when absent, $SINK_CONFIG")
	window := fs.Duration("window", time.Minute, "how long to watch the end offsets")
	perMin := fs.Float64("inserts-per-minute", 1, "target INSERTs per minute per table")
	maxLatency := fs.Duration("max-latency", 0, "longest tolerable delay from produce to insert (0: 60s / inserts-per-minute)")
	sample := fs.Int("sample", 1000, "records per topic to read for the average size")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	*path = configPath(*path)
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "sink advise: --config FILE is required (or SINK_CONFIG) and takes no other arguments")
		return 2
	}
	for _, bad := range []struct {
		wrong bool
		msg   string
	}{
		{*window < time.Second, fmt.Sprintf("--window %s: must be at least 1s", *window)},
		{*perMin <= 0, fmt.Sprintf("--inserts-per-minute %g: must be more than 0", *perMin)},
		{*maxLatency < 0, fmt.Sprintf("--max-latency %s: must not be negative", *maxLatency)},
		{*sample < 1, fmt.Sprintf("--sample %d: must be at least 1", *sample)},
	} {
		if bad.wrong {
			fmt.Fprintf(stderr, "sink advise: %s\n", bad.msg)
			return 2
		}
	}
	cfg, err := config.Load(*path, os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "sink advise: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *window+2*time.Minute)
	defer cancel()
	if err := advise.Run(ctx, cfg, *window, *sample, advise.Target{InsertsPerMinute: *perMin, MaxLatency: *maxLatency}, stdout); err != nil {
		fmt.Fprintf(stderr, "sink advise: %v\n", err)
		return 1
	}
	return 0
}

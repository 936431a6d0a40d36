package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/advise"
	"sink/internal/consumer"
)

const adviseUsage = `Usage: sink advise --config FILE [--window 60s] [--inserts-per-minute N] [--max-latency D]

Measures each routed topic's current rate (records/s from the growth of its
end offsets over --window; bytes/s from the average size of a sample of its
newest records) and prints recommended kafka.fetch_min_bytes, fetch_max_wait,
request_timeout and batch.max_rows, max_bytes, max_wait for the target, with
the arithmetic and the inserts/min and latency to expect. It joins no group and
commits nothing.

Flags:
`

func adviseCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("advise", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adviseUsage); fs.PrintDefaults() }
	path := fs.String("config", "", "the connector's YAML config (required)")
	window := fs.Duration("window", time.Minute, "how long to watch the end offsets")
	perMin := fs.Float64("inserts-per-minute", 1, "target INSERTs per minute per table")
	maxLatency := fs.Duration("max-latency", 0, "longest tolerable delay from produce to insert (0: 60s / inserts-per-minute)")
	sample := fs.Int("sample", 1000, "records per topic to read for the average size")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "sink advise: --config FILE is required and takes no other arguments")
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
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sink advise: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *window+2*time.Minute)
	defer cancel()
	parts, err := consumer.Probe(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	routed := map[string]string{} // topic → db.table
	var names []string
	for t := range parts {
		for _, r := range cfg.Routes {
			if r.Matches(t) {
				db, table := cfg.TableFor(r)
				routed[t] = db + "." + table
				names = append(names, t)
				break
			}
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return fail(errors.New("no consumed topic matches a route: nothing to measure"))
	}
	fmt.Fprintf(stdout, "measuring %s for %s...\n", strings.Join(names, ", "), *window)
	topics, err := measure(ctx, cfg.Kafka.Brokers, names, *window, *sample)
	if err != nil {
		return fail(err)
	}
	for i := range topics {
		topics[i].Table = routed[topics[i].Name]
	}
	a := advise.Recommend(topics, cfg, advise.Target{InsertsPerMinute: *perMin, MaxLatency: *maxLatency})
	printAdvice(stdout, a, cfg)
	return 0
}

func printAdvice(w io.Writer, a advise.Advice, cfg *config.Config) {
	fmt.Fprintln(w, "\nthe arithmetic:")
	for _, s := range a.Steps {
		fmt.Fprintln(w, "  "+s)
	}
	fmt.Fprintln(w, "\nrecommended (now → advised):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(key string, now, adv any) { fmt.Fprintf(tw, "  %s\t%v\t→ %v\n", key, now, adv) }
	row("kafka.fetch_min_bytes", cfg.Kafka.FetchMinBytes, a.FetchMinBytes)
	row("kafka.fetch_max_wait", cfg.Kafka.FetchMaxWait, a.FetchMaxWait)
	row("kafka.request_timeout", cfg.Kafka.RequestTimeout, a.RequestTimeout)
	row("batch.max_rows", cfg.Batch.MaxRows, a.MaxRows)
	row("batch.max_bytes", cfg.Batch.MaxBytes, a.MaxBytes)
	row("batch.max_wait", cfg.Batch.MaxWait, a.MaxWait)
	tw.Flush()
	fmt.Fprintln(w, "\nexpected:")
	for _, t := range a.Tables {
		fmt.Fprintf(w, "  %s: %.1f inserts/min, %.0f rows/insert\n", t.Name, t.InsertsPerMinute, t.RowsPerInsert)
	}
	fmt.Fprintf(w, "  latency: at most %s from produce to the start of its INSERT\n", a.Latency)
	for _, s := range a.Warnings {
		fmt.Fprintln(w, "warning: "+s)
	}
	fmt.Fprintf(w, "\nas YAML:\n%s", a.YAML())
}

// measure watches the topics' end offsets for window and, meanwhile, reads
// up to sample of the newest records of each topic for their average size.
func measure(ctx context.Context, brokers, topics []string, window time.Duration, sample int) ([]advise.Topic, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := func(start bool) (kadm.ListedOffsets, error) {
		var l kadm.ListedOffsets
		var err error
		if start {
			l, err = adm.ListStartOffsets(ctx, topics...)
		} else {
			l, err = adm.ListEndOffsets(ctx, topics...)
		}
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("kafka: listing offsets of %s: %w", strings.Join(topics, ", "), err)
		}
		return l, nil
	}
	first, err := list(false)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	starts, err := list(true)
	if err != nil {
		return nil, err
	}
	sampled, sampledBytes, err := sampleSizes(ctx, brokers, first, starts, sample)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(time.Until(t0.Add(window))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	last, err := list(false)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(t0)
	out := make([]advise.Topic, 0, len(topics))
	for _, t := range topics {
		at := advise.Topic{Name: t, Window: elapsed, Sampled: sampled[t], SampledBytes: sampledBytes[t]}
		last.Each(func(o kadm.ListedOffset) {
			if o.Topic != t {
				return
			}
			at.Partitions++
			if f, ok := first.Lookup(t, o.Partition); ok {
				at.Records += o.Offset - f.Offset
			}
		})
		out = append(out, at)
	}
	return out, nil
}

// sampleSizes reads up to sample records per topic, ending at the end
// offsets in ends and spread over the partitions, and sums key+value bytes
// (what the sink counts as bytes consumed).
func sampleSizes(ctx context.Context, brokers []string, ends, starts kadm.ListedOffsets, sample int) (map[string]int, map[string]int64, error) {
	perTopic := map[string]int{}
	ends.Each(func(o kadm.ListedOffset) { perTopic[o.Topic]++ })
	want := map[string]map[int32]kgo.Offset{}
	remaining := map[string]map[int32]int64{} // records still to read per partition
	total := 0
	ends.Each(func(o kadm.ListedOffset) {
		per := int64((sample + perTopic[o.Topic] - 1) / perTopic[o.Topic])
		from := o.Offset - per
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && from < s.Offset {
			from = s.Offset
		}
		if from >= o.Offset {
			return
		}
		if want[o.Topic] == nil {
			want[o.Topic], remaining[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		want[o.Topic][o.Partition] = kgo.NewOffset().At(from)
		remaining[o.Topic][o.Partition] = o.Offset - from
		total += int(o.Offset - from)
	})
	n, b := map[string]int{}, map[string]int64{}
	if total == 0 {
		return n, b, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(want))
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	// Transaction markers take offsets but are never returned, so the
	// count may stay short of the goal: the deadline ends the wait.
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	got := 0
	for got < total && sctx.Err() == nil {
		fetches := cl.PollFetches(sctx)
		fetches.EachRecord(func(r *kgo.Record) {
			left := remaining[r.Topic][r.Partition]
			if left <= 0 {
				return
			}
			remaining[r.Topic][r.Partition] = left - 1
			n[r.Topic]++
			b[r.Topic] += int64(len(r.Key) + len(r.Value))
			got++
		})
	}
	return n, b, nil
}

package advise

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/consumer"
)

// Routed returns, for each topic that a route matches, the db.table its
// records go to, and the matched topics in the order given. A route whose
// table names placeholders (${topic}, ${topic.last}, ${N}) is resolved for
// each topic, as `sink run` and `sink check` do; a topic whose name does
// not fill the template is an error naming the route.
func Routed(cfg *config.Config, topics []string) (map[string]string, []string, error) {
	tables := map[string]string{}
	var matched []string
	for _, t := range topics {
		for i, r := range cfg.Routes {
			if !r.Matches(t) {
				continue
			}
			db, table, err := cfg.TableForTopic(r, t)
			if err != nil {
				return nil, nil, fmt.Errorf("routes[%d]: %w", i, err)
			}
			tables[t] = db + "." + table
			matched = append(matched, t)
			break // the first matching route is the one the pipeline uses
		}
	}
	return tables, matched, nil
}

// Measure watches the topics' end offsets for window and, meanwhile, reads
// up to sample of the newest records of each topic for their average size.
// Its clients join no group, commit nothing, and use k's brokers with the
// same TLS and SASL settings as the sink's consumer.
func Measure(ctx context.Context, k config.Kafka, topics []string, window time.Duration, sample int) ([]Topic, error) {
	base, err := consumer.ClientOptions(k)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := func(start bool) (kadm.ListedOffsets, error) { return consumer.ListOffsets(ctx, adm, topics, start) }
	first, err := list(false)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	starts, err := list(true)
	if err != nil {
		return nil, err
	}
	sampled, sampledBytes, err := sampleSizes(ctx, base, first, starts, sample)
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
	out := make([]Topic, 0, len(topics))
	for _, t := range topics {
		at := Topic{Name: t, Window: elapsed, Sampled: sampled[t], SampledBytes: sampledBytes[t]}
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
// (what the sink counts as bytes consumed). base are the client options of
// the brokers (seeds, TLS, SASL).
func sampleSizes(ctx context.Context, base []kgo.Opt, ends, starts kadm.ListedOffsets, sample int) (map[string]int, map[string]int64, error) {
	n, b := map[string]int{}, map[string]int64{}
	err := consumer.SampleNewest(ctx, base, ends, starts, sample, func(r *kgo.Record) {
		n[r.Topic]++
		b[r.Topic] += int64(len(r.Key) + len(r.Value))
	})
	if err != nil {
		return nil, nil, err
	}
	return n, b, nil
}

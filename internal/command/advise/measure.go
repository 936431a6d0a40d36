package advise

import (
	"context"
	"fmt"
	"strings"
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
	list := func(start bool) (kadm.ListedOffsets, error) { return listOffsets(ctx, adm, topics, start) }
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

// listOffsets lists the topics' start (or end) offsets.
func listOffsets(ctx context.Context, adm *kadm.Client, topics []string, start bool) (kadm.ListedOffsets, error) {
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

// SampleRecords calls fn with up to n of the newest records of each topic,
// spread over its partitions (fewer when a topic holds fewer, or when the
// read takes longer than 15 s). Its client joins no group, commits nothing,
// and uses k's brokers with the same TLS and SASL settings as the sink's
// consumer. fn runs on the calling goroutine.
func SampleRecords(ctx context.Context, k config.Kafka, topics []string, n int, fn func(*kgo.Record)) error {
	base, err := consumer.ClientOptions(k)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := listOffsets(ctx, adm, topics, false)
	if err != nil {
		return err
	}
	starts, err := listOffsets(ctx, adm, topics, true)
	if err != nil {
		return err
	}
	return sampleNewest(ctx, base, ends, starts, n, fn)
}

// sampleSizes reads up to sample records per topic, ending at the end
// offsets in ends and spread over the partitions, and sums key+value bytes
// (what the sink counts as bytes consumed). base are the client options of
// the brokers (seeds, TLS, SASL).
func sampleSizes(ctx context.Context, base []kgo.Opt, ends, starts kadm.ListedOffsets, sample int) (map[string]int, map[string]int64, error) {
	n, b := map[string]int{}, map[string]int64{}
	err := sampleNewest(ctx, base, ends, starts, sample, func(r *kgo.Record) {
		n[r.Topic]++
		b[r.Topic] += int64(len(r.Key) + len(r.Value))
	})
	if err != nil {
		return nil, nil, err
	}
	return n, b, nil
}

// sampleNewest calls fn with up to sample records per topic, ending at the
// end offsets in ends (not before starts) and spread over the partitions.
func sampleNewest(ctx context.Context, base []kgo.Opt, ends, starts kadm.ListedOffsets, sample int, fn func(*kgo.Record)) error {
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
	if total == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(base[:len(base):len(base)], kgo.ConsumePartitions(want))...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
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
			fn(r)
			got++
		})
	}
	return nil
}

// Sampler reads the newest records of a topic with SampleRecords, from
// Kafka's brokers: what run and check give the pipeline to type a missing
// table's columns by (pipeline.Sampler, schema.create: if_missing).
type Sampler struct{ Kafka config.Kafka }

// Sample returns up to n of the newest records of topic (SampleRecords).
func (s Sampler) Sample(ctx context.Context, topic string, n int) ([]*kgo.Record, error) {
	var recs []*kgo.Record
	err := SampleRecords(ctx, s.Kafka, []string{topic}, n, func(r *kgo.Record) { recs = append(recs, r) })
	return recs, err
}

package consumer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
)

// Sampler reads the newest records of topics with a client of its own: it
// joins no group, commits nothing, and uses the consumer's brokers with the
// same TLS and SASL settings. It is the pipeline's Sampler (schema.create:
// if_missing types a missing table's columns by the records it returns) and
// what `sink check` decodes to find the fields no column takes.
//
// A Sampler is a value holding only its config; each call makes and closes
// its own clients, so calls are safe from any goroutine.
type Sampler struct{ Kafka config.Kafka }

// Sample returns up to n of the newest records of topic (Records).
func (s Sampler) Sample(ctx context.Context, topic string, n int) ([]*kgo.Record, error) {
	var recs []*kgo.Record
	err := s.Records(ctx, []string{topic}, n, func(r *kgo.Record) { recs = append(recs, r) })
	return recs, err
}

// Records calls fn with up to n of the newest records of each topic,
// spread over its partitions (fewer when a topic holds fewer, or when the
// read takes longer than 15 s). fn runs on the calling goroutine.
func (s Sampler) Records(ctx context.Context, topics []string, n int, fn func(*kgo.Record)) error {
	base, err := ClientOptions(s.Kafka)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := ListOffsets(ctx, adm, topics, false)
	if err != nil {
		return err
	}
	starts, err := ListOffsets(ctx, adm, topics, true)
	if err != nil {
		return err
	}
	return SampleNewest(ctx, base, ends, starts, n, fn)
}

// ListOffsets lists the topics' start (or end) offsets; an error names the
// topics.
func ListOffsets(ctx context.Context, adm *kadm.Client, topics []string, start bool) (kadm.ListedOffsets, error) {
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

// sampleDeadline bounds one sample's read: transaction markers take
// offsets but are never returned, so the count may stay short of its goal.
const sampleDeadline = 15 * time.Second

// SampleNewest calls fn with up to sample records per topic, ending at the
// end offsets in ends (not before starts) and spread over the partitions.
// base are the client options of the brokers (ClientOptions); the client
// it makes assigns the partitions directly and joins no group. fn runs on
// the calling goroutine.
func SampleNewest(ctx context.Context, base []kgo.Opt, ends, starts kadm.ListedOffsets, sample int, fn func(*kgo.Record)) error {
	want, remaining, total := sampleRanges(ends, starts, sample)
	if total == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(base[:len(base):len(base)], kgo.ConsumePartitions(want))...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, sampleDeadline)
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

// sampleRanges decides where each partition's read starts (its share of
// sample back from its end, not before its start), how many records each
// partition gives, and their total.
func sampleRanges(ends, starts kadm.ListedOffsets, sample int) (map[string]map[int32]kgo.Offset, map[string]map[int32]int64, int) {
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
	return want, remaining, total
}

package eos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/offsets"
)

// FetchSnapshot reads every committed offset of group with its metadata.
func FetchSnapshot(ctx context.Context, adm *kadm.Client, group string) (Snapshot, error) {
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("kafka: fetching the committed offsets of group %q: %w", group, err)
	}
	snap := Snapshot{}
	var ferr error
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			if ferr == nil {
				ferr = fmt.Errorf("kafka: committed offset of %s[%d]: %w", o.Topic, o.Partition, o.Err)
			}
			return
		}
		snap[offsets.TP{Topic: o.Topic, Partition: o.Partition}] = Committed{Offset: o.At, Metadata: o.Metadata}
	})
	return snap, ferr
}

// ReadRanges reads exactly the records of ranges with a client of its own
// that joins no group (opts: brokers, security, isolation), and returns them
// per partition in offset order. Offsets missing inside a range (compaction,
// aborted transactions) are simply absent; it fails when a range's last
// offset cannot be reached within timeout (deleted by retention, or the
// brokers are down).
func ReadRanges(ctx context.Context, opts []kgo.Opt, ranges []Range, timeout time.Duration) (map[offsets.TP][]*kgo.Record, error) {
	want := map[string]map[int32]kgo.Offset{}
	last := map[offsets.TP]int64{}
	first := map[offsets.TP]int64{}
	for _, r := range ranges {
		if want[r.TP.Topic] == nil {
			want[r.TP.Topic] = map[int32]kgo.Offset{}
		}
		want[r.TP.Topic][r.TP.Partition] = kgo.NewOffset().At(r.First)
		last[r.TP], first[r.TP] = r.Last, r.First
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...), kgo.ConsumePartitions(want))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := map[offsets.TP][]*kgo.Record{}
	reached := map[offsets.TP]bool{}
	for len(reached) < len(last) {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var missing []string
			for tp, l := range last {
				if !reached[tp] {
					missing = append(missing, fmt.Sprintf("%s[%d] up to %d", tp.Topic, tp.Partition, l))
				}
			}
			return nil, fmt.Errorf("kafka: reading a pending batch back: %v not reached within %s", missing, timeout)
		}
		f.EachPartition(func(p kgo.FetchTopicPartition) {
			tp := offsets.TP{Topic: p.Topic, Partition: p.Partition}
			for _, r := range p.Records {
				if r.Offset >= first[tp] && r.Offset <= last[tp] && !reached[tp] {
					out[tp] = append(out[tp], r)
				}
				if r.Offset >= last[tp] {
					reached[tp] = true
				}
			}
			if reached[tp] {
				cl.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
			}
		})
	}
	return out, nil
}

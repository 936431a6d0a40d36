package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/eventfmt"
	"sink/internal/registry"
	"sink/tools/gen"
)

// produceFramed is gen.Produce.Run for the registry formats: the same events
// (same seed, same ids, same keys and partitioner), each re-encoded by
// eventfmt and framed with the schema id registered under subject.
func produceFramed(ctx context.Context, p gen.Produce, format, registryURL, subject string) (gen.Result, error) {
	enc, err := eventfmt.NewEncoder(format)
	if err != nil {
		return gen.Result{}, err
	}
	rc, err := registry.New(config.SchemaRegistry{URLs: []string{registryURL}}, registry.Options{})
	if err != nil {
		return gen.Result{}, err
	}
	id, err := enc.Register(ctx, rc, subject)
	if err != nil {
		return gen.Result{}, err
	}
	fmt.Fprintf(os.Stderr, "loadgen: %s schema registered under subject %s as id %d\n", format, subject, id)
	g, err := gen.New(p.Events)
	if err != nil {
		return gen.Result{}, err
	}
	part := kgo.RecordPartitioner(kgo.RoundRobinPartitioner())
	if g.Keyed() {
		part = kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Brokers...), kgo.DefaultProduceTopic(p.Topic), part,
		kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return gen.Result{}, err
	}
	defer cl.Close()
	if err := gen.EnsureTopic(ctx, kadm.NewClient(cl), p.Topic, p.Partitions, p.Recreate); err != nil {
		return gen.Result{}, err
	}

	var failed atomic.Pointer[error]
	var res gen.Result
	start := time.Now()
	var js []byte
	for i := range p.Count {
		if err := pace(ctx, start, i, p.Rate); err != nil {
			return res, err
		}
		var user uint64
		js, user = g.Append(js[:0])
		r := &kgo.Record{}
		if r.Value, err = enc.Append(nil, js); err != nil {
			return res, err
		}
		if g.Keyed() {
			r.Key = strconv.AppendUint(nil, user, 10)
		}
		res.Bytes += int64(len(r.Key) + len(r.Value))
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		if e := failed.Load(); e != nil {
			return res, fmt.Errorf("produce to %s: %w", p.Topic, *e)
		}
		res.Events = i + 1
		if p.Progress != nil && (i+1)%100_000 == 0 {
			p.Progress(i + 1)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return res, fmt.Errorf("produce to %s: %w", p.Topic, err)
	}
	if e := failed.Load(); e != nil {
		return res, fmt.Errorf("produce to %s: %w", p.Topic, *e)
	}
	res.Took = time.Since(start)
	return res, nil
}

// pace waits until event i is due at rate events per second (0: no wait).
func pace(ctx context.Context, start time.Time, i int, rate float64) error {
	if rate <= 0 {
		return nil
	}
	d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second))))
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

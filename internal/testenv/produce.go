package testenv

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceAt feeds topic rate records/s of size bytes each, round-robin over
// its partitions, until the test ends, paced by the clock (not by
// acknowledgements), so the topic's end offsets grow at rate on average. A
// failed produce fails the test at its end.
func ProduceAt(t testing.TB, topic string, rate float64, size int) {
	t.Helper()
	cl := KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	var failed atomic.Pointer[error]
	done := make(chan struct{})
	go func() {
		defer close(done)
		val := bytes.Repeat([]byte("x"), size)
		start := time.Now()
		for n := int64(0); ctx.Err() == nil; time.Sleep(2 * time.Millisecond) {
			for due := int64(time.Since(start).Seconds() * rate); n < due; n++ {
				cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
					if err != nil && ctx.Err() == nil {
						failed.CompareAndSwap(nil, &err)
					}
				})
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if p := failed.Load(); p != nil {
			t.Errorf("producing to %s: %v", topic, *p)
		}
	})
}

// Produce writes values to topic, one record each, and returns when the
// broker has acknowledged all of them; an error fails the test.
func Produce(t testing.TB, topic string, values ...string) {
	t.Helper()
	cl := KafkaClient(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = kgo.StringRecord(v)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("testenv: producing to %s: %v", topic, err)
	}
}

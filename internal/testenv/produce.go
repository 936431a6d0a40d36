package testenv

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// WaitRecords waits until every partition of topic holds at least n
// records (its end offset), for 30 s at most, then fails the test: a
// fresh topic's partitions may each take a moment to accept writes, so a
// fixed sleep after ProduceAt can leave one of them empty.
func WaitRecords(t testing.TB, topic string, n int64) {
	t.Helper()
	adm := kadm.NewClient(KafkaClient(t))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		offs, err := adm.ListEndOffsets(context.Background(), topic)
		if err == nil {
			err = offs.Error()
		}
		ready := err == nil && len(offs[topic]) > 0
		if ready {
			offs.Each(func(o kadm.ListedOffset) { ready = ready && o.Offset >= n })
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: not %d records in every partition after 30 s (end offsets %v, error %v)", topic, n, offs, err)
		}
	}
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

// Command loadgen produces a reproducible stream of JSON events into a Kafka
// topic: for the demo, tests and benchmarks. Events look like a product's
// click stream (user_id, ts, event_type, channel, cost, payload) and are about
// --size bytes each.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated Kafka brokers")
	topic := flag.String("topic", "", "topic to produce to (required)")
	count := flag.Int("count", 100_000, "number of events")
	partitions := flag.Int("partitions", 8, "partitions when the topic is created")
	recreate := flag.Bool("recreate", false, "delete and create the topic first (fresh offsets)")
	size := flag.Int("size", 180, "approximate event size in bytes (payload is padded to reach it)")
	rate := flag.Float64("rate", 0, "events per second, 0 = as fast as possible")
	seed := flag.Uint64("seed", 1, "random seed: the same seed gives the same events")
	startID := flag.Int("start-id", 0, "id of the first event (ids are consecutive)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: loadgen --topic T [flags]\n\nProduces JSON events to Kafka.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *topic == "" || *count < 0 || *partitions < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*brokers, *topic, *count, *partitions, *recreate, *size, *rate, *seed, *startID); err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
}

func run(brokers, topic string, count, partitions int, recreate bool, size int, rate float64, seed uint64, startID int) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(10*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	if err := ensureTopic(ctx, kadm.NewClient(cl), topic, partitions, recreate); err != nil {
		return err
	}
	var failed atomic.Pointer[error]
	rng := rand.New(rand.NewPCG(seed, 7))
	start := time.Now()
	buf := make([]byte, 0, 512)
	for i := 0; i < count; i++ {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		buf = Event(buf[:0], rng, startID+i, size)
		v := append([]byte(nil), buf...)
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		if p := failed.Load(); p != nil {
			return *p
		}
		if (i+1)%100_000 == 0 {
			fmt.Fprintf(os.Stderr, "loadgen: %d/%d events\n", i+1, count)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if p := failed.Load(); p != nil {
		return *p
	}
	took := time.Since(start)
	fmt.Fprintf(os.Stderr, "loadgen: produced %d events to %s in %s (%.0f/s)\n", count, topic, took.Round(time.Millisecond), float64(count)/took.Seconds())
	return nil
}

func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int, recreate bool) error {
	if recreate {
		if _, err := adm.DeleteTopic(ctx, topic); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("delete topic %s: %w", topic, err)
		}
		// deletion is asynchronous on the broker; creating too early fails
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
			if err == nil {
				return nil
			}
			if !errors.Is(err, kerr.TopicAlreadyExists) || time.Now().After(deadline) {
				return fmt.Errorf("create topic %s: %w", topic, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	_, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

var (
	eventTypes = []string{"view", "click", "add_to_cart", "purchase", "search", "login", "logout"}
	channels   = []string{"web", "ios", "android", "email", "partner"}
)

// Event appends one JSON event with the given id to buf, padded to about size bytes.
func Event(buf []byte, rng *rand.Rand, id, size int) []byte {
	start := len(buf)
	buf = append(buf, `{"id":`...)
	buf = strconv.AppendInt(buf, int64(id), 10)
	buf = append(buf, `,"user_id":`...)
	buf = strconv.AppendUint(buf, uint64(rng.IntN(1_000_000)), 10)
	buf = append(buf, `,"ts":"`...)
	buf = time.Unix(1_714_557_600+int64(id/100), 0).UTC().AppendFormat(buf, "2006-01-02 15:04:05")
	buf = append(buf, `","event_type":"`...)
	buf = append(buf, eventTypes[rng.IntN(len(eventTypes))]...)
	buf = append(buf, `","channel":"`...)
	buf = append(buf, channels[rng.IntN(len(channels))]...)
	buf = append(buf, `","cost":`...)
	buf = strconv.AppendFloat(buf, float64(rng.IntN(100_000))/100, 'f', 2, 64)
	buf = append(buf, `,"payload":"`...)
	for pad := size - (len(buf) - start) - 2; pad > 0; pad-- {
		buf = append(buf, byte('a'+rng.IntN(26)))
	}
	return append(buf, `"}`...)
}

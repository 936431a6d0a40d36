//go:build integration

package consumer_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/consumer"
	"sink/internal/testenv"
)

// TestSamplerReadsTheNewestRecords: the Sampler returns a partition's
// share of n from its end (the newest records, spread evenly over the
// partitions), everything when a topic holds fewer, and nothing from an
// empty topic; Records covers several topics in one call.
func TestSamplerReadsTheNewestRecords(t *testing.T) {
	topic, empty := testenv.NewTopic(t, 3), testenv.NewTopic(t, 2)
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "p%d-%02d", i%3, i/3)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, "name: sampler\nkafka: {brokers: [%q], topics: [%q]}\nroutes: [{topic: %q, table: t}]\n",
		testenv.Kafka(t)[0], topic, topic), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := consumer.Sampler{Kafka: cfg.Kafka}
	values := func(recs []*kgo.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
		sort.Strings(out)
		return out
	}

	got, err := s.Sample(context.Background(), topic, 6)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"p0-08", "p0-09", "p1-08", "p1-09", "p2-08", "p2-09"}
	if fmt.Sprint(values(got)) != fmt.Sprint(want) {
		t.Fatalf("6 of the newest records of 3 partitions: got %v, want %v", values(got), want)
	}

	if got, err = s.Sample(context.Background(), topic, 100); err != nil || len(got) != 30 {
		t.Fatalf("100 of a topic holding 30: got %d records, %v; want all 30", len(got), err)
	}
	if got, err = s.Sample(context.Background(), empty, 10); err != nil || len(got) != 0 {
		t.Fatalf("an empty topic: got %d records, %v; want none and no error", len(got), err)
	}

	perTopic := map[string]int{}
	if err := s.Records(context.Background(), []string{topic, empty}, 3, func(r *kgo.Record) { perTopic[r.Topic]++ }); err != nil {
		t.Fatal(err)
	}
	if perTopic[topic] != 3 || perTopic[empty] != 0 || len(perTopic) != 1 {
		t.Fatalf("Records of two topics, 3 each: got %v; want 3 of %s and none of the empty one", perTopic, topic)
	}
}

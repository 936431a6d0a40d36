package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaClient returns a franz-go client seeded with the test brokers (plus opts),
// closed when the test ends. It skips the test when Kafka is not up.
func KafkaClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	brokers := Kafka(t)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("testenv: kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// NewTopic creates a topic with a unique name, the given number of partitions and
// replication factor 1, waits until every partition has a leader (so the first
// produce does not race the metadata), and deletes the topic when the test ends.
func NewTopic(t testing.TB, partitions int) string {
	t.Helper()
	adm := kadm.NewClient(KafkaClient(t))
	topic := UniqueName(t, "test")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		t.Fatalf("testenv: create topic %s: %v", topic, err)
	}
	// Registered after the client's Close, so it runs before it (cleanups are LIFO).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if _, err := adm.DeleteTopic(ctx, topic); err != nil {
			t.Logf("testenv: delete topic %s: %v", topic, err)
		}
	})

	for {
		if topicReady(ctx, adm, topic, partitions) {
			return topic
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: topic %s: partitions have no leader after 30s", topic)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func topicReady(ctx context.Context, adm *kadm.Client, topic string, partitions int) bool {
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return false
	}
	d, ok := td[topic]
	if !ok || d.Err != nil || len(d.Partitions) != partitions {
		return false
	}
	for _, p := range d.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

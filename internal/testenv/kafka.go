package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaClient returns a franz-go client seeded with the test brokers (plus opts),
// closed when the test ends. It skips the test when Kafka is not up.
func KafkaClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kafkaClient(t, Kafka(t), opts)
}

// kafkaClient returns a franz-go client seeded with brokers (plus opts), closed
// when the test ends.
func kafkaClient(t testing.TB, brokers []string, opts []kgo.Opt) *kgo.Client {
	t.Helper()
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
	return newTopic(t, KafkaClient(t), partitions, 1)
}

// newTopic creates a uniquely named topic through cl as NewTopic describes, with
// the given replication factor.
func newTopic(t testing.TB, cl *kgo.Client, partitions int, replicas int16) string {
	t.Helper()
	adm := kadm.NewClient(cl)
	topic := UniqueName(t, "test")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, int32(partitions), replicas, nil, topic); err != nil {
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

// WaitTopic waits until topic, created by the test itself, has its
// partitions with leaders in the broker's metadata: a sink started at once
// after CreateTopic may otherwise be told the topic does not exist yet.
func WaitTopic(t testing.TB, topic string, partitions int) {
	t.Helper()
	adm := kadm.NewClient(KafkaClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !topicReady(ctx, adm, topic, partitions) {
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

// The local 3-broker Kafka (`make kafka-cluster-up`, scripts/stack.sh
// kafka-cluster up): three KRaft nodes, each broker and controller, topics with
// replication factor 3 and min.insync.replicas=2 by default.
const (
	DefaultKafkaCluster = "127.0.0.1:9192,127.0.0.1:9193,127.0.0.1:9194"
	// EnvKafkaCluster overrides DefaultKafkaCluster (comma-separated brokers).
	EnvKafkaCluster = "SINK_TEST_KAFKA_CLUSTER"
)

// KafkaCluster returns the brokers of the local 3-broker Kafka, or skips the test
// (fails it under SINK_REQUIRE_STACK=1) unless they answer a metadata request
// that lists at least three brokers.
func KafkaCluster(t testing.TB) []string {
	t.Helper()
	var brokers []string
	for _, b := range strings.Split(envOr(EnvKafkaCluster, DefaultKafkaCluster), ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	addr := strings.Join(brokers, ",")
	err := probe("kafka-cluster "+addr, func() error { return probeKafkaBrokers(brokers, 3) })
	if err != nil {
		unavailableMsg(t, fmt.Sprintf("integration: the 3-broker Kafka is not reachable at %s; run `make kafka-cluster-up` (%v)", addr, err))
	}
	return brokers
}

// KafkaClusterClient returns a franz-go client seeded with the 3-broker Kafka's
// brokers (plus opts), closed when the test ends.
func KafkaClusterClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kafkaClient(t, KafkaCluster(t), opts)
}

// NewClusterTopic creates a topic on the 3-broker Kafka as NewTopic does, with
// replication factor 3 (min.insync.replicas=2 is the brokers' default).
func NewClusterTopic(t testing.TB, partitions int) string {
	t.Helper()
	return newTopic(t, KafkaClusterClient(t), partitions, 3)
}

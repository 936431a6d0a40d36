//go:build integration

package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/consumer"
	"sink/internal/testenv"
)

// TestStartRightAfterTheTopicsWereCreated starts the consumer on the
// 3-broker Kafka with a consumed topic and a dead-letter topic created a
// moment before (their partitions led and in sync, as NewClusterTopic
// waits for), several times: a broker that has not heard of a topic yet
// (its metadata or its configs answered UNKNOWN_TOPIC_OR_PARTITION) is
// asked again, so every start succeeds and reads the dead-letter topic's
// max.message.bytes. A dead-letter topic that does not exist still stops
// the start at once.
func TestStartRightAfterTheTopicsWereCreated(t *testing.T) {
	brokers := testenv.KafkaCluster(t)
	cfgFor := func(t *testing.T, src, dlq string) *config.Config {
		cfg, err := config.Parse([]byte(fmt.Sprintf(`
name: %s
kafka: {brokers: [%s], topics: [%q]}
routes: [{topic: %q, table: t}]
errors: {tolerance: all, dlq_topic: %q}
http: {listen: ""}
`, testenv.UniqueName(t, "fresh"), strings.Join(brokers, ", "), src, src, dlq)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for i := range 6 {
		src, dlq := testenv.NewClusterTopic(t, 3), testenv.NewClusterTopic(t, 3)
		start := time.Now()
		c, err := consumer.New(context.Background(), cfgFor(t, src, dlq), zerolog.Nop(), consumer.Hooks{})
		if err != nil {
			t.Fatalf("start %d, topics created a moment before: %v", i, err)
		}
		c.Close()
		t.Logf("start %d: %s", i, time.Since(start).Round(time.Millisecond))
	}

	src := testenv.NewClusterTopic(t, 3)
	start := time.Now()
	_, err := consumer.New(context.Background(), cfgFor(t, src, testenv.UniqueName(t, "nodlq")), zerolog.Nop(), consumer.Hooks{})
	if err == nil || !strings.Contains(err.Error(), "(errors.dlq_topic) does not exist") || time.Since(start) > 3*time.Second {
		t.Fatalf("missing dead-letter topic: %v after %s; want it reported at once", err, time.Since(start))
	}
}

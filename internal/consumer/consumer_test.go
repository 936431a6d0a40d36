package consumer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/config"
	"sink/internal/offsets"
)

// fake starts an in-memory Kafka with the given topics and returns a config
// consuming "src" from it.
func fake(t *testing.T, topics ...string) (*kfake.Cluster, *config.Config) {
	t.Helper()
	return fakeWith(t, nil, topics...)
}

// fakeWith is fake with more options for the cluster. Its KIP-848 groups
// heartbeat every 100ms, as the classic ones of this package's tests do
// (TestMain).
func fakeWith(t *testing.T, opts []kfake.Opt, topics ...string) (*kfake.Cluster, *config.Config) {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, topics...),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"})}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
name: unit
kafka: {brokers: [%q], topics: [src], request_timeout: 5s}
routes: [{topic: src, table: t}]
errors: {tolerance: all, dlq_topic: dlq}
http: {listen: ""}
`, c.ListenAddrs()[0])), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

func TestProbe(t *testing.T) {
	_, cfg := fake(t, "src", "dlq")
	got, err := Probe(context.Background(), cfg)
	if err != nil || got["src"] != 2 {
		t.Fatalf("Probe = %v, %v; want src with 2 partitions", got, err)
	}
	_, cfg = fake(t, "other")
	if _, err := Probe(context.Background(), cfg); err == nil || err.Error() != `kafka: topic "src" does not exist` {
		t.Fatalf("missing topic: got %v", err)
	}
}

// A bad record goes to the DLQ unchanged (key, value, headers) with headers
// saying why and where it came from; done is called once Kafka has it.
func TestProduceDLQ(t *testing.T) {
	_, cfg := fake(t, "src", "dlq")
	c, err := New(context.Background(), cfg, zerolog.Nop(), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := &kgo.Record{
		Topic: "src", Partition: 1, Offset: 42, Key: []byte("k1"), Value: []byte(`{"id": oops}`),
		Headers:   []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}},
		Timestamp: time.UnixMilli(1_700_000_000_123),
	}
	done := make(chan error, 1)
	c.ProduceDLQ(context.Background(), "dlq", src, fmt.Errorf("decode: invalid JSON"), false, func(err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("DLQ produce: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("DLQ produce never acknowledged")
	}

	rd, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.ConsumeTopics("dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got *kgo.Record
	for got == nil {
		f := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("DLQ record not readable")
		}
		f.EachRecord(func(r *kgo.Record) { got = r })
	}
	if string(got.Key) != "k1" || string(got.Value) != `{"id": oops}` || !got.Timestamp.Equal(src.Timestamp) {
		t.Fatalf("DLQ record changed: key %q value %q ts %v", got.Key, got.Value, got.Timestamp)
	}
	want := map[string]string{
		"trace":                 "abc",
		"sink.error":            "decode: invalid JSON",
		"sink.source.topic":     "src",
		"sink.source.partition": "1",
		"sink.source.offset":    "42",
		"sink.source.timestamp": "1700000000123",
	}
	have := map[string]string{}
	for _, h := range got.Headers {
		have[h.Key] = string(h.Value)
	}
	for k, v := range want {
		if have[k] != v {
			t.Errorf("header %s = %q, want %q", k, have[k], v)
		}
	}
}

// A commit the coordinator refuses is an error naming the partition, so the
// pipeline keeps the positions and retries them.
func TestCommitErrorIsReported(t *testing.T) {
	cluster, cfg := fake(t, "src", "dlq")
	assigned := make(chan struct{}, 1)
	c, err := New(context.Background(), cfg, zerolog.Nop(), Hooks{
		Assigned: func(context.Context, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Polling drives the group join; commits need a member of a joined group.
	go func() {
		for {
			f := c.Poll(context.Background())
			c.AllowRebalance()
			if f.IsClientClosed() {
				return
			}
		}
	}()
	select {
	case <-assigned:
	case <-time.After(15 * time.Second):
		t.Fatal("group never assigned partitions")
	}
	pos := map[offsets.TP]offsets.Commit{{Topic: "src", Partition: 0}: {Offset: 5, Epoch: -1}}
	if err := c.Commit(context.Background(), pos, nil); err != nil {
		t.Fatalf("commit on a healthy cluster: %v", err)
	}
	cluster.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	err = c.Commit(context.Background(), pos, nil)
	if err == nil || !strings.Contains(err.Error(), "src[0]") || !strings.Contains(err.Error(), "OFFSET_METADATA_TOO_LARGE") {
		t.Fatalf("refused commit: got %v", err)
	}
}

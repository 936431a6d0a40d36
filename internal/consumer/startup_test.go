package consumer

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/internal/backoff"
)

// unknownConfigs makes the first n DescribeConfigs requests (all of them
// for n < 0) answer UNKNOWN_TOPIC_OR_PARTITION for every resource, as a
// broker answers that has not heard of a topic yet, and counts the
// requests.
func unknownConfigs(c *kfake.Cluster, n int64) *atomic.Int64 {
	var seen atomic.Int64
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if i := seen.Add(1); n >= 0 && i > n {
			return nil, nil, false
		}
		r := req.(*kmsg.DescribeConfigsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, res := range r.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
			rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	return &seen
}

// A dead-letter topic that the metadata lists but the broker answering for
// its configs does not know yet: the read is retried until it works.
func TestCheckDLQRetriesConfigsOfATopicNotKnownYet(t *testing.T) {
	c, cfg := fake(t, "src", "dlq")
	seen := unknownConfigs(c, 3)
	_, info, err := ProbeDLQ(context.Background(), cfg)
	if err != nil || info.MaxMessageBytes <= 0 {
		t.Fatalf("ProbeDLQ = %+v, %v; want the topic's max.message.bytes after the broker learned of it", info, err)
	}
	if n := seen.Load(); n != 4 {
		t.Fatalf("%d DescribeConfigs requests, want 3 refused and 1 answered", n)
	}
}

// When the broker never learns of the topic, the retries end within
// kafka.request_timeout with an error naming the topic and the attempts.
func TestCheckDLQRetriesWithinTheRequestTimeout(t *testing.T) {
	c, cfg := fake(t, "src", "dlq")
	cfg.Kafka.RequestTimeout = 1500 * time.Millisecond
	seen := unknownConfigs(c, -1)
	start := time.Now()
	_, _, err := ProbeDLQ(context.Background(), cfg)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), `kafka: dead-letter topic "dlq": reading max.message.bytes: UNKNOWN_TOPIC_OR_PARTITION`) ||
		!strings.Contains(err.Error(), "still failing after") {
		t.Fatalf("ProbeDLQ: %v; want the topic, the read and the attempts named", err)
	}
	// 100, 200, 400 ms (half of each drawn at random) fit in 1.5 s with the
	// requests; the 800-ms wait may, so 3 to 5 attempts.
	if n := seen.Load(); n < 3 || n > 5 || took > cfg.Kafka.RequestTimeout+500*time.Millisecond {
		t.Fatalf("%d attempts in %s; want 3 to 5 within the 1.5-s request timeout", n, took)
	}
}

// A dead-letter topic or a consumed topic that does not exist is reported
// at once, not retried.
func TestMissingTopicReportedAtOnce(t *testing.T) {
	_, cfg := fake(t, "src")
	cfg.Kafka.RequestTimeout = 20 * time.Second
	start := time.Now()
	if _, _, err := ProbeDLQ(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `dead-letter topic "dlq" (errors.dlq_topic) does not exist`) {
		t.Fatalf("missing DLQ: %v", err)
	}
	_, cfg2 := fake(t, "other")
	cfg2.Kafka.RequestTimeout = 20 * time.Second
	if _, err := Probe(context.Background(), cfg2); err == nil || err.Error() != `kafka: topic "src" does not exist` {
		t.Fatalf("missing topic: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the missing topics were reported after %s; want at once", took)
	}
}

// A consumed topic whose metadata carries a passing error (a leader being
// elected) is asked for again; an error that does not pass is returned
// after one attempt.
func TestDescribeRetriesAPassingTopicError(t *testing.T) {
	c, cfg := fake(t, "src")
	var seen atomic.Int64
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.MetadataRequest)
		if len(r.Topics) != 1 || r.Topics[0].Topic == nil || *r.Topics[0].Topic != "src" || seen.Add(1) > 2 {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.ErrorCode = r.Topics[0].Topic, kerr.LeaderNotAvailable.Code
		resp.Topics = append(resp.Topics, mt)
		return resp, nil, true
	})
	got, err := Probe(context.Background(), cfg)
	if err != nil || got["src"] != 2 || seen.Load() != 3 {
		t.Fatalf("Probe = %v, %v after %d requests for src; want 2 partitions after 2 LEADER_NOT_AVAILABLE", got, err, seen.Load())
	}
}

// retryStartBy's bound is the context's deadline, and an unknown topic
// passes only when the caller says the topic was seen.
func TestRetryStartBound(t *testing.T) {
	pol := backoff.Policy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	for _, tc := range []struct {
		name          string
		err           error
		unknownPasses bool
		min, max      int
	}{
		{"passing until the deadline", kerr.CoordinatorNotAvailable, false, 5, 12},
		{"unknown topic seen before", kerr.UnknownTopicOrPartition, true, 5, 12},
		{"unknown topic not seen", kerr.UnknownTopicOrPartition, false, 1, 1},
		{"permanent", kerr.TopicAuthorizationFailed, true, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			calls := 0
			start := time.Now()
			n, err := retryStartBy(ctx, pol, tc.unknownPasses, func() error { calls++; return tc.err })
			if !errors.Is(err, tc.err) || n != calls || n < tc.min || n > tc.max || time.Since(start) > 350*time.Millisecond {
				t.Fatalf("%d attempts (%d calls) in %s, %v; want %d to %d within 300 ms", n, calls, time.Since(start), err, tc.min, tc.max)
			}
			if (n > 1) != strings.Contains(err.Error(), "still failing after") {
				t.Fatalf("error %q: the attempts are named only after a retry", err)
			}
		})
	}
}

// On three brokers of which two have not heard of the new topics yet (they
// answer metadata with UNKNOWN_TOPIC_OR_PARTITION until the third one was
// asked about the topic), the start asks every broker, finds the topics on
// the third and retries until the seed broker knows them.
func TestNewTopicsUnknownToSomeBrokers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(2, "src", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	_, cfg := fake(t, "src", "dlq")
	cfg.Kafka.Brokers = c.ListenAddrs()[:1] // the seed is a lagging broker
	var learned atomic.Bool
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.MetadataRequest)
		if len(r.Topics) == 0 || learned.Load() {
			return nil, nil, false
		}
		if c.CurrentNode() == 2 {
			learned.Store(true)
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		for i := range 3 {
			mb := kmsg.NewMetadataResponseBroker()
			mb.NodeID = int32(i)
			host, port := splitAddr(t, c.ListenAddrs()[i])
			mb.Host, mb.Port = host, port
			resp.Brokers = append(resp.Brokers, mb)
		}
		for _, rt := range r.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = rt.Topic, kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, mt)
		}
		return resp, nil, true
	})
	got, info, err := ProbeDLQ(context.Background(), cfg)
	if err != nil || got["src"] != 2 || info.Partitions != 2 || !learned.Load() {
		t.Fatalf("ProbeDLQ = %v, %+v, %v (the third broker asked: %v); want both topics found", got, info, err, learned.Load())
	}
}

func splitAddr(t *testing.T, addr string) (string, int32) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return host, int32(n)
}

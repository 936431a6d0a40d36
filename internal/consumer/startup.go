package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/internal/backoff"
	"sink/internal/kafkaerr"
)

// startRetry is the schedule of the requests made at start (the consumed
// topics' and the dead-letter topic's metadata and configs) while they
// fail with a passing condition: 100 ms doubling to 2 s, half of each wait
// drawn at random, within the caller's context (kafka.request_timeout).
var startRetry = backoff.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.EqualJitter}

// retryStart runs f by startRetry until ctx's deadline while it fails with
// a passing condition (kafkaerr.Classify); with unknownPasses, an unknown
// topic or partition passes too: the caller has seen the topic listed, so
// the broker that answered has not heard of it yet. The error after the
// last attempt says how many were made and for how long, when more than
// one.
func retryStart(ctx context.Context, unknownPasses bool, f func() error) (int, error) {
	return retryStartBy(ctx, startRetry, unknownPasses, f)
}

func retryStartBy(ctx context.Context, pol backoff.Policy, unknownPasses bool, f func() error) (int, error) {
	passes := func(err error) bool {
		v := kafkaerr.Classify(err)
		return v.Retriable() || (unknownPasses && v.Class == kafkaerr.UnknownTopic)
	}
	start := time.Now()
	n, err := kafkaerr.Retry(ctx, pol, time.Time{}, passes, nil, f)
	if err != nil && n > 1 {
		err = fmt.Errorf("%w (still failing after %d attempts in %s)", err, n, time.Since(start).Round(10*time.Millisecond))
	}
	return n, err
}

// knownElsewhere asks every broker cl has discovered for topic's metadata
// and reports whether one of them knows it: a topic one broker answers
// unknown for while another lists it was just created, and the first has
// not heard of it yet. A topic that no broker knows does not exist. Brokers
// that cannot be asked are passed over.
func knownElsewhere(ctx context.Context, cl *kgo.Client, topic string) bool {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	for _, b := range cl.DiscoveredBrokers() {
		resp, err := b.Request(ctx, req)
		if err != nil {
			continue
		}
		for _, t := range resp.(*kmsg.MetadataResponse).Topics {
			if t.Topic != nil && *t.Topic == topic && !errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.UnknownTopicOrPartition) {
				return true
			}
		}
	}
	return false
}

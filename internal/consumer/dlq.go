package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/config"
	"sink/internal/errtext"
)

// defaultMaxMessageBytes is Kafka's default for max.message.bytes (and
// message.max.bytes), used when a broker does not report the topic's value.
const defaultMaxMessageBytes = 1048588

// DLQInfo is what the start-up check learned about the dead-letter topic.
type DLQInfo struct {
	Topic      string
	Partitions int
	// MaxMessageBytes is the topic's max.message.bytes: the largest record
	// batch the broker accepts. Dead-letter copies are cut to fit it.
	MaxMessageBytes int
	// Created is true when the check created the topic (errors.dlq_create).
	Created bool
	// Writable says what the broker reported about the right to write:
	// "yes", or why it could not tell.
	Writable string
}

// CheckDLQ verifies the dead-letter topic before anything is consumed, so
// that a missing or unwritable topic stops `sink check` and `sink run` at
// start with one line, not at the first bad record: it must exist (or is
// created with the largest partition count of the consumed topics when
// errors.dlq_create is true), the broker must not deny this client WRITE on
// it, and its max.message.bytes is read. sources is Describe's result.
func CheckDLQ(ctx context.Context, cl *kgo.Client, cfg *config.Config, sources map[string]int) (*DLQInfo, error) {
	topic := cfg.Errors.DLQTopic
	ctx, cancel := context.WithTimeout(ctx, cfg.Kafka.RequestTimeout)
	defer cancel()
	adm := kadm.NewClient(cl) // not closed: that would close cl
	info := &DLQInfo{Topic: topic}
	// A topic that no broker knows is reported at once (or created); one
	// that the broker answering does not know yet while another does, and
	// the passing conditions of the brokers, are retried (startRetry).
	var td kadm.TopicDetail
	describe := func() (err error) {
		td, err = describeTopic(ctx, adm, topic)
		return err
	}
	_, err := retryStart(ctx, false, describe)
	if errors.Is(err, kerr.UnknownTopicOrPartition) && knownElsewhere(ctx, cl, topic) {
		_, err = retryStart(ctx, true, describe)
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) && cfg.Errors.DLQCreate {
		parts := 1
		for _, n := range sources {
			parts = max(parts, n)
		}
		// Replication factor -1: the broker's default.replication.factor.
		if _, cerr := adm.CreateTopic(ctx, int32(parts), -1, nil, topic); cerr != nil && !errors.Is(cerr, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("kafka: creating dead-letter topic %q (errors.dlq_create): %w", topic, cerr)
		}
		info.Created = true
		// A broker answers metadata for a topic it has just created only
		// once the controller's record reached it, which on a busy broker
		// takes a moment: ask again until then.
		_, err = retryStart(ctx, true, describe)
	}
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return nil, fmt.Errorf("kafka: dead-letter topic %q (errors.dlq_topic) does not exist; create it, or set errors.dlq_create: true", topic)
	case err != nil:
		return nil, fmt.Errorf("kafka: dead-letter topic %q: %w", topic, err)
	}
	info.Partitions = len(td.Partitions)
	info.Writable = "not reported by the broker"
	if len(td.AuthorizedOperations) > 0 {
		if !slices.Contains(td.AuthorizedOperations, kmsg.ACLOperationWrite) && !slices.Contains(td.AuthorizedOperations, kmsg.ACLOperationAll) {
			return nil, fmt.Errorf("kafka: dead-letter topic %q: this client is not authorized to write to it (grant WRITE on the topic)", topic)
		}
		info.Writable = "yes"
	}
	// The metadata listed the topic: a broker that answers for its configs
	// that it does not know it has not heard of it yet (on a cluster, right
	// after the topic was created), which passes.
	_, err = retryStart(ctx, true, func() (err error) {
		info.MaxMessageBytes, err = maxMessageBytes(ctx, adm, topic)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: dead-letter topic %q: reading max.message.bytes: %w", topic, err)
	}
	return info, nil
}

// describeTopic returns the metadata of one topic, with the operations the
// client may perform on it when the broker reports them.
func describeTopic(ctx context.Context, adm *kadm.Client, topic string) (kadm.TopicDetail, error) {
	tds, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), topic)
	if err != nil {
		return kadm.TopicDetail{}, err
	}
	td, ok := tds[topic]
	if !ok {
		return td, kerr.UnknownTopicOrPartition
	}
	return td, td.Err
}

// maxMessageBytes reads the topic's max.message.bytes; a broker that does
// not let us describe configs leaves Kafka's default.
func maxMessageBytes(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return defaultMaxMessageBytes, nil
		}
		return 0, err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return 0, err
	}
	if rc.Err != nil {
		if errors.Is(rc.Err, kerr.TopicAuthorizationFailed) {
			return defaultMaxMessageBytes, nil
		}
		return 0, rc.Err
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			n, err := strconv.Atoi(*c.Value)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("unexpected value %q", *c.Value)
			}
			return n, nil
		}
	}
	return defaultMaxMessageBytes, nil
}

// Dead-letter copy headers besides the source ones: set when the copy does
// not carry the whole original.
const (
	HeaderValueTruncated = "sink.value.truncated" // original value length in bytes; the copy holds its first bytes
	HeaderKeyDropped     = "sink.key.dropped"     // original key length in bytes; the copy has no key
	HeaderValueDropped   = "sink.value.dropped"   // original value length; the copy holds no value (a reference only)
)

// maxErrorHeader bounds the sink.error header: a decode error may quote
// part of the record, which is in the value anyway.
const maxErrorHeader = errtext.Max

// recordOverhead is a generous bound on what a one-record batch adds to
// its key, value and headers on the wire (batch header 61 bytes, record
// varints, header varints).
const recordOverhead = 256

// DLQRecord builds the dead-letter copy of rec: its key, value and headers
// plus headers saying why and where it came from (DeadLetterHeaders: the
// sink's, and Kafka Connect's for connector). limit is the topic's
// max.message.bytes (0: no limit known). A copy that would not fit keeps the
// source headers and as much of the value as fits, with a header giving the
// original length; if even the key does not fit, the key goes too. refOnly
// makes a copy with no value at all (the sink.source.* headers are the
// reference to the original), for a broker that refused a copy the estimate
// said would fit.
func DLQRecord(topic, connector string, rec *kgo.Record, cause error, limit int, refOnly bool) *kgo.Record {
	msg := errtext.Cap(cause.Error(), maxErrorHeader)
	hs := make([]kgo.RecordHeader, 0, len(rec.Headers)+len(DeadLetterHeaders)+1)
	hs = append(hs, rec.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderError, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
		kgo.RecordHeader{Key: HeaderSourceTimestamp, Value: []byte(strconv.FormatInt(rec.Timestamp.UnixMilli(), 10))},
	)
	hs = append(hs, connectHeaders(connector, rec, cause, msg)...)
	out := &kgo.Record{Topic: topic, Key: rec.Key, Value: rec.Value, Headers: hs, Timestamp: rec.Timestamp}
	if refOnly {
		out.Value = nil
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: HeaderValueDropped, Value: []byte(strconv.Itoa(len(rec.Value)))})
		return out
	}
	if limit <= 0 {
		return out
	}
	// Room for the value once everything else and one more header are in.
	room := limit - recordOverhead - len(out.Key) - 64
	for _, h := range out.Headers {
		room -= len(h.Key) + len(h.Value) + 10
	}
	if room < 0 && len(out.Key) > 0 {
		room += len(out.Key)
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: HeaderKeyDropped, Value: []byte(strconv.Itoa(len(out.Key)))})
		out.Key = nil
		room -= len(HeaderKeyDropped) + 20
	}
	if len(out.Value) > room {
		out.Value = out.Value[:max(room, 0)]
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: HeaderValueTruncated, Value: []byte(strconv.Itoa(len(rec.Value)))})
	}
	return out
}

// Package kafkaerr decides, in one tested function, what a failed Kafka
// request means for the sink: Classify sorts an error of franz-go (a kerr
// code, a client error, a network or context error, or several of them
// joined, as kadm's shard errors are) into a Class, with the reason. The
// dead-letter produce, the exactly-once intent commits and recovery's reads
// all ask it; each caller decides what a class means for its request (a
// dead-letter copy refused as too large is sent as a reference; an unknown
// topic is retried for the dead-letter topic, which was checked at start,
// and stops exactly-once recovery, where it means a deleted topic).
// Retry (retry.go) repeats a request by a backoff.Policy while Classify
// calls its error passing, within a deadline: the requests made at start
// and exactly-once recovery's reads use it. internal/writer's Classify is
// the ClickHouse counterpart.
//
// Concurrency: Classify is a pure function, safe for concurrent use.
package kafkaerr

import (
	"context"
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Class says what to do about a failed Kafka request.
type Class uint8

const (
	// Permanent: the same request cannot succeed (authorization, fencing of
	// this member, a record or metadata the broker refuses).
	Permanent Class = iota
	// Retriable: a passing condition (a broker down or restarting, a leader
	// or coordinator moving, a rebalance running, a stale generation, a
	// timeout, a network error); send the same request again after a
	// backoff.
	Retriable
	// TooLarge: the broker refused the size of a record or batch.
	TooLarge
	// UnknownTopic: the broker does not know the topic or partition: it
	// was deleted, or it is new and this broker has not heard of it yet.
	UnknownTopic
	// Canceled: the process is stopping (its context canceled, the client
	// closed).
	Canceled
)

func (c Class) String() string {
	switch c {
	case Permanent:
		return "permanent"
	case Retriable:
		return "retriable"
	case TooLarge:
		return "too-large"
	case UnknownTopic:
		return "unknown-topic"
	case Canceled:
		return "canceled"
	}
	return "unknown"
}

// Verdict is Classify's answer: the class and, in a few words, why.
type Verdict struct {
	Class  Class
	Reason string
}

// Retriable reports whether the request may be sent again as it is.
func (v Verdict) Retriable() bool { return v.Class == Retriable }

// permanent are the codes that do not pass by themselves, whatever kerr
// says of them and whatever else is joined with them: static-membership
// fencing, authorization, metadata the broker refuses.
var permanent = []struct {
	err    error
	reason string
}{
	{kerr.FencedInstanceID, "another member took this static group instance id"},
	{kerr.GroupAuthorizationFailed, "not authorized for the consumer group"},
	{kerr.TopicAuthorizationFailed, "not authorized for the topic"},
	{kerr.OffsetMetadataTooLarge, "the commit metadata is larger than the broker allows"},
}

// generation are the group codes that a later attempt under a new
// generation gets past (the caller makes sure it holds its partitions
// then; see internal/pipeline's retriableIntent). The member epochs of
// the consumer protocol (KIP-848) are its generations: STALE_MEMBER_EPOCH
// asks the member to retry with the epoch its next heartbeat brings, and
// FENCED_MEMBER_EPOCH to give its partitions up and rejoin, which franz-go
// does through the lost callback, as for UNKNOWN_MEMBER_ID.
var generation = []struct {
	err    error
	reason string
}{
	{kerr.RebalanceInProgress, "the group is rebalancing"},
	{kerr.IllegalGeneration, "the group moved on to another generation"},
	{kerr.UnknownMemberID, "the coordinator no longer knows this member (session expired)"},
	{kerr.StaleMemberEpoch, "this member's epoch is stale (the consumer protocol moved on)"},
	{kerr.FencedMemberEpoch, "the coordinator fenced this member's epoch (it rejoins)"},
}

// Classify sorts err. The checks run in this order, so that of several
// joined errors the most final one decides: stopping, a size refusal, a
// permanent code, an unknown topic, then the passing conditions (the group
// codes above, every code kerr marks retriable, franz-go's retriable broker
// errors, a produce that ran out of time or retries, a deadline, a network
// error). Anything else is Permanent.
func Classify(err error) Verdict {
	if err == nil {
		return Verdict{Retriable, "no error"} // not reached by the callers: they classify failures
	}
	if v, ok := finalVerdict(err); ok {
		return v
	}
	if v, ok := passingVerdict(err); ok {
		return v
	}
	return Verdict{Permanent, "not a passing condition"}
}

// finalVerdict is Classify's first half: stopping, a size refusal, a
// permanent code, an unknown topic (ok false for none of them).
func finalVerdict(err error) (Verdict, bool) {
	switch {
	case errors.Is(err, context.Canceled):
		return Verdict{Canceled, "the process is stopping"}, true
	case errors.Is(err, kgo.ErrClientClosed):
		return Verdict{Canceled, "the Kafka client is closed"}, true
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return Verdict{TooLarge, "the broker refused the record's size"}, true
	}
	for _, p := range permanent {
		if errors.Is(err, p.err) {
			return Verdict{Permanent, p.reason}, true
		}
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
		return Verdict{UnknownTopic, "the broker does not know the topic or partition"}, true
	}
	return Verdict{}, false
}

// passingVerdict is Classify's second half: the group codes, every code
// kerr marks retriable, franz-go's retriable broker errors, a produce that
// ran out of time or retries, a deadline, a network error (ok false for
// none of them).
func passingVerdict(err error) (Verdict, bool) {
	for _, g := range generation {
		if errors.Is(err, g.err) {
			return Verdict{Retriable, g.reason}, true
		}
	}
	var (
		ke *kerr.Error
		ne net.Error
	)
	switch {
	case errors.As(err, &ke) && ke.Retriable:
		return Verdict{Retriable, ke.Message + " is a passing condition of the broker"}, true
	case errors.Is(err, kgo.ErrRecordTimeout):
		return Verdict{Retriable, "the produce timed out (record_timeout)"}, true
	case errors.Is(err, kgo.ErrRecordRetries):
		return Verdict{Retriable, "the produce ran out of the client's retries"}, true
	case errors.Is(err, context.DeadlineExceeded):
		return Verdict{Retriable, "the request timed out"}, true
	case kgo.IsRetryableBrokerErr(err), errors.As(err, &ne):
		return Verdict{Retriable, "network error reaching the broker"}, true
	}
	return Verdict{}, false
}

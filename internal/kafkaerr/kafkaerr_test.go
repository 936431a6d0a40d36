package kafkaerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestClassify(t *testing.T) {
	f := func(err error, want Class, reason string) {
		t.Helper()
		got := Classify(err)
		if got.Class != want || !strings.Contains(got.Reason, reason) {
			t.Fatalf("Classify(%v) = %v (%q), want %v (%q)", err, got.Class, got.Reason, want, reason)
		}
		if got.Retriable() != (want == Retriable) {
			t.Fatalf("Classify(%v).Retriable() = %v", err, got.Retriable())
		}
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	shard := func(errs ...error) error {
		s := &kadm.ShardErrors{Name: "ListOffsets"}
		for _, e := range errs {
			s.Errs = append(s.Errs, kadm.ShardError{Err: e})
		}
		return fmt.Errorf("exactly-once: reading the partitions' log end offsets: %w", s)
	}

	// Passing conditions of the broker and the network.
	f(kerr.NotLeaderForPartition, Retriable, "NOT_LEADER_FOR_PARTITION")
	f(kerr.LeaderNotAvailable, Retriable, "LEADER_NOT_AVAILABLE")
	f(fmt.Errorf("commit: %w", kerr.CoordinatorNotAvailable), Retriable, "COORDINATOR_NOT_AVAILABLE")
	f(kerr.NotCoordinator, Retriable, "NOT_COORDINATOR")
	f(kerr.CoordinatorLoadInProgress, Retriable, "COORDINATOR_LOAD_IN_PROGRESS")
	f(kerr.RequestTimedOut, Retriable, "REQUEST_TIMED_OUT")
	f(kerr.NotEnoughReplicas, Retriable, "NOT_ENOUGH_REPLICAS")
	f(refused, Retriable, "network")
	f(&net.OpError{Op: "dial", Err: errors.New("connection refused")}, Retriable, "network")
	f(fmt.Errorf("read: %w", io.EOF), Retriable, "network") // a broker closed the connection
	f(shard(fmt.Errorf("unable to dial: %w", refused)), Retriable, "network")
	f(context.DeadlineExceeded, Retriable, "timed out")
	f(kgo.ErrRecordTimeout, Retriable, "record_timeout")
	f(kgo.ErrRecordRetries, Retriable, "retries")
	// A group moving on: a later attempt under a new generation passes.
	f(kerr.RebalanceInProgress, Retriable, "rebalancing")
	f(kerr.IllegalGeneration, Retriable, "generation")
	f(kerr.UnknownMemberID, Retriable, "session")
	f(kerr.StaleMemberEpoch, Retriable, "stale")
	f(kerr.FencedMemberEpoch, Retriable, "fenced")

	// Final: fencing, authorization, refused metadata, a bad record; and
	// of joined errors, the final one decides.
	f(kerr.FencedInstanceID, Permanent, "static group instance id")
	f(kerr.GroupAuthorizationFailed, Permanent, "consumer group")
	f(kerr.TopicAuthorizationFailed, Permanent, "topic")
	f(kerr.OffsetMetadataTooLarge, Permanent, "metadata")
	f(kerr.InvalidRecord, Permanent, "not a passing condition")
	f(shard(kerr.TopicAuthorizationFailed), Permanent, "topic")
	f(shard(fmt.Errorf("unable to dial: %w", refused), kerr.TopicAuthorizationFailed), Permanent, "topic")
	f(errors.New("exactly-once: batch 3 holds records of partitions given up"), Permanent, "not a passing condition")

	// The classes a caller decides on.
	f(kerr.UnknownTopicOrPartition, UnknownTopic, "does not know")
	f(kerr.UnknownTopicID, UnknownTopic, "does not know")
	f(shard(kerr.UnknownTopicOrPartition), UnknownTopic, "does not know")
	f(fmt.Errorf("%w (uncompressed_bytes=2000000)", kerr.MessageTooLarge), TooLarge, "size")
	f(kerr.RecordListTooLarge, TooLarge, "size")
	f(context.Canceled, Canceled, "stopping")
	f(fmt.Errorf("commit: %w", context.Canceled), Canceled, "stopping")
	f(kgo.ErrClientClosed, Canceled, "closed")
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{Permanent: "permanent", Retriable: "retriable", TooLarge: "too-large",
		UnknownTopic: "unknown-topic", Canceled: "canceled", 99: "unknown"} {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String() = %q, want %q", c, got, want)
		}
	}
}

// BenchmarkClassify sorts one error of each kind Classify tells apart,
// wrapped as the callers see them, per op:
//
//	go test ./internal/kafkaerr -run '^$' -bench Classify
func BenchmarkClassify(b *testing.B) {
	errs := []error{
		context.Canceled,
		fmt.Errorf("produce: %w", kerr.MessageTooLarge),
		fmt.Errorf("commit: %w", kerr.GroupAuthorizationFailed),
		kerr.UnknownTopicOrPartition,
		fmt.Errorf("commit: %w", kerr.RebalanceInProgress),
		kerr.NotLeaderForPartition,
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		errors.New("something else"),
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range errs {
			Classify(err)
		}
	}
}

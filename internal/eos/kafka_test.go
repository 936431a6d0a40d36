package eos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/internal/consumer"
	"sink/internal/offsets"
)

// commit commits pos for cl with meta and returns the first partition error.
func commit(ctx context.Context, cl *kgo.Client, pos map[offsets.TP]int64, meta map[offsets.TP]string) error {
	m := map[string]map[int32]kgo.EpochOffset{}
	for tp, o := range pos {
		if m[tp.Topic] == nil {
			m[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		m[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var cerr error
	cl.CommitOffsetsSync(consumer.WithMetadata(ctx, meta), m, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
					cerr = err
				}
			}
		}
	})
	return cerr
}

// TestIntentCommitFencedByGeneration: a member that recorded an intent and
// then lost its membership (it could not rejoin in time, like a paused
// process) has its next intent commit refused, and the group's ledger keeps
// what the member recorded while it was still a member.
func TestIntentCommitFencedByGeneration(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	prod, _ := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	defer prod.Close()
	for p := int32(0); p < 2; p++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	member := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.RebalanceTimeout(500*time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	a := member()
	defer func() { a.AllowRebalance(); a.Close() }()
	// a polls both records and keeps the poll: it cannot take part in the
	// next rebalance, as a process paused past its timeouts.
	got := 0
	for got < 2 {
		got += len(a.PollFetches(ctx).Records())
	}
	l := Ledger{Offset: 0, Entries: []Entry{{Token: tokA, First: 0, Last: 0, N: 2}}}
	m, err := l.Encode()
	if err != nil {
		t.Fatal(err)
	}
	both := map[offsets.TP]int64{tp("t", 0): 0, tp("t", 1): 0}
	if err := commit(ctx, a, both, map[offsets.TP]string{tp("t", 0): m, tp("t", 1): m}); err != nil {
		t.Fatalf("intent commit of a member: %v", err)
	}

	b := member()
	defer func() { b.AllowRebalance(); b.Close() }()
	// b joining forces a rebalance that a cannot join; it ends without a.
	for len(b.PollFetches(ctx).Records()) == 0 && ctx.Err() == nil {
	}
	if ctx.Err() != nil {
		t.Fatal("b was never assigned")
	}
	err = commit(ctx, a, both, map[offsets.TP]string{tp("t", 0): "forged", tp("t", 1): "forged"})
	if !errors.Is(err, kerr.IllegalGeneration) && !errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.RebalanceInProgress) {
		t.Fatalf("intent commit of a member that was rebalanced out: %v, want it refused", err)
	}
	t.Logf("refused: %v", err)

	adm := kadm.NewClient(prod)
	snap, err := FetchSnapshot(ctx, adm, "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{0, 1} {
		if c := snap[tp("t", p)]; c.Metadata != m {
			t.Fatalf("t[%d] metadata after the refused commit: %q, want %q", p, c.Metadata, m)
		}
	}
	// And the plan a new owner makes from it rebuilds the batch.
	plan := PlanRecovery(snap, []offsets.TP{tp("t", 1)}, func(string) []string { return []string{"db.t"} })
	if len(plan.Replays) != 0 || !plan.Parts[0].Check {
		// tokA is not the token of these ranges: incomplete, so checked
		t.Fatalf("plan: %+v", plan)
	}
}

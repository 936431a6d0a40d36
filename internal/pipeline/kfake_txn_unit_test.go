package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestUnitKfakeTransactions: the real consumer against kfake, a partition
// holding a committed transaction, then an aborted one, and ending with an
// aborted one. Only the committed records are inserted, and the group's
// committed offset reaches the log end, past both abort markers and the
// aborted records.
func TestUnitKfakeTransactions(t *testing.T) {
	cfg := kfakeConfig(t, 1)
	prod, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.DefaultProduceTopic(unitTopic),
		kgo.TransactionalID("unit-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	id := 0
	for _, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryAbort} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, `{"id":%d,"s":"x"}`, id)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			id++
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(prod)
	ends, err := adm.ListEndOffsets(ctx, unitTopic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(unitTopic, 0)
	if end.Offset <= 12 {
		t.Fatalf("log end %d: kfake wrote no transaction markers, so this test proves nothing", end.Offset)
	}

	sink := newFakeSink(nil)
	p, stop := runKfake(t, ctx, cfg, sink)
	committed := func() int64 {
		os, err := adm.FetchOffsets(ctx, cfg.Kafka.Group)
		if err != nil {
			return -1
		}
		o, _ := os.Lookup(unitTopic, 0)
		return o.At
	}
	eventually(t, 10*time.Second, fmt.Sprintf("the group committed up to the log end %d", end.Offset),
		func() bool { return committed() == end.Offset })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.inserted("db.t"); got != 4 {
		t.Fatalf("%d rows inserted, want the 4 committed", got)
	}
	if st := p.Stats(); st.Records != 4 {
		t.Fatalf("%d records counted, want 4 (markers are not records)", st.Records)
	}
}

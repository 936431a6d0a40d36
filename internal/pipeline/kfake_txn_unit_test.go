package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestUnitKfakeTransactions: the real consumer against kfake, the topic
// holding a committed transaction, then an aborted one, and ending with an
// aborted one. Only the committed records are inserted, and the group's
// committed offsets reach the log ends, past both abort markers and the
// aborted records.
func TestUnitKfakeTransactions(t *testing.T) {
	k := startKfake(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(k.cfg.Kafka.Brokers...), kgo.DefaultProduceTopic(unitTopic),
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
	ends, err := k.adm.ListEndOffsets(ctx, unitTopic)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	if end <= 12 {
		t.Fatalf("log ends sum to %d: kfake wrote no transaction markers, so this test proves nothing", end)
	}
	eventually(t, 10*time.Second, fmt.Sprintf("the group committed up to the log ends (%d in all)", end),
		func() bool { return k.committed() == end })
	k.stop(t)
	if got := k.sink.inserted("db.t"); got != 4 {
		t.Fatalf("%d rows inserted, want the 4 committed", got)
	}
	if st := k.p.Stats(); st.Records != 4 {
		t.Fatalf("%d records counted, want 4 (markers are not records)", st.Records)
	}
}

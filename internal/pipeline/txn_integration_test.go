//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// produceTransactions writes txns transactions of perTxn records each, round
// robin over the topic's partitions; odd transactions (and, whatever txns is,
// the last one) are aborted, the others committed. Record ids count up over
// all of them; v is "commit" or "abort". It returns the committed count.
func produceTransactions(t *testing.T, topic string, partitions, txns, perTxn int) (committed int) {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(testenv.UniqueName(t, "txn")))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := 0
	for x := range txns {
		abort := x%2 == 1 || x == txns-1
		v := "commit"
		if abort {
			v = "abort"
		}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := make([]*kgo.Record, perTxn)
		for i := range recs {
			recs[i] = &kgo.Record{Partition: int32(id % partitions), Value: fmt.Appendf(nil, `{"id":%d,"v":%q}`, id, v)}
			id++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryCommit
		if abort {
			end = kgo.TryAbort
		} else {
			committed += perTxn
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	return committed
}

// committedAtLogEnd is a runWhile condition: every partition of topic is
// committed at its log end (past the last transaction marker).
func committedAtLogEnd(t *testing.T, group, topic string) func() (bool, string) {
	adm := kadm.NewClient(testenv.KafkaClient(t))
	return func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		got, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		var bad []string
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := got.Lookup(o.Topic, o.Partition); !ok || c.At != o.Offset {
				bad = append(bad, fmt.Sprintf("partition %d committed at %d (%v), log end %d", o.Partition, c.At, ok, o.Offset))
			}
		})
		return len(bad) == 0, strings.Join(bad, "; ")
	}
}

// checkTransactionalLoad checks the rows of table after a load of
// produceTransactions: exactly the committed records, each once, none
// aborted.
func checkTransactionalLoad(t *testing.T, ch driver.Conn, table string, committed int) {
	t.Helper()
	var rows, distinct, aborted uint64
	if err := ch.QueryRow(context.Background(), "SELECT count(), uniqExact(id), countIf(v = 'abort') FROM "+table).
		Scan(&rows, &distinct, &aborted); err != nil {
		t.Fatal(err)
	}
	if rows != uint64(committed) || distinct != rows || aborted != 0 {
		t.Fatalf("%s: %d rows, %d distinct ids, %d aborted; want %d committed rows, each once, none aborted", table, rows, distinct, aborted, committed)
	}
}

// checkNoLag expects sink_consumer_lag and sink_consumer_lag_seconds to be
// 0 on every one of the topic's partitions.
func checkNoLag(t *testing.T, s map[string]float64, topic string, partitions int) {
	t.Helper()
	topicL := fmt.Sprintf(`topic="%s"`, topic)
	for _, name := range []string{metrics.ConsumerLag, metrics.ConsumerLagSeconds} {
		v, series := sum(s, name, topicL)
		if series != partitions || v != 0 {
			t.Errorf("%s: %d series summing to %v; want %d series, all 0", name, series, v, partitions)
		}
	}
}

// Transactions committed and aborted in turn, on 3 partitions, the topic
// ending with an aborted one: with read_committed no aborted row lands,
// and the group's committed offsets reach the log end on every partition
// (past the commit and abort markers and the aborted records), so lag
// tools and the sink's own lag metrics show 0.
func TestTransactionsCommittedToLogEnd(t *testing.T) {
	const partitions = 3
	eachServerWithTopic(t, partitions, func(t *testing.T, server testenv.Server, ch driver.Conn, db, topic, broker string) {
		ctx := context.Background()
		if err := ch.Exec(ctx, "CREATE TABLE "+db+".t (id UInt64, v String) ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		committed := produceTransactions(t, topic, partitions, 11, 300)
		group := testenv.UniqueName(t, "txn")
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_rows: 1000, max_wait: 200ms}
routes: [{topic: %q, table: t}]
http: {listen: ""}
`, group, broker, topic, server.Addr, db, topic))
		m, read := serveMetrics(t, group)
		atEnd := committedAtLogEnd(t, group, topic)
		st := runWhile(t, cfg, time.Minute, func(*writer.Writer) (bool, string) { return atEnd() }, pipeline.WithMetrics(m))
		checkTransactionalLoad(t, ch, db+".t", committed)
		checkNoLag(t, read(), topic, partitions)
		if st.Records != int64(committed) {
			t.Errorf("stats: %d records consumed, want the %d committed (markers are not records)", st.Records, committed)
		}
		t.Logf("%d committed records of 11 transactions (6 aborted, the last too): %d rows, committed at the log end", committed, st.Rows)
	})
}

// The same in exactly-once mode (ClickHouse 26: insert_deduplication_token),
// where each commit carries the partition's ledger: the offsets reach the
// log end, and a second run from there inserts nothing.
func TestTransactionsCommittedToLogEndExactlyOnceOn26(t *testing.T) {
	const partitions = 3
	s := testenv.Server26(t)
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, partitions)
	if err := ch.Exec(context.Background(), `CREATE TABLE `+db+`.t (id UInt64, v String,
		_topic LowCardinality(String), _partition Int32, _offset Int64)
		ENGINE = MergeTree ORDER BY (_topic, _partition, _offset)
		SETTINGS non_replicated_deduplication_window = 1000`); err != nil {
		t.Fatal(err)
	}
	committed := produceTransactions(t, topic, partitions, 11, 300)
	group := testenv.UniqueName(t, "txneo")
	cfg := eoConfig(t, s, group, topic, db, "t")
	cfg.Kafka.CommitInterval = 200 * time.Millisecond
	m, read := serveMetrics(t, group)
	atEnd := committedAtLogEnd(t, group, topic)
	runWhile(t, cfg, time.Minute, func(*writer.Writer) (bool, string) { return atEnd() }, pipeline.WithMetrics(m))
	checkTransactionalLoad(t, ch, db+".t", committed)
	checkNoLag(t, read(), topic, partitions)

	// A restart reads the ledgers committed at the log end: nothing to
	// replay, nothing consumed, nothing inserted.
	m2, read2 := serveMetrics(t, group)
	st := runWhile(t, cfg, time.Minute, func(*writer.Writer) (bool, string) {
		if v, _ := sum(read2(), metrics.Partitions); v < partitions {
			return false, fmt.Sprintf("%v partitions assigned, want %d", v, partitions)
		}
		return atEnd()
	}, pipeline.WithMetrics(m2))
	if st.Rows != 0 || st.Records != 0 {
		t.Fatalf("restart at the log end: %d records consumed, %d rows inserted; want 0 and 0", st.Records, st.Rows)
	}
	checkTransactionalLoad(t, ch, db+".t", committed)
}

package pipeline

// Unit tests of tables named after their topic under a broad topic_regex:
// a topic's name never chooses the database. A topic whose name gives no
// table by the template is a bad record with its cause, and the other
// topics keep landing.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/offsets"
)

// describingSink records every table the pipeline reads.
type describingSink struct {
	*fakeSink
	mu        sync.Mutex
	described []string
}

func (k *describingSink) Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error) {
	k.mu.Lock()
	k.described = append(k.described, db+"."+table)
	k.mu.Unlock()
	return k.fakeSink.Describe(ctx, db, table)
}

// causeSource records the cause of every dead-letter produce.
type causeSource struct {
	*fakeSource
	mu     sync.Mutex
	causes []string
}

func (s *causeSource) ProduceDLQ(ctx context.Context, topic string, rec *kgo.Record, cause error, exhausted bool, done func(error)) {
	s.mu.Lock()
	s.causes = append(s.causes, rec.Topic+": "+cause.Error())
	s.mu.Unlock()
	s.fakeSource.ProduceDLQ(ctx, topic, rec, cause, exhausted, done)
}

// TestUnitTemplateTopicNeverChoosesDatabase: with table '${topic}' (and
// '${topic}_x') under topic_regex '.*', the records of topics prod.orders
// and a.b.c go to the dead-letter topic with the cause, no table of
// database prod (or any but db) is read or written, and the records of
// topic orders land in db.orders.
func TestUnitTemplateTopicNeverChoosesDatabase(t *testing.T) {
	for _, table := range []string{"${topic}", "${topic}_x"} {
		t.Run(table, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testUnitTemplateTopic(t, table) })
		})
	}
}

func testUnitTemplateTopic(t *testing.T, table string) {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
name: unit
kafka: {topic_regex: '[a-z.]+'}
clickhouse: {database: db}
routes: [{topic_regex: '[a-z.]+', table: '%s'}]
errors: {tolerance: all, dlq_topic: dead-letters}
`, table)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Batch.MaxRows = 2
	cfg.Batch.MaxWait = time.Hour
	cfg.Kafka.CommitInterval = 50 * time.Millisecond // as unitConfig's
	sink := &describingSink{fakeSink: newFakeSink(nil)}
	p, err := New(context.Background(), cfg, zerolog.Nop(), sink)
	if err != nil {
		t.Fatal(err)
	}
	src := &causeSource{fakeSource: newFakeSource()}
	r := launch(t, p, src.fakeSource, src, sink.fakeSink)
	legit := strings.ReplaceAll(table, "${topic}", "orders")
	send := func(topic string, from, n int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			off := int64(from + i)
			recs[i] = &kgo.Record{Topic: topic, Offset: off, Value: fmt.Appendf(nil, `{"id":%d,"s":"x"}`, off), Timestamp: time.Now()}
		}
		src.fetches <- kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{{HighWatermark: int64(from + n), Records: recs}}}}}}
	}
	send("orders", 0, 2)
	send("prod.orders", 0, 2)
	send("a.b.c", 0, 1)
	send("orders", 2, 2)
	eventually(t, 2*time.Second, "every topic committed", func() bool {
		return src.committed(tpOf("orders")) == 4 && src.committed(tpOf("prod.orders")) == 2 && src.committed(tpOf("a.b.c")) == 1
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	sink.mu.Lock()
	described := slices.Clone(sink.described)
	sink.mu.Unlock()
	if !slices.Equal(described, []string{"db." + legit}) {
		t.Errorf("tables read %q, want only db.%s", described, legit)
	}
	if n := sink.inserted("db." + legit); n != 4 {
		t.Errorf("%d rows in db.%s, want 4", n, legit)
	}
	src.mu.Lock()
	causes := slices.Clone(src.causes)
	src.mu.Unlock()
	if len(causes) != 3 {
		t.Fatalf("dead letters %q, want the 3 records of prod.orders and a.b.c", causes)
	}
	for _, c := range causes {
		if !strings.Contains(c, "a topic never chooses the database") {
			t.Errorf("dead-letter cause %q does not say why", c)
		}
	}
}

func tpOf(topic string) offsets.TP { return offsets.TP{Topic: topic} }

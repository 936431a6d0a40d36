//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/consumer"
	"sink/internal/pipeline"
	"sink/internal/status"
	"sink/internal/testenv"
	"sink/internal/writer"
)

func produceValues(t *testing.T, topic string, values ...string) {
	t.Helper()
	var bs [][]byte
	for _, v := range values {
		bs = append(bs, []byte(v))
	}
	produceBytes(t, topic, bs...)
}

// produceBytes produces values to partition 0 of topic, in order.
func produceBytes(t *testing.T, topic string, values ...[]byte) {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Value: v, Partition: 0})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func jsonRows(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf(`{"id": %d, "n": "%d"}`, i, i))
	}
	return out
}

// startPipeline runs a connector in the background; the returned channel
// yields Run's result.
func startPipeline(t *testing.T, cfg *config.Config) (<-chan error, context.CancelFunc) {
	t.Helper()
	return startPipelineWith(t, cfg)
}

// startPipelineWith is startPipeline with pipeline options.
func startPipelineWith(t *testing.T, cfg *config.Config, opts ...pipeline.Option) (<-chan error, context.CancelFunc) {
	t.Helper()
	_, done, stop := startRunning(t, cfg, opts...)
	return done, stop
}

// startRunning is startPipelineWith that also returns the pipeline.
func startRunning(t *testing.T, cfg *config.Config, opts ...pipeline.Option) (*pipeline.Pipeline, <-chan error, context.CancelFunc) {
	t.Helper()
	return startRunningThen(t, cfg, nil, opts...)
}

// startPipelineThen is startPipelineWith that calls afterRun (when not
// nil) as soon as Run returned, before the consumer is closed.
func startPipelineThen(t *testing.T, cfg *config.Config, afterRun func(), opts ...pipeline.Option) (<-chan error, context.CancelFunc) {
	t.Helper()
	_, done, stop := startRunningThen(t, cfg, afterRun, opts...)
	return done, stop
}

// startRunningThen is startRunning with afterRun, as for startPipelineThen.
func startRunningThen(t *testing.T, cfg *config.Config, afterRun func(), opts ...pipeline.Option) (*pipeline.Pipeline, <-chan error, context.CancelFunc) {
	t.Helper()
	ctx := context.Background()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	w, err := writer.Open(ctx, cfg.Name, cfg.ClickHouse)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	p, err := pipeline.New(ctx, cfg, log, w, append(runOpts(t, cfg, w), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := consumer.New(ctx, cfg, log, consumer.HooksOf(p))
	if err != nil {
		t.Fatal(err)
	}
	p.Attach(cons)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := p.Run(runCtx)
		if afterRun != nil {
			afterRun()
		}
		cons.Close()
		done <- err
	}()
	t.Cleanup(stop)
	return p, done, stop
}

func committed(t *testing.T, group, topic string, partition int32) int64 {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t))
	offs, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, partition)
	if !ok {
		return 0
	}
	return o.At
}

func countRows(t *testing.T, ch driver.Conn, table string) uint64 {
	t.Helper()
	var n uint64
	if err := ch.QueryRow(context.Background(), "SELECT count() FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func fatalConfig(t *testing.T, s testenv.Server, topic, db, table string) *config.Config {
	return newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 200ms}
batch: {max_rows: 100, max_wait: 200ms}
routes: [{topic: %q, table: %s}]
http: {listen: ""}
`, testenv.UniqueName(t, "fatal"), testenv.Kafka(t)[0], topic, s.Addr, db, topic, table))
}

// A bad record with errors.tolerance none stops the connector with an error
// naming the record; what came before it is inserted and committed, the
// record itself and everything after it are not.
func TestBadRecordStopsWithoutCommittingPastIt(t *testing.T) {
	testenv.EachServer(t, testBadRecordStopsWithoutCommittingPastIt)
}

func testBadRecordStopsWithoutCommittingPastIt(t *testing.T, s testenv.Server) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	if err := ch.Exec(context.Background(), "CREATE TABLE "+db+".t (id UInt64, n String) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	values := append(jsonRows(0, 150), `{"id": 150, "n": `) // malformed at offset 150
	values = append(values, jsonRows(151, 300)...)
	produceValues(t, topic, values...)

	cfg := fatalConfig(t, s, topic, db, "t")
	done, _ := startPipeline(t, cfg)
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the connector did not stop on a bad record")
	}
	if err == nil || !strings.Contains(err.Error(), "partition 0 offset 150") || !strings.Contains(err.Error(), "errors.tolerance is none") {
		t.Fatalf("Run error = %v; want one naming partition 0 offset 150 and the tolerance", err)
	}
	if n := countRows(t, ch, db+".t"); n != 150 {
		t.Fatalf("%d rows in ClickHouse; want the 150 before the bad record", n)
	}
	if c := committed(t, cfg.Kafka.Group, topic, 0); c != 150 {
		t.Fatalf("committed offset %d; want 150 (the bad record is consumed again after a restart)", c)
	}
}

// A permanent insert error stops the connector; the failed batch's offsets
// are never committed.
func TestPermanentInsertErrorStopsWithoutCommittingPastIt(t *testing.T) {
	testenv.EachServer(t, testPermanentInsertErrorStopsWithoutCommittingPastIt)
}

func testPermanentInsertErrorStopsWithoutCommittingPastIt(t *testing.T, s testenv.Server) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	ctx := context.Background()
	if err := ch.Exec(ctx, "CREATE TABLE "+db+".t (id UInt64, n String) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, topic, jsonRows(0, 200)...)
	cfg := fatalConfig(t, s, topic, db, "t")
	done, _ := startPipeline(t, cfg)
	deadline := time.Now().Add(time.Minute)
	for countRows(t, ch, db+".t") < 200 {
		if time.Now().After(deadline) {
			t.Fatal("first 200 rows did not land")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Wait for their commit, then change the column under the running sink:
	// its blocks still carry String for n, which the server now refuses.
	for committed(t, cfg.Kafka.Group, topic, 0) < 200 {
		if time.Now().After(deadline) {
			t.Fatal("first 200 offsets were not committed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := ch.Exec(ctx, "ALTER TABLE "+db+".t MODIFY COLUMN n UInt64"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, topic, jsonRows(200, 300)...)
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the connector did not stop on a permanent insert error")
	}
	if err == nil || !strings.Contains(err.Error(), "insert into "+db+".t") {
		t.Fatalf("Run error = %v; want the insert failure", err)
	}
	if n := countRows(t, ch, db+".t"); n != 200 {
		t.Fatalf("%d rows; want 200", n)
	}
	if c := committed(t, cfg.Kafka.Group, topic, 0); c != 200 {
		t.Fatalf("committed offset %d; want 200: nothing of the failed batches", c)
	}
}

// SIGTERM while an INSERT is being retried ends, after shutdown_timeout,
// with an error that says what it was stuck on (the table, the last error)
// and what was committed. readonly=1 makes every INSERT fail with READONLY
// (164), which is retriable.
func TestShutdownStuckOnInsertSaysWhat(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		if err := ch.Exec(context.Background(), "CREATE TABLE "+db+".t (id UInt64, n String) ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		topic := testenv.NewTopic(t, 1)
		produceValues(t, topic, jsonRows(0, 10)...)
		cfg := fatalConfig(t, s, topic, db, "t")
		cfg.ClickHouse.Settings = map[string]any{"readonly": 1}
		cfg.ShutdownTimeout = time.Second
		p, done, stop := startRunning(t, cfg)
		// Stop once the first batch's INSERT has failed on the server and
		// is being retried, however long a loaded machine took to get there.
		deadline := time.Now().Add(60 * time.Second)
		for !insertRefused(p.Status(), 164) {
			if time.Now().After(deadline) {
				t.Fatalf("no INSERT refused with code 164 after 60s: %+v", p.Status())
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("SIGTERM did not end the run")
		}
		t.Logf("Run ended with: %v", err)
		if err == nil || !strings.Contains(err.Error(), "stuck on the INSERT of 10 rows into "+db+".t") ||
			!strings.Contains(err.Error(), "code: 164") || !strings.Contains(err.Error(), "committed nothing new") {
			t.Fatalf("Run error %v; want it stuck on the INSERT into %s.t with READONLY, nothing committed", err, db)
		}
	})
}

// insertRefused says whether a table of snap has an INSERT attempt that
// failed with the ClickHouse exception code.
func insertRefused(snap *status.Snapshot, code int32) bool {
	if snap == nil {
		return false
	}
	for _, t := range snap.Tables {
		if t.LastError != nil && t.LastError.Code == code {
			return true
		}
	}
	return false
}

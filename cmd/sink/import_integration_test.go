//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// connectJSON is a Connect REST body for the official sink, aimed at db.
func connectJSON(name, topics, db, extra string) string {
	return fmt.Sprintf(`{"name": %q, "config": {
  "connector.class": "com.clickhouse.kafka.connect.ClickHouseSinkConnector",
  "tasks.max": "3", "topics": %q, "hostname": "clickhouse", "port": "8123", "ssl": "false",
  "database": %q, "username": "default", "password": "",
  "value.converter": "org.apache.kafka.connect.json.JsonConverter",
  "value.converter.schemas.enable": "false",
  "key.converter": "org.apache.kafka.connect.storage.StringConverter",
  "consumer.override.fetch.min.bytes": "1024", "consumer.override.fetch.max.wait.ms": "200",
  "consumer.override.max.poll.records": "500"%s}}`, name, topics, db, extra)
}

// importTo runs sink import on dir with the stack's broker and the server's
// native address and returns the written YAML paths by connector name.
func importTo(t *testing.T, in string, s testenv.Server, brokers []string) string {
	t.Helper()
	out := t.TempDir()
	code, stdout, stderr := sinkCmd(t, "import", "--out", out, "--brokers", strings.Join(brokers, ","), "--native", s.Addr, in)
	if code != 0 {
		t.Fatalf("sink import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("sink import:\n%s", stdout)
	return out
}

// noHTTP keeps the imported sink off the shared metrics port.
func noHTTP(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("http: {listen: \"\"}\n"); err != nil {
		t.Fatal(err)
	}
}

// TestImportedConfigPassesCheck: two connectors (JSON with topic2TableMap
// and InsertField; Debezium change events with debeziumCDCEnabled) are
// imported and pass sink check against real topics and tables, on both
// servers.
func TestImportedConfigPassesCheck(t *testing.T) {
	brokers := testenv.Kafka(t)
	events := testenv.NewTopic(t, 3)
	cdc := testenv.NewTopic(t, 1)
	dlq := testenv.NewTopic(t, 1)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch,
			"CREATE TABLE "+db+".events_raw (id UInt64, kind String, kafka_topic String, kafka_offset UInt64) ENGINE = MergeTree ORDER BY id",
			"CREATE TABLE "+db+".customers (id Int64, name String, _version UInt64, is_deleted UInt8) ENGINE = ReplacingMergeTree(_version) ORDER BY id")
		in := t.TempDir()
		if err := os.WriteFile(filepath.Join(in, "events.json"), []byte(connectJSON("events-sink", events, db, `,
  "topic2TableMap": "`+events+`=events_raw",
  "transforms": "ins", "transforms.ins.type": "org.apache.kafka.connect.transforms.InsertField$Value",
  "transforms.ins.topic.field": "kafka_topic", "transforms.ins.offset.field": "kafka_offset",
  "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "`+dlq+`",
  "errors.deadletterqueue.context.headers.enable": "true", "bufferCount": "10000", "bufferFlushTime": "2000"`)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, "cdc.properties"), []byte(fmt.Sprintf(
			"name=cdc-sink\nconnector.class=com.clickhouse.kafka.connect.ClickHouseSinkConnector\ntopics=%s\ntopic2TableMap=%s=customers\nhostname=ch\ndatabase=%s\ndebeziumCDCEnabled=true\nvalue.converter=org.apache.kafka.connect.json.JsonConverter\n", cdc, cdc, db)), 0o600); err != nil {
			t.Fatal(err)
		}
		out := importTo(t, in, s, brokers)
		for _, name := range []string{"events-sink", "cdc-sink"} {
			path := filepath.Join(out, name+".yaml")
			noHTTP(t, path)
			code, stdout, stderr := sinkCmd(t, "check", "--config", path)
			if code != 0 || !strings.Contains(stdout, "check: ok") {
				y, _ := os.ReadFile(path)
				t.Fatalf("sink check %s: exit %d\n%s\nstdout %s\nstderr %s", name, code, y, stdout, stderr)
			}
		}
	})
}

// TestImportKeepsConnectGroup: records a Connect worker committed in group
// connect-NAME are not inserted again by sink run with the imported
// config; the records after them are, each once (counted in SQL).
func TestImportKeepsConnectGroup(t *testing.T) {
	brokers := testenv.Kafka(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		topic := testenv.NewTopic(t, 3)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, kind String) ENGINE = MergeTree ORDER BY id")
		const before, after = 300, 200
		values := func(from, n int) []string {
			v := make([]string, n)
			for i := range v {
				v[i] = fmt.Sprintf(`{"id": %d, "kind": "k%d"}`, from+i, (from+i)%7)
			}
			return v
		}
		testenv.Produce(t, topic, values(0, before)...)

		// What a Connect worker commits after its task put() the first
		// records: each partition's next offset, in group connect-NAME.
		name := "orders-" + strings.ReplaceAll(db, "_", "-")
		group := "connect-" + name
		adm := kadm.NewClient(testenv.KafkaClient(t))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		commit := kadm.Offsets{}
		ends.Each(func(o kadm.ListedOffset) {
			commit.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
		})
		if err := adm.CommitAllOffsets(ctx, group, commit); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = adm.DeleteGroup(context.Background(), group) })
		testenv.Produce(t, topic, values(before, after)...)

		in := filepath.Join(t.TempDir(), "orders.json")
		if err := os.WriteFile(in, []byte(connectJSON(name, topic, db, `, "topic2TableMap": "`+topic+`=events"`)), 0o600); err != nil {
			t.Fatal(err)
		}
		out := importTo(t, in, s, brokers)
		path := filepath.Join(out, name+".yaml")
		noHTTP(t, path)
		y, _ := os.ReadFile(path)
		if !strings.Contains(string(y), "group: "+group+"\n") {
			t.Fatalf("imported YAML without group %s:\n%s", group, y)
		}

		done := make(chan int, 1)
		var runErr strings.Builder
		go func() {
			code := realMain([]string{"run", "--config", path}, &strings.Builder{}, &runErr)
			done <- code
		}()
		count := func() (n, minID, uniq uint64) {
			row := ch.QueryRow(context.Background(), "SELECT count(), min(id), uniqExact(id) FROM "+db+".events")
			if err := row.Scan(&n, &minID, &uniq); err != nil {
				t.Fatal(err)
			}
			return
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			if n, _, _ := count(); n >= after {
				break
			}
			select {
			case code := <-done:
				t.Fatalf("sink run exited %d before the rows arrived: %s", code, runErr.String())
			default:
			}
			if time.Now().After(deadline) {
				n, _, _ := count()
				t.Fatalf("%d rows after 90 s, want %d", n, after)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Stop as an operator would; the handler is installed before the
		// pipeline starts, so the signal reaches the sink, not the test.
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("sink run exited %d: %s", code, runErr.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatal("sink run did not stop within 60 s of SIGTERM")
		}
		n, minID, uniq := count()
		t.Logf("%s: %d committed by connect, %d after: the sink inserted %d rows, ids from %d, %d distinct", s.Name(), before, after, n, minID, uniq)
		if n != after || uniq != after || minID != before {
			t.Fatalf("table holds %d rows (%d distinct, smallest id %d); want the %d records after the committed offsets (ids %d..%d), each once", n, uniq, minID, after, before, before+after-1)
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := offs.Lookup(o.Topic, o.Partition); !ok || c.At != o.Offset {
				t.Errorf("partition %d: committed %v, end %d", o.Partition, c.At, o.Offset)
			}
		})
	})
}

// TestImportExactlyOnceFindsUncommittedRowsOn26: the official sink under
// exactlyOnce inserted records past the offsets Connect committed (its
// KeeperMap said so; the sink never reads it). The imported config's first
// start treats every partition as unmarked, finds those rows in the table
// by _topic/_partition/_offset and does not insert them again, and inserts
// the records no one inserted yet, each once.
func TestImportExactlyOnceFindsUncommittedRowsOn26(t *testing.T) {
	brokers := testenv.Kafka(t)
	s := testenv.Server26(t)
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	topic := testenv.NewTopic(t, 2)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, kind String, _topic String, _partition Int32, _offset Int64) "+
		"ENGINE = MergeTree ORDER BY id SETTINGS non_replicated_deduplication_window = 1000")
	values := func(from, n int) []string {
		v := make([]string, n)
		for i := range v {
			v[i] = fmt.Sprintf(`{"id": %d, "kind": "k"}`, from+i)
		}
		return v
	}
	const committed, insertedUncommitted, fresh = 200, 100, 150
	testenv.Produce(t, topic, values(0, committed)...)
	name := "eo-" + strings.ReplaceAll(db, "_", "-")
	group := "connect-" + name
	adm := kadm.NewClient(testenv.KafkaClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	commit := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		commit.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	if err := adm.CommitAllOffsets(ctx, group, commit); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteGroup(context.Background(), group) })
	testenv.Produce(t, topic, values(committed, insertedUncommitted)...)

	// What the official sink had inserted: every record so far, with the
	// Kafka coordinates the sink's exactly-once columns hold.
	cl := testenv.KafkaClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	batch, err := ch.PrepareBatch(ctx, "INSERT INTO "+db+".events (id, kind, _topic, _partition, _offset)")
	if err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < committed+insertedUncommitted; {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			var id uint64
			if _, err := fmt.Sscanf(string(r.Value), `{"id": %d`, &id); err != nil {
				t.Fatal(err)
			}
			if err := batch.Append(id, "k", r.Topic, r.Partition, r.Offset); err != nil {
				t.Fatal(err)
			}
			seen++
		})
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	testenv.Produce(t, topic, values(committed+insertedUncommitted, fresh)...)

	in := filepath.Join(t.TempDir(), "eo.json")
	if err := os.WriteFile(in, []byte(connectJSON(name, topic, db, `, "topic2TableMap": "`+topic+`=events", "exactlyOnce": "true", "zkDatabase": "connect_state"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := importTo(t, in, s, brokers)
	path := filepath.Join(out, name+".yaml")
	noHTTP(t, path)
	done := make(chan int, 1)
	var runErr strings.Builder
	go func() { done <- realMain([]string{"run", "--config", path}, &strings.Builder{}, &runErr) }()
	total := uint64(committed + insertedUncommitted + fresh)
	count := func() (n, uniq uint64) {
		if err := ch.QueryRow(context.Background(), "SELECT count(), uniqExact(_topic, _partition, _offset) FROM "+db+".events").Scan(&n, &uniq); err != nil {
			t.Fatal(err)
		}
		return
	}
	deadline := time.Now().Add(90 * time.Second)
	for n, _ := count(); n < total; n, _ = count() {
		select {
		case code := <-done:
			t.Fatalf("sink run exited %d: %s", code, runErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows after 90 s, want %d", n, total)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Let it settle past a commit interval: a duplicate would show up here.
	time.Sleep(6 * time.Second)
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("sink run exited %d: %s", code, runErr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("sink run did not stop within 60 s of SIGTERM")
	}
	n, uniq := count()
	t.Logf("%d committed by connect, %d inserted past the commit, %d new: %d rows, %d distinct offsets", committed, insertedUncommitted, fresh, n, uniq)
	if n != total || uniq != total {
		t.Fatalf("table holds %d rows, %d distinct offsets; want %d, each once", n, uniq, total)
	}
}

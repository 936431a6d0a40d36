//go:build integration

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
	"sink/internal/registry"
	"sink/internal/testenv"
)

// TestCheckListsDrift: `sink check` decodes the newest records of each
// topic and lists, per route, the fields no column takes and the DDL that
// schema.evolve: add_columns would run, with the types the server has,
// without running it (the table keeps its columns). A denied field is
// listed with the reason it would not be added. (The newest 200 of 300
// records are offsets 100..299, of which 66 carry "secret".)
func TestCheckListsDrift(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 1)
	cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := 0; i < 300; i++ {
		v := fmt.Sprintf(`{"id":%d,"at":"2024-05-17T12:00:00Z","tags":["a"]}`, i)
		if i%3 == 0 {
			v = fmt.Sprintf(`{"id":%d,"at":"2024-05-17T12:00:00Z","tags":["a"],"secret":"x"}`, i)
		}
		recs = append(recs, &kgo.Record{Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64) ENGINE = MergeTree ORDER BY id")
		path := writeConfig(t, fmt.Sprintf(`
name: checkdrift
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: events, schema: {evolve: add_columns, deny: [secret]}}]
http: {listen: ""}
`, brokers[0], topic, s.Addr, db, topic))
		code, out, errOut := sinkCmd(t, "check", "--config", path)
		if code != 0 {
			t.Fatalf("check: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
		t.Logf("sink check:\n%s", out)
		at := "String"
		if s.AtLeast(20, 1) {
			at = "DateTime64(3)"
		}
		ine := ""
		if s.AtLeast(20, 1) {
			ine = "IF NOT EXISTS "
		}
		tbl := "`" + db + "`.`events`"
		for _, want := range []string{
			fmt.Sprintf("drift: topic %s -> %s.events: 3 fields without a column in 200 sampled records", topic, db),
			`drift:   at: 200 records, e.g. "2024-05-17T12:00:00Z"; schema.evolve: add_columns would run (dry run): ALTER TABLE ` + tbl + " ADD COLUMN " + ine + "`at` " + at,
			`drift:   secret: 66 records, e.g. "x"; not added: schema.allow / schema.deny exclude it`,
			`drift:   tags: 200 records, e.g. ["a"]; schema.evolve: add_columns would run (dry run): ALTER TABLE ` + tbl + " ADD COLUMN " + ine + "`tags` Array(String)",
			"check: ok",
		} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("no line %q in\n%s", want, out)
			}
		}
		var n uint64
		if err := ch.QueryRow(context.Background(), "SELECT count() FROM system.columns WHERE database = ? AND table = 'events'", db).Scan(&n); err != nil || n != 1 {
			t.Fatalf("the table has %d columns (%v) after a dry run; want 1", n, err)
		}
	})
}

// TestCheckListsAvroDrift: for a registry format, check lists the fields
// of the records' schemas that no column takes, with the type the schema
// gives them (the records' values are not read) and the DDL add_columns
// would run with the column type derived from it.
func TestCheckListsAvroDrift(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 1)
	const schema = `{"type":"record","name":"E","fields":[{"name":"id","type":"long"},` +
		`{"name":"note","type":["null","string"],"default":null},` +
		`{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	rc, err := registry.New(config.SchemaRegistry{URLs: []string{testenv.Registry(t)}}, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := rc.Register(ctx, testenv.UniqueName(t, "check-avro")+"-value", sr.TypeAvro, schema)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		b, err := avro.Marshal(avro.MustParse(schema), map[string]any{"id": int64(i), "note": nil, "at": time.UnixMilli(int64(i)).UTC()})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Value: append(registry.AppendFrame(nil, id, false), b...)})
	}
	if err := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic)).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		db := s.NewDatabase(t)
		testenv.Exec(t, s.Conn(t), "CREATE TABLE "+db+".events (id Int64) ENGINE = MergeTree ORDER BY id")
		path := writeConfig(t, fmt.Sprintf(`
name: checkdrift
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
schema_registry: {urls: [%q]}
routes: [{topic: %q, table: events, format: avro}]
http: {listen: ""}
`, brokers[0], topic, s.Addr, db, testenv.Registry(t), topic))
		code, out, errOut := sinkCmd(t, "check", "--config", path)
		if code != 0 {
			t.Fatalf("check: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
		at, ine := "DateTime", ""
		if s.AtLeast(20, 1) {
			at, ine = "DateTime64(3)", "IF NOT EXISTS "
		}
		alter := "ALTER TABLE `" + db + "`.`events` ADD COLUMN " + ine
		for _, want := range []string{
			fmt.Sprintf("drift: topic %s -> %s.events: 2 fields without a column in 50 sampled records", topic, db),
			`drift:   at: 50 records, schema type {"type":"long","logicalType":"timestamp-millis"}; schema.evolve is off; with add_columns it would run: ` + alter + "`at` " + at,
			`drift:   note: 50 records, schema type ["null","string"]; schema.evolve is off; with add_columns it would run: ` + alter + "`note` Nullable(String)",
		} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("no line %q in\n%s", want, out)
			}
		}
	})
}

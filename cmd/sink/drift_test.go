package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

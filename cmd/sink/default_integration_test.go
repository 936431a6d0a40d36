//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// TestCheckShowsDefaults: for real Debezium 3.6.1 events from PostgreSQL 15
// after ALTER TABLE … ADD COLUMN tier integer NOT NULL DEFAULT 7, `sink
// check` prints the ALTER TABLE for the new fields with the defaults their
// schema declares (tier DEFAULT 7, c_text DEFAULT 'dflt'), and says of a
// DEFAULT column whose expression the server computes per row that the
// records' values for it are not inserted, and why.
func TestCheckShowsDefaults(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 1)
	var recs []*kgo.Record
	for _, f := range []string{"update_row3", "insert_row4", "insert_row5"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "decode", "testdata", "debezium", "pg15_dbz361_add_column_"+f+".json"))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Value: b})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic)).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		db := s.NewDatabase(t)
		testenv.Exec(t, s.Conn(t), "CREATE TABLE "+db+".types (id Int32, _version UInt64, _deleted UInt8, seen DateTime DEFAULT now()) ENGINE = MergeTree ORDER BY id")
		path := writeConfig(t, fmt.Sprintf(`
name: checkdefaults
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {addrs: [%q], database: %s}
routes: [{topic: %q, table: types, format: debezium-json}]
http: {listen: ""}
`, brokers[0], topic, s.Addr, db, topic))
		code, out, errOut := sinkCmd(t, "check", "--config", path)
		if code != 0 {
			t.Fatalf("check: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
		ine := ""
		if s.AtLeast(20, 1) {
			ine = "IF NOT EXISTS "
		}
		alter := "ALTER TABLE `" + db + "`.`types` ADD COLUMN " + ine
		for _, want := range []string{
			"route: table " + db + ".types: column seen: records' values are not inserted, the server computes it for every row: its default now() cannot be computed once: it calls now, which is not deterministic",
			"; schema.evolve is off; with add_columns it would run: " + alter + "`tier` Int64 DEFAULT 7\n",
			"; schema.evolve is off; with add_columns it would run: " + alter + "`c_text` String DEFAULT 'dflt'\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in\n%s", want, out)
			}
		}
	})
}

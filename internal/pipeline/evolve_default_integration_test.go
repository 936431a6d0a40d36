//go:build integration

package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"sink/internal/testenv"
)

// Version 2 of this schema adds fields with defaults, as a producer does
// when its source table gets ADD COLUMN … DEFAULT.
const (
	defaultAvroV1 = `{"type":"record","name":"Row","namespace":"sink.dflt","fields":[{"name":"id","type":"long"}]}`
	defaultAvroV2 = `{"type":"record","name":"Row","namespace":"sink.dflt","fields":[{"name":"id","type":"long"},
		{"name":"tier","type":"int","default":7},
		{"name":"label","type":"string","default":"it's"},
		{"name":"since","type":{"type":"long","logicalType":"timestamp-millis"},"default":1577934245000}]}`
)

// Schema evolution adds a column for a field whose schema declares a
// default with that default, so the rows written before the column existed
// read the source's default (as PostgreSQL's ADD COLUMN … DEFAULT 7 gives
// its old rows 7), and the new rows read their values.
func TestEvolveCarriesSchemaDefault(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := freshTable(t, s, "id Int64")
		subject := testenv.UniqueName(t, "evolve-default") + "-value"
		v1, v2 := registerAvro(t, subject, defaultAvroV1), registerAvro(t, subject, defaultAvroV2)
		var recs [][]byte
		for i := 0; i < 50; i++ {
			recs = append(recs, avroValue(t, v1, defaultAvroV1, map[string]any{"id": int64(i)}))
		}
		for i := 50; i < 100; i++ {
			recs = append(recs, avroValue(t, v2, defaultAvroV2, map[string]any{"id": int64(i), "tier": 9, "label": "new",
				"since": time.UnixMilli(1715949296000).UTC()}))
		}
		cfg := evolveConfigFormat(t, s, topic, db, "avro", "{evolve: add_columns}")
		done, stop := startPipeline(t, cfg)
		sendBytes(t, done, cfg, topic, 100, recs...)
		since := "since DateTime"
		if s.AtLeast(20, 1) {
			since = "since DateTime64(3)"
		}
		expectEvolved(t, ch, db, done, []string{"id Int64", "tier Int32", "label String", since})

		rows, err := ch.Query(t.Context(), "SELECT name, default_kind, default_expression FROM system.columns WHERE database = ? AND table = 't' AND name != 'id' ORDER BY name", db)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var name, kind, expr string
			if err := rows.Scan(&name, &kind, &expr); err != nil {
				t.Fatal(err)
			}
			got = append(got, name+" "+kind+" "+expr)
		}
		rows.Close()
		t.Logf("defaults: %q", got)
		for i, want := range []string{"label DEFAULT 'it\\'s'", "since DEFAULT toDateTime", "tier DEFAULT "} {
			if i >= len(got) || !strings.HasPrefix(strings.ReplaceAll(got[i], "CAST(", ""), want) {
				t.Errorf("column defaults %q; want one starting %q", got, want)
			}
		}
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id < 50 AND tier = 7 AND label = 'it\\'s' AND toUnixTimestamp(since) = 1577934245", 50,
			"%d of the 50 rows from before the columns read their defaults; want 50")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE id >= 50 AND tier = 9 AND label = 'new' AND toUnixTimestamp(since) = 1715949296", 50,
			"%d of the 50 rows with the fields read their values; want 50")
		stopClean(t, done, stop)
	})
}

// schema.create: if_missing gives each column the default its field's
// schema declares.
func TestCreateCarriesSchemaDefault(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch, db, topic := s.Conn(t), s.NewDatabase(t), testenv.NewTopic(t, 1)
		v2 := registerAvro(t, testenv.UniqueName(t, "create-default")+"-value", defaultAvroV2)
		var recs [][]byte
		for i := 0; i < 20; i++ {
			recs = append(recs, avroValue(t, v2, defaultAvroV2, map[string]any{"id": int64(i), "tier": 9, "label": "x",
				"since": time.UnixMilli(1715949296000).UTC()}))
		}
		produceBytes(t, topic, recs...)
		cfg := evolveConfigFormat(t, s, topic, db, "avro", createSchema)
		done, stop := startPipeline(t, cfg)
		waitCommitted(t, done, cfg.Kafka.Group, topic, 20)
		stopClean(t, done, stop)
		expectCount(t, ch, "SELECT count() FROM system.columns WHERE database = '"+db+"' AND table = 't' AND default_kind = 'DEFAULT' AND "+
			"((name = 'tier' AND default_expression IN ('7', 'CAST(7, \\'Int32\\')')) OR (name = 'label' AND default_expression = '\\'it\\\\\\'s\\''))", 2,
			"%d of tier and label carry their schema's default; want 2")
		expectCount(t, ch, "SELECT count() FROM "+db+".t WHERE tier = 9 AND label = 'x'", 20, "%d of 20 rows hold their values; want 20")
	})
}

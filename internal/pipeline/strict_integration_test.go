//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/metrics"
	"sink/internal/pipeline"
	"sink/internal/testenv"
)

// With the default policies, a tombstone in a json topic is skipped (even
// with errors.tolerance none) and every value written as a default because
// it was missing or null is counted per column in
// sink_defaults_applied_total.
func TestTombstonesSkippedAndDefaultsCounted(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		ctx := context.Background()
		if err := ch.Exec(ctx, "CREATE TABLE "+db+".t (id UInt64, n String, v Nullable(Int32)) ENGINE = MergeTree ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		topic := testenv.NewTopic(t, 1)
		cl := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic))
		var recs []*kgo.Record
		for _, v := range []string{`{"id": 1, "n": "a", "v": 1}`, `{"id": 2}`, "", `{"id": 3, "n": null, "v": null}`, `{"n": "x"}`} {
			r := &kgo.Record{Value: []byte(v)}
			if v == "" {
				r.Value = nil // a tombstone
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms}
clickhouse: {addrs: [%q], database: %s}
batch: {max_wait: 200ms}
routes: [{topic: %q, table: t}]
http: {listen: ""}
`, testenv.UniqueName(t, "strict"), testenv.Kafka(t)[0], topic, s.Addr, db, topic))
		m := metrics.New(cfg.Kafka.Group)
		st := runUntilWith(t, cfg, ch, db+".t", 4, nil, pipeline.WithMetrics(m))
		if st.Skipped != 1 {
			t.Fatalf("skipped %d records; want the tombstone", st.Skipped)
		}
		if got := ids(t, ch, db+".t"); fmt.Sprint(got) != "[0 1 2 3]" {
			t.Fatalf("ids %v; want [0 1 2 3] (the record without id got 0)", got)
		}
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			if f.GetName() != metrics.DefaultsApplied {
				continue
			}
			for _, mt := range f.GetMetric() {
				l := map[string]string{}
				for _, lp := range mt.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				got[l["table"]+"/"+l["column"]+"/"+l["reason"]] = mt.GetCounter().GetValue()
			}
		}
		want := map[string]float64{db + ".t/n/missing": 1, db + ".t/n/null": 1, db + ".t/id/missing": 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s = %v; want %v (v is Nullable: never a default)", metrics.DefaultsApplied, got, want)
		}
	})
}

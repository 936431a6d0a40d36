//go:build integration

package main

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/registry"
	"sink/internal/testenv"
	"sink/tools/eventfmt"
	"sink/tools/gen"
)

// produceFramed against the stack: every event arrives once, framed with the
// id its subject holds in the registry, decodable with the registered schema
// to the id gen gave it, keyed by user id when skewed.
func TestProduceFramedAvro(t *testing.T) {
	brokers := testenv.Kafka(t)
	url := testenv.Registry(t)
	topic := testenv.NewTopic(t, 3)
	ctx := context.Background()
	const n = 500
	p := gen.Produce{Brokers: brokers, Topic: topic, Count: n, Partitions: 3,
		Events: gen.Config{Size: 180, Seed: 5, StartID: 1000, Skew: 1.2}}
	res, err := produceFramed(ctx, p, eventfmt.Avro, url, topic+"-value")
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != n || res.Bytes == 0 {
		t.Fatalf("result %+v", res)
	}

	rc, err := registry.New(config.SchemaRegistry{URLs: []string{url}}, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl := testenv.KafkaClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var ids []int
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(ids) < n {
		fs := cl.PollFetches(deadline)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", len(ids), err)
		}
		for _, r := range fs.Records() {
			id, payload, err := registry.ParseFrame(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			s, err := rc.Schema(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			schema, err := avro.ParseWithCache(s.Text, "", &avro.SchemaCache{})
			if err != nil {
				t.Fatal(err)
			}
			var ev map[string]any
			if err := avro.Unmarshal(schema, payload, &ev); err != nil {
				t.Fatal(err)
			}
			if strconv.FormatInt(ev["user_id"].(int64), 10) != string(r.Key) {
				t.Fatalf("key %q, user_id %v", r.Key, ev["user_id"])
			}
			ids = append(ids, int(ev["id"].(int64)))
		}
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != 1000+i {
			t.Fatalf("ids %v...; want 1000..%d once each", ids[:min(len(ids), 10)], 1000+n-1)
		}
	}
}

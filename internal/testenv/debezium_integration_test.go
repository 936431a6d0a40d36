//go:build integration

package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// readTopic consumes topic from its start until it has n records (failing the
// test after a minute) and returns them.
func readTopic(t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := testenv.KafkaClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d records after a minute, want %d", topic, len(recs), n)
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	return recs
}

// event is a Debezium change event's value, with or without the converter's
// {"schema", "payload"} wrapping.
type event struct {
	Op     string          `json:"op"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	Source struct {
		Table    string `json:"table"`
		Snapshot string `json:"snapshot"`
	} `json:"source"`
}

type item struct {
	ID   int     `json:"id"`
	Name *string `json:"name"`
	N    *string `json:"n"` // numeric(10,2): base64 of the unscaled value
}

func decodeItem(t *testing.T, raw json.RawMessage) *item {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var it item
	if err := json.Unmarshal(raw, &it); err != nil {
		t.Fatalf("row %s: %v", raw, err)
	}
	return &it
}

func str(s string) *string { return &s }

// TestDebeziumEvents drives PostgreSQL through a real Debezium connector and
// checks the events in Kafka: the snapshot (r), an insert (c), an update (u),
// a delete (d) and its tombstone, an insert made while the connector was
// stopped (delivered after Resume) and a TRUNCATE (t).
func TestDebeziumEvents(t *testing.T) {
	pg := testenv.Postgres(t)
	pg.Exec(t, "CREATE TABLE items (id integer PRIMARY KEY, name text, n numeric(10,2))")
	pg.Exec(t, "INSERT INTO items VALUES (1, 'one', 12.34)")

	c := testenv.Debezium(t, pg, testenv.DebeziumConfig{Tables: []string{"items"}})
	if got, want := c.Topic("items"), c.TopicPrefix+".public.items"; got != want {
		t.Fatalf("Topic = %q, want %q", got, want)
	}
	c.WaitSnapshot(t)
	pg.Exec(t, "INSERT INTO items VALUES (2, 'two', -0.5)")
	pg.Exec(t, "UPDATE items SET name = 'uno' WHERE id = 1")
	pg.Exec(t, "DELETE FROM items WHERE id = 2")
	c.WaitStreaming(t)

	c.Stop(t)
	pg.Exec(t, "INSERT INTO items VALUES (3, 'three', NULL)")
	c.Resume(t)
	c.WaitStreaming(t)
	pg.Exec(t, "TRUNCATE items")

	want := []struct {
		key       string // the key's payload
		op        string // "" for a tombstone
		before    *item
		after     *item
		snapshot  bool
		tombstone bool
	}{
		{key: `{"id":1}`, op: "r", after: &item{1, str("one"), str("BNI=")}, snapshot: true}, // 1234
		{key: `{"id":2}`, op: "c", after: &item{2, str("two"), str("zg==")}},                 // -50
		{key: `{"id":1}`, op: "u", after: &item{1, str("uno"), str("BNI=")}},                 // DEFAULT identity: no before
		{key: `{"id":2}`, op: "d", before: &item{ID: 2}},                                     // DEFAULT identity: key only
		{key: `{"id":2}`, tombstone: true},                                                   //
		{key: `{"id":3}`, op: "c", after: &item{3, str("three"), nil}},                       //
		{key: "", op: "t"}, // no key
	}
	recs := readTopic(t, c.Topic("items"), len(want))
	for i, w := range want {
		r := recs[i]
		if w.key == "" {
			if r.Key != nil {
				t.Errorf("record %d: key %s, want none", i, r.Key)
			}
		} else {
			var k struct {
				Schema  json.RawMessage `json:"schema"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(r.Key, &k); err != nil || string(k.Payload) != w.key || len(k.Schema) == 0 {
				t.Errorf("record %d: key %s, want schema and payload %s (%v)", i, r.Key, w.key, err)
			}
		}
		if w.tombstone {
			if r.Value != nil {
				t.Errorf("record %d: value %s, want a tombstone", i, r.Value)
			}
			continue
		}
		var v struct {
			Schema  json.RawMessage `json:"schema"`
			Payload event           `json:"payload"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %d: %v: %s", i, err, r.Value)
		}
		e := v.Payload
		if len(v.Schema) == 0 || e.Op != w.op || e.Source.Table != "items" || (e.Source.Snapshot != "false") != w.snapshot {
			t.Errorf("record %d: schema %d bytes, op %q, table %q, snapshot %q; want a schema, op %q, table items, snapshot %v",
				i, len(v.Schema), e.Op, e.Source.Table, e.Source.Snapshot, w.op, w.snapshot)
		}
		for _, side := range []struct {
			name string
			raw  json.RawMessage
			want *item
		}{{"before", e.Before, w.before}, {"after", e.After, w.after}} {
			got := decodeItem(t, side.raw)
			switch {
			case (got == nil) != (side.want == nil):
				t.Errorf("record %d: %s = %s, want %+v", i, side.name, side.raw, side.want)
			case got == nil:
			case got.ID != side.want.ID || !eqStr(got.Name, side.want.Name) || !eqStr(got.N, side.want.N):
				t.Errorf("record %d: %s = %s, want %+v", i, side.name, side.raw, *side.want)
			}
		}
	}
}

func eqStr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestDebeziumSchemasDisabled checks that SchemasDisabled gives the bare
// payload for key and value, and that Extra reaches the connector (here a
// snapshot that captures no data, so only the streamed insert arrives).
func TestDebeziumSchemasDisabled(t *testing.T) {
	pg := testenv.Postgres(t)
	pg.Exec(t, "CREATE TABLE pairs (a integer, b text, v text, PRIMARY KEY (a, b)); INSERT INTO pairs VALUES (0, 'old', 'x')")
	c := testenv.Debezium(t, pg, testenv.DebeziumConfig{
		Tables:          []string{"public.pairs"},
		SchemasDisabled: true,
		Extra:           map[string]string{"snapshot.mode": "no_data"},
	})
	c.WaitStreaming(t)
	pg.Exec(t, "INSERT INTO pairs VALUES ($1, $2, $3)", 1, "one", "v1")
	recs := readTopic(t, c.Topic("pairs"), 1)
	if got, want := string(recs[0].Key), `{"a":1,"b":"one"}`; got != want {
		t.Errorf("key %s, want %s", got, want)
	}
	var e event
	if err := json.Unmarshal(recs[0].Value, &e); err != nil {
		t.Fatal(err)
	}
	if e.Op != "c" || string(e.After) != `{"a":1,"b":"one","v":"v1"}` || string(e.Before) != "null" {
		t.Errorf("value %s: want op c, after {a:1,b:one,v:v1}, before null, no schema", recs[0].Value)
	}
}

// TestDebeziumParallel runs several connectors at once, as parallel tests
// (and packages) do on the one worker: each comes and goes while the others
// stream, and each Restart rebalances the worker under the others.
func TestDebeziumParallel(t *testing.T) {
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			pg := testenv.Postgres(t)
			pg.Exec(t, "CREATE TABLE items (id integer PRIMARY KEY); INSERT INTO items VALUES (1)")
			c := testenv.Debezium(t, pg, testenv.DebeziumConfig{Tables: []string{"items"}, SchemasDisabled: true})
			c.WaitStreaming(t)
			pg.Exec(t, "INSERT INTO items VALUES (2)")
			c.Restart(t)
			pg.Exec(t, "INSERT INTO items VALUES (3)")
			recs := readTopic(t, c.Topic("items"), 3)
			for j, r := range recs {
				if want := fmt.Sprintf(`{"id":%d}`, j+1); string(r.Key) != want {
					t.Errorf("record %d: key %s, want %s", j, r.Key, want)
				}
			}
		})
	}
}

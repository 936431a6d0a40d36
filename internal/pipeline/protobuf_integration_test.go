//go:build integration

package pipeline_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"sink/config"
	"sink/internal/registry"
	"sink/internal/testenv"
	"sink/tools/eventfmt"
)

// shopMoney is imported by shopProto through a registry reference.
const shopMoney = `syntax = "proto3";
package shop.common;
message Money { int64 units = 1; int32 cents = 2; }
`

// shopProto has the mappings the protobuf format documents and a second
// message type; %s is where version 2 adds a field.
const shopProto = `syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "shop/money.proto";

enum Kind { KIND_UNSPECIFIED = 0; CLICK = 1; VIEW = 2; }

message Event {
  message Inner { string a = 1; int32 b = 2; }
  uint64 id = 1;
  int32 i32 = 2;
  sint64 s64 = 3;
  bool flag = 4;
  double db = 5;
  string name = 6;
  bytes raw = 7;
  Kind kind = 8;
  repeated int64 nums = 9;
  repeated string tags = 10;
  map<string, int64> counts = 11;
  Inner inner = 12;
  oneof choice { string text = 13; int64 number = 14; }
  google.protobuf.Timestamp ts = 15;
  google.protobuf.Duration dur = 16;
  google.protobuf.Int64Value maybe = 17;
  google.protobuf.Struct attrs = 18;
  shop.common.Money price = 19;
  repeated Inner items = 20;%s
}

message Other { uint64 id = 1; string note = 2; }
`

// shopSchemas registers the two versions of shopProto (and the file it
// imports) under subjects of topic, and returns their ids.
func shopSchemas(t *testing.T, url, topic string) (v1, v2 int) {
	t.Helper()
	rc, err := registry.New(config.SchemaRegistry{URLs: []string{url}}, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	common := topic + "-money"
	if _, err := rc.Register(ctx, common, sr.TypeProtobuf, shopMoney); err != nil {
		t.Fatal(err)
	}
	ref := sr.SchemaReference{Name: "shop/money.proto", Subject: common, Version: 1}
	if v1, err = rc.Register(ctx, topic+"-value", sr.TypeProtobuf, fmt.Sprintf(shopProto, ""), ref); err != nil {
		t.Fatal(err)
	}
	if v2, err = rc.Register(ctx, topic+"-value", sr.TypeProtobuf, fmt.Sprintf(shopProto, "\n  string added = 21;"), ref); err != nil {
		t.Fatal(err)
	}
	if v1 == v2 {
		t.Fatalf("both versions registered as id %d", v1)
	}
	return v1, v2
}

// shopRecord encodes the protojson text js as message (shop.v1.Event or
// shop.v1.Other) of the schema version with schema id id, framed.
func shopRecord(t *testing.T, id int, version2 bool, message, js string) []byte {
	t.Helper()
	added := ""
	if version2 {
		added = "\n  string added = 21;"
	}
	md, err := eventfmt.CompileProto("shop/v1/events.proto", fmt.Sprintf(shopProto, added),
		map[string]string{"shop/money.proto": shopMoney}, message)
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	index := 0
	if message == "shop.v1.Other" {
		index = 1
	}
	return append(registry.AppendFrame(nil, id, true, index), b...)
}

// column returns toString-like text of expr for each row of table, by id.
func column(t *testing.T, ch driver.Conn, table, expr string) []string {
	t.Helper()
	rows, err := ch.Query(context.Background(), fmt.Sprintf("SELECT toString(%s) FROM %s ORDER BY id", expr, table))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// waitRows waits until table holds want rows, failing if done yields first.
func waitRows(t *testing.T, ch driver.Conn, table string, want uint64, done ...<-chan error) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for countRows(t, ch, table) < want {
		for _, d := range done {
			select {
			case err := <-d:
				t.Fatalf("connector stopped before %s had %d rows: %v", table, want, err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d rows after 90s, want %d", table, countRows(t, ch, table), want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestProtobufEndToEnd: registry-framed Protobuf records, two message
// types on one topic, into both servers. One connector reads shop.v1.Event
// into events (every mapping the server has a type for), another reads
// shop.v1.Other from the same topic into others; each skips the other's
// type. A bare JSON record and one framed with an id the registry does not
// have go to the dead-letter topic. A producer then registers version 2
// of the schema (a new field) and its records arrive, new field included,
// without a restart.
func TestProtobufEndToEnd(t *testing.T) {
	url := testenv.Registry(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		topic := testenv.NewTopic(t, 1)
		v1, v2 := shopSchemas(t, url, topic)
		cols := `id UInt64, i32 Int32, s64 Int64, flag UInt8, db Float64, name String, raw String,
			kind Enum8('KIND_UNSPECIFIED' = 0, 'CLICK' = 1, 'VIEW' = 2), kind_name String, kind_num UInt8,
			nums Array(Int64), tags Array(String), inner_a String, inner_b Nullable(Int32), choice Nullable(String),
			ts DateTime, dur Float64, maybe Nullable(Int64), attrs String, price_units Int64, items String, added String`
		mapping := `kind_name: kind, kind_num: kind, inner_a: inner.a, inner_b: inner.b, price_units: price.units`
		modern := s.AtLeast(22, 0)
		if modern {
			cols += `, counts Map(String, Int64), inner Tuple(a String, b Int32), ts64 DateTime64(3),
				attrs_json JSON, items_t Array(Tuple(a String, b Int32))`
			mapping += `, ts64: ts, attrs_json: attrs, items_t: items`
		}
		testenv.Exec(t, ch,
			"CREATE TABLE "+db+".events ("+cols+") ENGINE = MergeTree ORDER BY id",
			"CREATE TABLE "+db+".others (id UInt64, note String) ENGINE = MergeTree ORDER BY id")

		full := `{"id":"1","i32":-7,"s64":"-9000000000","flag":true,"db":0.25,"name":"héllo","raw":"AAEC",
			"kind":"VIEW","nums":["1","-2"],"tags":["a","b"],"counts":{"x":"1"},"inner":{"a":"in","b":5},
			"text":"chosen","ts":"2024-05-17T12:34:56.789Z","dur":"1.5s","maybe":"0",
			"attrs":{"k":"v","o":{"p":"q"}},"price":{"units":"12"},"items":[{"a":"x","b":1}]}`
		produceBytes(t, topic,
			shopRecord(t, v1, false, "shop.v1.Event", full),
			shopRecord(t, v1, false, "shop.v1.Other", `{"id":"10","note":"other type"}`),
			[]byte(`{"id":5}`), // not framed
			append(registry.AppendFrame(nil, 2_000_000_000, true), 0x08, 0x05), // an id the registry lacks
			shopRecord(t, v1, false, "shop.v1.Event", `{"id":"2"}`),
			shopRecord(t, v1, false, "shop.v1.Event", `{"id":"3","number":"42","inner":{}}`),
		)

		// Dead-letter topics made here rather than by errors.dlq_create,
		// whose describe right after the create can miss the new topic on
		// a busy broker.
		dlq, dlqOthers := testenv.NewTopic(t, 1), testenv.NewTopic(t, 1)
		conf := func(table, message, dlqTopic string) *config.Config {
			m := mapping
			if table == "others" {
				m = ""
			}
			return newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 300ms}
schema_registry: {urls: [%q]}
batch: {max_rows: 100, max_wait: 200ms}
routes: [{topic: %q, table: %s, format: protobuf, message: %s, columns: {%s}}]
errors: {tolerance: all, dlq_topic: %q}
shutdown_timeout: 3s
http: {listen: ""}
`, testenv.UniqueName(t, table), testenv.Kafka(t)[0], topic, s.Addr, db, url, topic, table, message, m, dlqTopic))
		}
		events, stopEvents := startPipeline(t, conf("events", "shop.v1.Event", dlq))
		others, stopOthers := startPipeline(t, conf("others", "shop.v1.Other", dlqOthers))
		waitRows(t, ch, db+".events", 3, events, others)
		waitRows(t, ch, db+".others", 1, events, others)

		// Version 2, while both run.
		produceBytes(t, topic, shopRecord(t, v2, true, "shop.v1.Event", `{"id":"4","added":"new","i32":4}`))
		waitRows(t, ch, db+".events", 4, events, others)
		for _, stop := range []context.CancelFunc{stopEvents, stopOthers} {
			stop()
		}
		for _, done := range []<-chan error{events, others} {
			if err := <-done; err != nil {
				t.Fatalf("clean stop: %v", err)
			}
		}

		check := func(expr string, want ...string) {
			t.Helper()
			if got := column(t, ch, db+".events", expr); !reflect.DeepEqual(got, want) {
				t.Errorf("%s = %q, want %q", expr, got, want)
			}
		}
		check("id", "1", "2", "3", "4")
		check("i32", "-7", "0", "0", "4")
		check("s64", "-9000000000", "0", "0", "0")
		check("flag", "1", "0", "0", "0")
		check("db", "0.25", "0", "0", "0")
		check("name", "héllo", "", "", "")
		check("hex(raw)", "000102", "", "", "")
		check("kind", "VIEW", "KIND_UNSPECIFIED", "KIND_UNSPECIFIED", "KIND_UNSPECIFIED")
		check("kind_name", "VIEW", "KIND_UNSPECIFIED", "KIND_UNSPECIFIED", "KIND_UNSPECIFIED")
		check("kind_num", "2", "0", "0", "0")
		check("nums", "[1,-2]", "[]", "[]", "[]")
		check("tags", "['a','b']", "[]", "[]", "[]")
		check("inner_a", "in", "", "", "")
		check("ifNull(toString(inner_b), 'NULL')", "5", "NULL", "0", "NULL")
		check("ifNull(choice, 'NULL')", "chosen", "NULL", "42", "NULL")
		check("toUnixTimestamp(ts)", "1715949296", "0", "0", "0")
		check("dur", "1.5", "0", "0", "0")
		check("ifNull(toString(maybe), 'NULL')", "0", "NULL", "NULL", "NULL")
		check("attrs", `{"k":"v","o":{"p":"q"}}`, "", "", "")
		check("price_units", "12", "0", "0", "0")
		check("items", `[{"a":"x","b":1}]`, "[]", "[]", "[]")
		check("added", "", "", "", "new")
		if modern {
			check("counts", "{'x':1}", "{}", "{}", "{}")
			check("inner", "('in',5)", "('',0)", "('',0)", "('',0)")
			check("toUnixTimestamp64Milli(ts64)", "1715949296789", "0", "0", "0")
			check("attrs_json", `{"k":"v","o":{"p":"q"}}`, "{}", "{}", "{}")
			check("items_t", "[('x',1)]", "[]", "[]", "[]")
		}
		if got := column(t, ch, db+".others", "(id, note)"); !reflect.DeepEqual(got, []string{"(10,'other type')"}) {
			t.Errorf("others = %q", got)
		}

		// The dead-letter topic: the two bad records, with the reason.
		recs := dlqRecords(t, dlq)
		var reasons []string
		for _, r := range recs {
			why, _ := header(r, "sink.error")
			reasons = append(reasons, why)
		}
		if len(recs) != 2 || !strings.Contains(reasons[0], "magic byte") || !strings.Contains(reasons[1], "does not exist") {
			t.Errorf("dead letters: %q, want the unframed record and the unknown id", reasons)
		}
	})
}

// TestJSONSchemaEndToEnd: registry-framed JSON into both servers, read
// like the json format; a record framed with an id the registry lacks,
// one framed with a Protobuf schema's id and an unframed one go to the
// dead-letter topic.
func TestJSONSchemaEndToEnd(t *testing.T) {
	url := testenv.Registry(t)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		topic := testenv.NewTopic(t, 1)
		rc, err := registry.New(config.SchemaRegistry{URLs: []string{url}}, registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		id, err := rc.Register(context.Background(), topic+"-value", sr.TypeJSON, eventfmt.JSONSchemaText)
		if err != nil {
			t.Fatal(err)
		}
		protoID, _ := shopSchemas(t, url, topic+"-proto")
		testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, user_id UInt64, event_type String, cost Decimal(18, 2), ts DateTime) ENGINE = MergeTree ORDER BY id")
		framed := func(id int, js string) []byte { return append(registry.AppendFrame(nil, id, false), js...) }
		event := func(n int) string {
			return fmt.Sprintf(`{"id":%d,"user_id":%d,"ts":"2024-05-17 12:00:%02d","event_type":"click","channel":"web","cost":%d.25,"payload":"p"}`, n, 100+n, n, n)
		}
		produceBytes(t, topic,
			framed(id, event(1)),
			framed(2_000_000_000, event(2)),
			framed(protoID, event(3)),
			[]byte(event(4)),
			framed(id, event(5)),
		)
		dlq := testenv.NewTopic(t, 1)
		cfg := newConfig(t, fmt.Sprintf(`
name: %s
kafka: {brokers: [%q], topics: [%q], fetch_max_wait: 100ms, commit_interval: 200ms}
clickhouse: {addrs: [%q], database: %s, retry_initial: 50ms, retry_max: 300ms}
schema_registry: {urls: [%q]}
batch: {max_rows: 100, max_wait: 200ms}
routes: [{topic: %q, table: events, format: json-schema}]
errors: {tolerance: all, dlq_topic: %q}
shutdown_timeout: 3s
http: {listen: ""}
`, testenv.UniqueName(t, "jsonschema"), testenv.Kafka(t)[0], topic, s.Addr, db, url, topic, dlq))
		runUntilCommitted(t, cfg, topic, 5)
		got := column(t, ch, db+".events", "(id, user_id, event_type, cost, toUnixTimestamp(ts))")
		want := []string{"(1,101,'click',1.25,1715947201)", "(5,105,'click',5.25,1715947205)"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("rows %q, want %q", got, want)
		}
		var reasons []string
		for _, r := range dlqRecords(t, dlq) {
			why, _ := header(r, "sink.error")
			reasons = append(reasons, why)
		}
		if len(reasons) != 3 || !strings.Contains(reasons[0], "does not exist") ||
			!strings.Contains(reasons[1], "not JSON Schema") || !strings.Contains(reasons[2], "magic byte") {
			t.Errorf("dead letters: %q", reasons)
		}
	})
}

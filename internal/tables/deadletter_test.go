package tables

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/decode"
	"sink/internal/route"
)

// testConfig is a one-route connector into db.t, with extra appended to
// its YAML.
func testConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`
name: unit
kafka:
  topics: [events]
clickhouse:
  database: db
routes:
  - topic: events
    table: t
`+extra), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestUnitDLQTableEnvelope: every byte value, in the value, a key, a
// header name and value, comes out of the dead-letter plan unchanged.
func TestUnitDLQTableEnvelope(t *testing.T) {
	cols := DLQTableSpec("db", "d", chschema.ServerTypes{}, 0, "").Columns
	plan, err := decode.Compile(route.JSON, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, v := range [][]byte{all, nil, []byte(`"`), []byte(`\u0041`), []byte("\x00")} {
		r := &kgo.Record{Topic: "t", Offset: 7, Key: all, Value: v, Headers: []kgo.RecordHeader{{Key: string(all), Value: v}}}
		env := appendEnvelope(nil, r, errors.New("bad \xff reason"), "db.x", 1<<20, time.Unix(100, 0))
		blk := plan.NewBlock()
		envRec := &kgo.Record{Topic: r.Topic, Offset: r.Offset, Key: r.Key, Value: env}
		if err := plan.Append(blk, envRec); err != nil {
			t.Fatalf("value %q: %v", v, err)
		}
		got := map[string]any{}
		for i, c := range blk.Columns() {
			got[c.Name] = blk.ColumnData(i)
		}
		if s := got[ColValue].([]string)[0]; s != string(v) {
			t.Errorf("value %q came out as %q", v, s)
		}
		if s := got["_key"].([]string)[0]; s != string(all) {
			t.Errorf("key came out as %q", s)
		}
		if h := got[ColHeaderKeys].([][]string)[0]; len(h) != 1 || h[0] != string(all) {
			t.Errorf("header keys %q", h)
		}
		if h := got[ColHeaderValues].([][]string)[0]; len(h) != 1 || h[0] != string(v) {
			t.Errorf("header values %q, want %q", h, v)
		}
		if n := got[ColValueLength].([]uint64)[0]; n != uint64(len(v)) {
			t.Errorf("value_length %d, want %d", n, len(v))
		}
		if e := got[ColError].([]string)[0]; !strings.HasPrefix(e, "bad ") || !strings.HasSuffix(e, " reason") {
			t.Errorf("error %q", e)
		}
	}
}

// TestDLQTableSpecDDL: the statements the sink creates a dead-letter table
// with, on one server with a TTL and on a cluster.
func TestDLQTableSpecDDL(t *testing.T) {
	ddl, err := chtable.CreateTableDDL(DLQTableSpec("db", "dead", chschema.ServerTypes{DateTime64: true}, 720*time.Hour, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(ddl) != 1 || !strings.Contains(ddl[0], "ENGINE = MergeTree() PARTITION BY toYYYYMM(dead_lettered_at) ORDER BY (target_table, _topic, _partition, _offset) TTL dead_lettered_at + INTERVAL 2592000 SECOND") ||
		!strings.Contains(ddl[0], "`_timestamp` DateTime64(3)") {
		t.Errorf("DDL %q", ddl)
	}
	ddl, err = chtable.CreateTableDDL(DLQTableSpec("db", "dead", chschema.ServerTypes{}, 0, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ddl) != 2 || !strings.Contains(ddl[0], "dead_local") || strings.Contains(ddl[0], "TTL") ||
		!strings.Contains(ddl[1], "Distributed('c1', 'db', 'dead_local', rand())") || !strings.Contains(ddl[0], "`_timestamp` DateTime,") {
		t.Errorf("cluster DDL %q", ddl)
	}
}

// TestDLQSpecTTLNeedsServer: a TTL on a server without TTL (before 19.6)
// is refused with the fix; without a TTL, or on a newer server, the spec
// is made.
func TestDLQSpecTTLNeedsServer(t *testing.T) {
	v18, _ := chschema.ParseVersion("18.16.1")
	v26, _ := chschema.ParseVersion("26.9.2.1")
	for _, tc := range []struct {
		v    chschema.Version
		ttl  time.Duration
		want string // "": the spec, with a TTL when ttl > 0
	}{
		{v18, time.Hour, "errors.dlq_table_ttl needs ClickHouse 19.6 or later (the server is 18.16.1)"},
		{v18, 0, ""},
		{v26, time.Hour, ""},
	} {
		cfg := testConfig(t, "errors: {tolerance: all, dlq_table: dead}\n")
		cfg.Errors.DLQTableTTL = tc.ttl
		spec, err := deadLetterSpec(cfg, "db", "dead", chschema.ServerInfo{Version: tc.v})
		switch {
		case tc.want != "":
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s ttl %s: %v, want %q", tc.v, tc.ttl, err, tc.want)
			}
		case err != nil:
			t.Errorf("%s ttl %s: %v", tc.v, tc.ttl, err)
		case (spec.TTL != "") != (tc.ttl > 0):
			t.Errorf("%s ttl %s: spec TTL %q", tc.v, tc.ttl, spec.TTL)
		}
	}
}

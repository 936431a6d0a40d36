package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// base is the smallest valid configuration; validation cases change one
// thing in it, mostly through environment overrides.
const base = `
name: t
kafka:
  topics: [orders]
routes:
  - topic: orders
    table: orders
`

// noCache drops the compiled regexps so Configs compare with DeepEqual.
func noCache(c *Config) *Config {
	c.Kafka.topicRE = nil
	for i := range c.Routes {
		c.Routes[i].re = nil
	}
	return c
}

func TestDefaults(t *testing.T) {
	got, err := Parse([]byte(base), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Written out in full, independently of defaults(), so that a changed
	// default is a deliberate edit in two places.
	want := &Config{
		Name: "t",
		Kafka: Kafka{
			Brokers:          []string{"127.0.0.1:9092"},
			Group:            "t",
			ClientID:         "sink-t",
			Topics:           []string{"orders"},
			StartOffset:      "earliest",
			GroupProtocol:    "classic",
			FetchMinBytes:    1 << 20,
			FetchMaxWait:     500 * time.Millisecond,
			CommitInterval:   5 * time.Second,
			SessionTimeout:   45 * time.Second,
			RebalanceTimeout: 60 * time.Second,
			RequestTimeout:   30 * time.Second,
		},
		ClickHouse: ClickHouse{
			Protocol:        "native",
			Addrs:           []string{"127.0.0.1:9000"},
			Database:        "default",
			Username:        "default",
			Compression:     "auto",
			DialTimeout:     10 * time.Second,
			QueryTimeout:    60 * time.Second,
			MaxInFlight:     2,
			ConnMaxLifetime: time.Minute,
			ShareBudget:     true,
			RetryInitial:    500 * time.Millisecond,
			RetryMax:        30 * time.Second,
			SchemaRefresh:   30 * time.Second,
			ReplicaOrder:    ReplicaRoundRobin,

			SchemaAgreementTimeout: 10 * time.Minute,
		},
		Batch: Batch{
			MaxRows:                100000,
			MaxBytes:               32 << 20,
			MaxWait:                5 * time.Second,
			IgnorePartitions:       true,
			BufferMemory:           256 << 20,
			Mode:                   BatchFixed,
			TargetInsertsPerMinute: 6,
			// The one latency knob's default in fixed mode: a batch
			// every 5s, plus what a record may wait in Kafka.
			MaxLatency:  5*time.Second + 500*time.Millisecond,
			derivedWait: true,
		},
		Routes:          []Route{{Topic: "orders", Table: "orders", Format: "json", Schema: RouteSchema{MaxNewColumnsPerHour: 10}}},
		Errors:          Errors{Tolerance: "none", OnMissing: "default", OnNull: "default", OnTombstone: "skip", Unrouted: "skip", DLQValueMax: 1 << 20},
		HTTP:            HTTP{Listen: "127.0.0.1:8080"},
		Log:             Log{Level: "info", Format: "json"},
		ShutdownTimeout: 30 * time.Second,
		Delivery:        DeliveryAtLeastOnce,
		Fanout:          FanoutFirst,
		SchemaRegistry:  SchemaRegistry{SubjectStrategy: SubjectAny},
	}
	if !reflect.DeepEqual(noCache(got), want) {
		t.Fatalf("defaults:\ngot:\n%s\nwant:\n%s", got, want)
	}

	// Null sections (everything below commented out) keep the defaults.
	got2, err := Parse([]byte(base+"batch:\nclickhouse:\n  addrs:\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(noCache(got2), want) {
		t.Fatalf("null sections:\ngot:\n%s\nwant:\n%s", got2, want)
	}

	// Explicit group and client_id are not overwritten by the derived ones.
	got3, err := Parse([]byte(base+"log: {level: debug}\n"), []string{"SINK_KAFKA__GROUP=g", "SINK_KAFKA__CLIENT_ID=c"})
	if err != nil {
		t.Fatal(err)
	}
	if got3.Kafka.Group != "g" || got3.Kafka.ClientID != "c" || got3.Log.Level != "debug" || got3.Log.Format != "json" {
		t.Fatalf("got group %q client_id %q log %+v", got3.Kafka.Group, got3.Kafka.ClientID, got3.Log)
	}
}

// byteSizeCases are ParseByteSize's table: the input, its value, or a part
// of its error. FuzzParseByteSize starts from their inputs.
var byteSizeCases = []struct {
	in   string
	want ByteSize
	err  string
}{
	{"0", 0, ""},
	{"1048576", 1 << 20, ""},
	{"100B", 100, ""},
	{"512KiB", 512 << 10, ""},
	{"32MiB", 32 << 20, ""},
	{"1.5GiB", 3 << 29, ""},
	{"2TiB", 2 << 40, ""},
	{"1KB", 1000, ""},
	{"1MB", 1000000, ""},
	{"2GB", 2000000000, ""},
	{"1TB", 1000000000000, ""},
	{"32mib", 32 << 20, ""},
	{"32 MiB", 32 << 20, ""},
	{" 64Mi ", 64 << 20, ""},
	{"0.5KB", 500, ""},
	{"1.25KiB", 1280, ""},

	{"", 0, "empty"},
	{"MiB", 0, "want a number"},
	{"-1MiB", 0, "negative"},
	{"1.5B", 0, "whole number"},
	{"1.0001KB", 0, "whole number"},
	{"64M", 0, "ambiguous"},
	{"1k", 0, "ambiguous"},
	{"3furlongs", 0, `unknown unit "furlongs"`},
	{"1..5MiB", 0, "not a number"},
	{"1.2.3", 0, "not a number"},
	{"9223372036854775808", 0, "too large"},
	{"9000000TiB", 0, "too large"},
}

func TestParseByteSize(t *testing.T) {
	for _, c := range byteSizeCases {
		got, err := ParseByteSize(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("ParseByteSize(%q) = %v, %v; want error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Fatalf("ParseByteSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	f := func(b ByteSize, want string) {
		t.Helper()
		if got := b.String(); got != want {
			t.Fatalf("ByteSize(%d).String() = %q; want %q", int64(b), got, want)
		}
		back, err := ParseByteSize(want)
		if err != nil || back != b {
			t.Fatalf("ParseByteSize(%q) = %d, %v; want %d (round trip)", want, back, err, int64(b))
		}
	}
	f(0, "0B")
	f(1, "1B")
	f(1023, "1023B")
	f(KiB, "1KiB")
	f(1536, "1.5KiB")
	f(1280, "1.25KiB")
	f(32*MiB, "32MiB")
	f(3*GiB/2, "1.5GiB")
	f(2*TiB, "2TiB")
	f(1000000, "1000000B") // 1MB has no short exact IEC form
	f(1000001, "1000001B")

	var b ByteSize
	if err := b.UnmarshalText([]byte("2MiB")); err != nil || b != 2*MiB {
		t.Fatalf("UnmarshalText: %v, %v", b, err)
	}
	if err := b.UnmarshalText([]byte("2M")); err == nil {
		t.Fatal("UnmarshalText accepted an ambiguous unit")
	}
	if text, _ := b.MarshalText(); string(text) != "2MiB" {
		t.Fatalf("MarshalText = %s", text)
	}
}

func TestByteSizeAndDurationDecoding(t *testing.T) {
	f := func(yaml string, env []string, want ByteSize, wantErr string) {
		t.Helper()
		c, err := Parse([]byte(base+yaml), env)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("error = %v; want one containing %q", err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Batch.MaxBytes != want {
			t.Fatalf("batch.max_bytes = %v; want %v", c.Batch.MaxBytes, want)
		}
	}
	f("batch: {max_bytes: 1048576}", nil, MiB, "")
	f("batch: {max_bytes: 1e6}", nil, 1000000, "")
	f("batch: {max_bytes: 16MiB}", nil, 16*MiB, "")
	f(`batch: {max_bytes: "1048576"}`, nil, MiB, "")
	f("", []string{"SINK_BATCH__MAX_BYTES=64MiB"}, 64*MiB, "")
	f("", []string{"SINK_BATCH__MAX_BYTES=1000"}, 1000, "")
	f("batch: {max_bytes: 1.5}", nil, 0, "batch.max_bytes: invalid byte size 1.5")
	f("batch: {max_bytes: -1}", nil, 0, "batch.max_bytes: invalid byte size -1: must not be negative")
	f("batch: {max_bytes: 12 parsecs}", nil, 0, `batch.max_bytes: invalid byte size "12 parsecs"`)
	f("batch: {max_bytes: [1]}", nil, 0, "batch.max_bytes: invalid byte size")
	f("", []string{"SINK_BATCH__MAX_BYTES=lots"}, 0, `batch.max_bytes: invalid byte size "lots": want a number with an optional unit, e.g. "32MiB" (from SINK_BATCH__MAX_BYTES)`)

	// Durations take Go duration strings only: a bare number has no unit.
	f("batch: {max_wait: 5}", nil, 0, "batch.max_wait: invalid duration 5")
	f("batch: {max_wait: 5x}", nil, 0, `batch.max_wait: invalid duration "5x"`)
	f("", []string{"SINK_KAFKA__FETCH_MAX_WAIT=10"}, 0, `kafka.fetch_max_wait: invalid duration "10"`)
	f("batch: {max_wait: 1m30s}", nil, 32*MiB, "")
	f("batch: {max_wait: 250ms}", nil, 32*MiB, "")
}

func TestEnvOverrides(t *testing.T) {
	f := func(env []string, check func(c *Config) bool) {
		t.Helper()
		c, err := Parse([]byte(base+"clickhouse: {addrs: [x:9000]}\n"), env)
		if err != nil {
			t.Fatal(err)
		}
		if !check(c) {
			t.Fatalf("env %q not applied:\n%s", env, c)
		}
	}
	f([]string{"SINK_CLICKHOUSE__PASSWORD=s3cret"}, func(c *Config) bool { return c.ClickHouse.Password == "s3cret" })
	f(nil, func(c *Config) bool { return c.ClickHouse.Password == "" })
	f([]string{"SINK_KAFKA__SASL__MECHANISM=scram-sha-512", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD=p"}, func(c *Config) bool {
		return reflect.DeepEqual(c.Kafka.SASL, SASL{Mechanism: SASLScramSHA512, Username: "u", Password: "p"})
	})
	f([]string{"SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__SERVER_NAME=kafka.example", "SINK_CLICKHOUSE__TLS__ENABLED=true", "SINK_CLICKHOUSE__TLS__INSECURE_SKIP_VERIFY=true"}, func(c *Config) bool {
		return c.Kafka.TLS == TLS{Enabled: true, ServerName: "kafka.example"} && c.ClickHouse.TLS == TLS{Enabled: true, InsecureSkipVerify: true}
	})
	f([]string{"SINK_CLICKHOUSE__PASSWORD="}, func(c *Config) bool { return c.ClickHouse.Password == "" })
	f(nil, func(c *Config) bool { return c.ClickHouse.Protocol == ProtocolNative })
	f([]string{"SINK_CLICKHOUSE__PROTOCOL=http", "SINK_CLICKHOUSE__ADDRS=127.0.0.1:18123"}, func(c *Config) bool {
		return c.ClickHouse.Protocol == ProtocolHTTP && reflect.DeepEqual(c.ClickHouse.Addrs, []string{"127.0.0.1:18123"})
	})
	f([]string{"SINK_KAFKA__FETCH_MIN_BYTES=4MiB"}, func(c *Config) bool { return c.Kafka.FetchMinBytes == 4*MiB })
	f([]string{"SINK_BATCH__MAX_WAIT=2s"}, func(c *Config) bool { return c.Batch.MaxWait == 2*time.Second })
	f([]string{"SINK_BATCH__MAX_ROWS=5000"}, func(c *Config) bool { return c.Batch.MaxRows == 5000 })
	f([]string{"SINK_BATCH__IGNORE_PARTITIONS=false"}, func(c *Config) bool { return !c.Batch.IgnorePartitions })
	f([]string{"SINK_KAFKA__BROKERS=a:9092,b:9092"}, func(c *Config) bool {
		return reflect.DeepEqual(c.Kafka.Brokers, []string{"a:9092", "b:9092"})
	})
	f([]string{"SINK_KAFKA__BROKERS= a:9092 , b:9092,"}, func(c *Config) bool {
		return reflect.DeepEqual(c.Kafka.Brokers, []string{"a:9092", "b:9092"})
	})
	// A list from the environment replaces the file's list.
	f([]string{"SINK_CLICKHOUSE__ADDRS=y:9000"}, func(c *Config) bool {
		return reflect.DeepEqual(c.ClickHouse.Addrs, []string{"y:9000"})
	})
	f([]string{"SINK_NAME=other"}, func(c *Config) bool {
		return c.Name == "other" && c.Kafka.Group == "other" && c.Kafka.ClientID == "sink-other"
	})
	f([]string{"SINK_SHUTDOWN_TIMEOUT=1m"}, func(c *Config) bool { return c.ShutdownTimeout == time.Minute })
	f([]string{"SINK_HTTP__LISTEN="}, func(c *Config) bool { return c.HTTP.Listen == "" })
	f([]string{"SINK_CLICKHOUSE__SETTINGS__INSERT_QUORUM=2"}, func(c *Config) bool { return c.ClickHouse.Settings["insert_quorum"] == "2" })
	// Routes and shards: the whole list, as JSON (or YAML flow), replaces the file's.
	f([]string{`SINK_ROUTES=[{"topic": "orders", "table": "o2", "columns": {"id": "a.id"}, "max_latency": "2m"}]`}, func(c *Config) bool {
		r := c.Routes
		return len(r) == 1 && r[0].Table == "o2" && r[0].Columns["id"] == "a.id" && r[0].MaxLatency == 2*time.Minute && r[0].Format == "json"
	})
	f([]string{`SINK_CLICKHOUSE__SHARDS=[["a:9000", "b:9000"], [c:9000]]`, "SINK_CLICKHOUSE__CLUSTER=c"}, func(c *Config) bool {
		return reflect.DeepEqual(c.ClickHouse.Shards, [][]string{{"a:9000", "b:9000"}, {"c:9000"}})
	})
	// Not ours: other prefixes, the config path, test harness variables.
	f([]string{"PATH=/bin", "SINKER=1", "SINK_CONFIG=/etc/sink.yaml", "SINK_TEST_KAFKA=127.0.0.1:9092", "SINK_REQUIRE_STACK=1", "NOEQUALS"}, func(c *Config) bool { return true })
}

func TestEnvListWithFileTopics(t *testing.T) {
	// SINK_KAFKA__TOPICS adds a topic with no route: the env value is
	// really used, and validation sees it.
	_, err := Parse([]byte(base), []string{"SINK_KAFKA__TOPICS=orders,payments"})
	if err == nil || !strings.Contains(err.Error(), `kafka.topics: topic "payments" has no route`) {
		t.Fatalf("got %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	// f-style: yaml (appended to base when it does not set name), env, and a
	// substring of the error that names the key.
	f := func(yaml string, env []string, wantErr string) {
		t.Helper()
		doc := yaml
		if !strings.Contains(yaml, "name:") {
			doc = base + yaml
		}
		_, err := Parse([]byte(doc), env)
		if err == nil {
			t.Fatalf("no error; want %q", wantErr)
		}
		if !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, wantErr)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "config: ") {
				t.Fatalf("error line %q does not start with \"config: \"", line)
			}
		}
	}
	// Unknown keys, in the file and in the environment.
	f("batch: {max_row: 5}", nil, `config: unknown key "batch.max_row"`)
	f("kafka_brokers: [a]", nil, `config: unknown key "kafka_brokers"`)
	f("clickhouse: {pasword: x}", nil, `config: unknown key "clickhouse.pasword"`)
	f("name: t\nkafka: {topics: [a]}\nroutes: [{topic: a, table: a, colums: {}}]", nil, `config: unknown key "routes[0].colums"`)
	f("http: {listen: x, port: 1}", nil, `config: unknown key "http.port"`)
	f("", []string{"SINK_BATCH__MAX_ROW=5"}, `config: unknown key "batch.max_row" (from SINK_BATCH__MAX_ROW)`)
	f("", []string{"SINK_KAFKA_BROKERS=a:9092"}, `config: unknown key "kafka_brokers" (from SINK_KAFKA_BROKERS; nesting levels are separated by a double underscore`)
	f("", []string{"SINK_LOG__LEVEL__X=1"}, `config: log.level: expected a string, got a mapping (from SINK_LOG__LEVEL__X)`)
	f("", []string{"SINK_ROUTES__0__TABLE=x"}, "config: environment variable SINK_ROUTES__0__TABLE: routes cannot be set from the environment one element at a time; set SINK_ROUTES to the whole list as JSON")
	f("", []string{"SINK_CLICKHOUSE__SHARDS__0=x"}, "config: environment variable SINK_CLICKHOUSE__SHARDS__0: clickhouse.shards cannot be set from the environment one element at a time; set SINK_CLICKHOUSE__SHARDS")
	f("", []string{"SINK_ROUTES={topic: a}"}, `config: environment variable SINK_ROUTES: want a JSON list, e.g. [{"topic": "events", "table": "events"}]`)
	f("", []string{"SINK_ROUTES=[{"}, "config: environment variable SINK_ROUTES: not a JSON list: yaml:")
	f("", []string{`SINK_ROUTES=[{"topic": "orders", "tabel": "x"}]`}, `config: unknown key "routes[0].tabel" (from SINK_ROUTES)`)
	f("", []string{`SINK_CLICKHOUSE__SHARDS=[["a:9000"], {"b": 1}]`}, `config: clickhouse.shards[1]: expected a list, got map (from SINK_CLICKHOUSE__SHARDS)`)
	f("", []string{"SINK_KAFKA____BROKERS=x"}, "config: environment variable SINK_KAFKA____BROKERS: empty key level")
	f("", []string{"SINK_=x"}, "config: environment variable SINK_: empty key level")

	// Type errors name the key.
	f("clickhouse: {password: 123456}", nil, "config: clickhouse.password: expected a string, got int 123456")
	f("clickhouse: {max_in_flight: many}", nil, `config: clickhouse.max_in_flight: invalid integer "many"`)
	f("batch: {max_rows: 1.5}", nil, "config: batch.max_rows: invalid integer 1.5")
	f("batch: {ignore_partitions: yes}", nil, `config: batch.ignore_partitions: invalid boolean "yes"`)
	f("name: t\nkafka: {brokers: {a: b}}", nil, "config: kafka.brokers: expected a list")
	f("http: listen", nil, "config: http: expected a mapping")
	f("name: t\nroutes: orders", nil, "config: routes: expected a list")
	f("name: t\nroutes: [{topic: a, table: a, columns: {x: [1]}}]", nil, "config: routes[0].columns.x: expected a string")
	f("", []string{"SINK_BATCH__MAX_ROWS=1e5"}, `config: batch.max_rows: invalid integer "1e5" (from SINK_BATCH__MAX_ROWS)`)

	// Not YAML, or not a mapping.
	f("name: t\n\tkafka: x", nil, "config: parse YAML")
	f("name: t\n- a", nil, "config: parse YAML")
	f("name: t\nname: u", nil, "config: parse YAML")
}

func TestValidate(t *testing.T) {
	f := func(yaml string, env []string, wantErr string) {
		t.Helper()
		doc := yaml
		if !strings.Contains(yaml, "name:") {
			doc = base + yaml
		}
		_, err := Parse([]byte(doc), env)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatalf("no error; want %q", wantErr)
		}
		if !strings.Contains(err.Error(), "config: "+wantErr) {
			t.Fatalf("error:\n%v\nwant it to contain:\nconfig: %s", err, wantErr)
		}
	}
	env := func(kv ...string) []string { return kv }

	f("", nil, "")

	// name
	f("name: \"\"\nkafka: {topics: [a]}\nroutes: [{topic: a, table: a}]", nil, "name: required")
	f("name: \"my app\"\nkafka: {topics: [a]}\nroutes: [{topic: a, table: a}]", nil, `name: "my app" must be 1-200 letters`)
	f("", env("SINK_NAME=-x"), `name: "-x" must be`)
	f("", env("SINK_NAME="+strings.Repeat("a", 201)), "name: ")
	f("", env("SINK_NAME=a.b_c-9"), "")

	// kafka
	f("", env("SINK_KAFKA__BROKERS="), "kafka.brokers: required")
	f("", env("SINK_KAFKA__BROKERS=a:9092,nohost"), `kafka.brokers[1]: "nohost" is not host:port`)
	f("", env("SINK_KAFKA__BROKERS=:9092"), `kafka.brokers[0]: ":9092" has no host`)
	f("", env("SINK_KAFKA__BROKERS=a:http"), `kafka.brokers[0]: "a:http" has an invalid port "http"`)
	f("", env("SINK_KAFKA__BROKERS=a:0"), `kafka.brokers[0]: "a:0" has an invalid port "0"`)
	f("", env("SINK_KAFKA__BROKERS=[::1]:9092,kafka:9092"), "")
	f("", env("SINK_KAFKA__CLIENT_ID="+strings.Repeat("c", 257)), "kafka.client_id: 257 bytes is longer than the maximum 256")
	f("name: t\nkafka: {topics: []}\nroutes: []", nil, "kafka.topics: set topics or topic_regex")
	f("name: t\nkafka: {topics: []}\nroutes: [{topic: a, table: a}]", nil, "") // the routes' topics
	f("name: t\nkafka: {topics: [a, b, a]}\nroutes: [{topic: a, table: a}, {topic: b, table: b}]", nil, `kafka.topics[2]: "a" is already kafka.topics[0]`)
	f("name: t\nkafka: {topics: [a b]}\nroutes: [{topic: a b, table: a}]", nil, `kafka.topics[0]: "a b" is not a valid topic name`)
	f("name: t\nkafka: {topic_regex: \"orders_(\"}\nroutes: [{topic_regex: a, table: a}]", nil, "kafka.topic_regex: invalid regular expression: error parsing regexp: missing closing )")
	f("", env("SINK_KAFKA__START_OFFSET=beginning"), `kafka.start_offset: "beginning" is not one of earliest, latest`)
	f("", env("SINK_KAFKA__START_OFFSET=latest"), "")
	f("", env("SINK_KAFKA__GROUP_PROTOCOL=consumer"), "")
	f("", env("SINK_KAFKA__GROUP_PROTOCOL=classic"), "")
	f("", env("SINK_KAFKA__GROUP_PROTOCOL=kip848"), `kafka.group_protocol: "kip848" is not one of classic, consumer`)
	f("", env("SINK_KAFKA__GROUP_PROTOCOL="), `kafka.group_protocol: "" is not one of classic, consumer`)
	f("", env("SINK_KAFKA__FETCH_MIN_BYTES=0"), "kafka.fetch_min_bytes (0B) must be positive")
	// The deprecated fetch sizes: 0 is unset (the sink derives them).
	f("", env("SINK_KAFKA__FETCH_MAX_BYTES=0"), "")
	f("", env("SINK_KAFKA__MAX_PARTITION_FETCH_BYTES=0"), "")
	f("", env("SINK_KAFKA__FETCH_MAX_BYTES=2GiB"), "kafka.fetch_max_bytes (2GiB) must be at most 1GiB")
	f("", env("SINK_KAFKA__FETCH_MIN_BYTES=64MiB", "SINK_KAFKA__FETCH_MAX_BYTES=50MiB"), "kafka.fetch_min_bytes (64MiB) must be at most kafka.fetch_max_bytes (50MiB)")
	f("", env("SINK_KAFKA__FETCH_MIN_BYTES=64MiB"), "")
	f("", env("SINK_KAFKA__MAX_PARTITION_FETCH_BYTES=64MiB", "SINK_KAFKA__FETCH_MAX_BYTES=50MiB"), "kafka.max_partition_fetch_bytes (64MiB) must be at most kafka.fetch_max_bytes (50MiB)")
	f("", env("SINK_KAFKA__FETCH_MAX_WAIT=1ms"), "kafka.fetch_max_wait (1ms) must be at least 10ms")
	f("", env("SINK_KAFKA__FETCH_MAX_WAIT=2s", "SINK_KAFKA__REQUEST_TIMEOUT=1s"), "kafka.request_timeout (1s) must exceed kafka.fetch_max_wait (2s)")
	f("", env("SINK_KAFKA__FETCH_MAX_WAIT=2s", "SINK_KAFKA__REQUEST_TIMEOUT=2s"), "kafka.request_timeout (2s) must exceed kafka.fetch_max_wait (2s)")
	f("", env("SINK_KAFKA__REQUEST_TIMEOUT=0s"), "kafka.request_timeout (0s) must be at least 100ms")
	f("", env("SINK_KAFKA__SESSION_TIMEOUT=-1s"), "kafka.session_timeout (-1s) must be at least 100ms")
	f("", env("SINK_KAFKA__SESSION_TIMEOUT=1000h"), "kafka.session_timeout (1000h0m0s) must be at most")
	f("", env("SINK_KAFKA__REBALANCE_TIMEOUT=0s"), "kafka.rebalance_timeout (0s) must be at least 100ms")
	f("", env("SINK_KAFKA__COMMIT_INTERVAL=1ms"), "kafka.commit_interval (1ms) must be at least 100ms")

	// clickhouse
	f("", env("SINK_CLICKHOUSE__PROTOCOL=tcp"), `clickhouse.protocol: "tcp" is not one of native, http`)
	f("", env("SINK_CLICKHOUSE__PROTOCOL=HTTP"), `clickhouse.protocol: "HTTP" is not one of native, http`)
	f("", env("SINK_CLICKHOUSE__PROTOCOL="), `clickhouse.protocol: "" is not one of native, http`)
	f("clickhouse: {protocol: grpc}", nil, `clickhouse.protocol: "grpc" is not one of native, http`)
	f("clickhouse: {protocol: http, addrs: [\"127.0.0.1:18123\"]}", nil, "")
	f("", env("SINK_CLICKHOUSE__PROTOCOL=native"), "")
	f("", env("SINK_CLICKHOUSE__ADDRS="), "clickhouse.addrs: required")
	f("", env("SINK_CLICKHOUSE__ADDRS=clickhouse"), `clickhouse.addrs[0]: "clickhouse" is not host:port`)
	f("", env("SINK_CLICKHOUSE__ADDRS=clickhouse:9000"), "")
	f("", env("SINK_CLICKHOUSE__DATABASE="), `clickhouse.database: "" is not a valid database name`)
	f("", env("SINK_CLICKHOUSE__DATABASE=a.b"), `clickhouse.database: "a.b" is not a valid database name`)
	f("", env("SINK_CLICKHOUSE__USERNAME="), "clickhouse.username: required")
	f("", env("SINK_CLICKHOUSE__COMPRESSION=gzip"), `clickhouse.compression: "gzip" is not one of auto, lz4, zstd, none`)
	f("", env("SINK_CLICKHOUSE__COMPRESSION=zstd"), "")
	f("", env("SINK_CLICKHOUSE__COMPRESSION=none"), "")
	f("clickhouse: {settings: {insert_quorum: 2, x: [1]}}", nil, "clickhouse.settings.x: must be a string, number or boolean, got []interface {}")
	f("clickhouse: {settings: {insert_quorum: 2, async_insert: false, s: a, f: 1.5}}", nil, "")
	f("", env("SINK_CLICKHOUSE__DIAL_TIMEOUT=0s"), "clickhouse.dial_timeout (0s) must be positive")
	f("", env("SINK_CLICKHOUSE__QUERY_TIMEOUT=-1s"), "clickhouse.query_timeout (-1s) must be positive")
	f("", env("SINK_CLICKHOUSE__CONN_MAX_LIFETIME=0s"), "clickhouse.conn_max_lifetime (0s) must be positive")
	f("", env("SINK_CLICKHOUSE__MAX_IN_FLIGHT=0"), "clickhouse.max_in_flight (0) must be at least 1")
	f("", env("SINK_CLICKHOUSE__RETRY_INITIAL=0s"), "clickhouse.retry_initial (0s) must be positive")
	f("", env("SINK_CLICKHOUSE__RETRY_MAX=0s"), "clickhouse.retry_max (0s) must be positive")
	f("", env("SINK_CLICKHOUSE__RETRY_INITIAL=1m"), "clickhouse.retry_initial (1m0s) must be at most clickhouse.retry_max (30s)")

	// batch
	f("", env("SINK_BATCH__MAX_ROWS=0"), "batch.max_rows (0) must be at least 1")
	f("", env("SINK_BATCH__MAX_BYTES=0"), "batch.max_bytes (0B) must be positive")
	f("", env("SINK_BATCH__MAX_WAIT=0s"), "batch.max_wait (0s) must be positive")
	f("", env("SINK_BATCH__BUFFER_MEMORY=16MiB"), "batch.buffer_memory (16MiB) must be at least batch.max_bytes (32MiB)")
	f("", env("SINK_BATCH__BUFFER_MEMORY=32MiB"), "")
	f("", env("SINK_BATCH__MODE=auto"), `batch.mode: "auto" is not one of fixed, adaptive`)
	f("", env("SINK_BATCH__MODE=adaptive"), "")
	f("", env("SINK_BATCH__TARGET_INSERTS_PER_MINUTE=0"), "batch.target_inserts_per_minute (0) must be above 0 and at most 600")
	f("", env("SINK_BATCH__TARGET_INSERTS_PER_MINUTE=601"), "batch.target_inserts_per_minute (601) must be above 0 and at most 600")
	f("", env("SINK_BATCH__TARGET_INSERTS_PER_MINUTE=x"), `batch.target_inserts_per_minute: invalid number "x" (from SINK_BATCH__TARGET_INSERTS_PER_MINUTE)`)
	f("", env("SINK_BATCH__TARGET_INSERTS_PER_MINUTE=1.5"), "")
	f("", env("SINK_BATCH__MAX_LATENCY=0s"), "batch.max_latency (0s) must be positive")
	// the budget of INSERTs per server, and a route's latency bound
	f("", env("SINK_CLICKHOUSE__MAX_INSERTS_PER_MINUTE=60"), "")
	f("", env("SINK_CLICKHOUSE__MAX_INSERTS_PER_MINUTE=0"), "")
	f("", env("SINK_CLICKHOUSE__MAX_INSERTS_PER_MINUTE=-1"), "clickhouse.max_inserts_per_minute (-1) must be 0 (no budget) or above 0 and at most 6000")
	f("", env("SINK_CLICKHOUSE__MAX_INSERTS_PER_MINUTE=6001"), "clickhouse.max_inserts_per_minute (6001) must be 0 (no budget) or above 0 and at most 6000")
	f("name: t\nkafka: {topics: [a]}\nroutes: [{topic: a, table: a, max_latency: 2m}]", nil, "")
	f("name: t\nkafka: {topics: [a]}\nroutes: [{topic: a, table: a, max_latency: 300ms}]", nil,
		"routes[0].max_latency (300ms) must exceed kafka.fetch_max_wait (500ms): a record can wait that long in Kafka before it reaches a batch")
	f("name: t\nkafka: {topics: [a]}\nroutes: [{topic: a, table: a, max_latency: -1s}]", nil, "routes[0].max_latency (-1s) must be 0 (the batch settings' bound) or positive")
	f("", env("SINK_BATCH__MODE=adaptive", "SINK_BATCH__MAX_LATENCY=400ms"), "batch.max_latency (400ms) must exceed kafka.fetch_max_wait (500ms): a record can wait that long in Kafka before it reaches a batch")

	// routes
	const kafkaAB = "name: t\nkafka: {topics: [a, b]}\n"
	f("name: t\nkafka: {topic_regex: x}\n", nil, "routes: at least one route is required")
	f("name: t\nkafka: {topics: [orders]}\n", nil, "") // one route per topic
	f("name: t\nkafka: {topics: [orders, b]}\nroutes: [{topic: orders}]", nil, `kafka.topics: topic "b" has no route`)
	f(kafkaAB+"routes: [{topic: a, table: a}]", nil, `kafka.topics: topic "b" has no route`)
	f(kafkaAB+"routes: [{topic_regex: \"[ab]\", table: a}]", nil, "")
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic: b}]", nil, "") // the table of the topic's name
	f("name: t\nkafka: {topics: [a, b.c]}\nroutes: [{topic: a, table: a}, {topic: b.c}]", nil,
		`routes[1].table: required: the topic "b.c" has a dot, so its name would read as database.table; name the table`)
	f(kafkaAB+"routes: [{topic_regex: \"[ab]\"}]", nil, `routes[0].table: required with topic_regex (e.g. "${topic}", the topic's name, or "${topic.last}")`)
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic: b, table: a.b.c}]", nil, `routes[1].table: "a.b.c" must be "table" or "database.table"`)
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic: b, table: .b}]", nil, `routes[1].table: "" is not a valid database name`)
	// Identifiers are always quoted in SQL, so quotes, backticks and
	// spaces are fine; a dot would make db.table ambiguous.
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic: b, table: \"my table\"}]", nil, "")
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic: b, table: \"we`ird\\\"na'me\"}]", nil, "")
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic: b, table: \"x\\ny\"}]", nil, `routes[1].table: "x\ny" is not a valid table name (not empty, no dots, no control characters)`)
	f(kafkaAB+"routes: [{topic: a, table: db.a}, {topic: b, table: b}]", nil, "")
	f(kafkaAB+"routes: [{topic: a, topic_regex: b, table: a}]", nil, "routes[0]: set topic or topic_regex, not both")
	f(kafkaAB+"routes: [{table: a}]", nil, "routes[0].topic: set topic or topic_regex")
	f(kafkaAB+"routes: [{topic: x, table: x}]", nil, `routes[0]: topic "x" is not consumed (not in kafka.topics)`)
	f("name: t\nkafka: {topic_regex: \"a.*\"}\nroutes: [{topic: x, table: x}]", nil, `routes[0]: topic "x" is not consumed (not in kafka.topics and does not match kafka.topic_regex)`)
	f("name: t\nkafka: {topic_regex: \"a.*\"}\nroutes: [{topic: a1, table: x}]", nil, "")
	// The regex is anchored: "a" does not consume "ba".
	f("name: t\nkafka: {topic_regex: a}\nroutes: [{topic: ba, table: x}]", nil, `routes[0]: topic "ba" is not consumed`)
	f(kafkaAB+"routes: [{topic: \"a/b\", table: x}]", nil, `routes[0].topic: "a/b" is not a valid topic name`)
	f(kafkaAB+"routes: [{topic_regex: \"(\", table: x}]", nil, "routes[0].topic_regex: invalid regular expression")
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic_regex: c.*, table: c}]", nil, `routes[1]: topic_regex "c.*" matches none of kafka.topics`)
	f(kafkaAB+"routes: [{topic: a, table: a, format: thrift}, {topic: b, table: b}]", nil, `routes[0].format: unsupported format "thrift" (supported: json, connect-json, debezium-json, avro, protobuf, json-schema, debezium-avro)`)
	f(kafkaAB+"routes: [{topic: a, table: a, format: debezium-json}, {topic: b, table: b}]", nil, "")
	// debezium-json: its sources, and the version and delete-marker columns.
	const dbz = kafkaAB + "routes: [{topic: b, table: b}, {topic: a, table: a, format: debezium-json, %s}]"
	dz := func(s string) string { return strings.Replace(dbz, "%s", s, 1) }
	f(dz("columns: {op: $op, t: $source.table, l: $source.a.b, ts: $ts_ms, v: $version, d: $deleted, k: $key, h: $header.x, id: id}"), nil, "")
	f(dz("version_column: ver, deleted_column: gone"), nil, "")
	f(dz("columns: {_version: $version, _deleted: $deleted}"), nil, "")
	f(dz("columns: {t: $source.}"), nil, `routes[1].columns.t: "$source." needs a field of the source block, e.g. $source.table`)
	f(dz("columns: {t: $source.a..b}"), nil, `routes[1].columns.t: "$source.a..b" needs a field of the source block`)
	f(dz("columns: {t: $sourc}"), nil, `routes[1].columns.t: unknown source "$sourc" (want a path into the row image such as a.b, or one of $topic, $partition, $offset, $timestamp, $key, $version, $deleted, $op, $ts_ms, $header.NAME, $source.PATH)`)
	f(dz("columns: {_version: id}"), nil, `routes[1].columns._version: is the version_column (it receives $version); remove it from columns or choose another version_column`)
	f(dz("deleted_column: x, columns: {x: $op}"), nil, `routes[1].columns.x: is the deleted_column (it receives $deleted)`)
	f(dz("version_column: x, deleted_column: x"), nil, `routes[1]: version_column and deleted_column are both "x"`)
	f(kafkaAB+"routes: [{topic: b, table: b}, {topic: a, table: a, version_column: v, deleted_column: d}]", nil,
		"routes[1].version_column: only for formats debezium-json and debezium-avro\nconfig: routes[1].deleted_column: only for formats debezium-json and debezium-avro")
	// Tables named after the topic.
	const srv = "name: t\nkafka: {topic_regex: 'srv\\..*'}\nroutes: [{topic_regex: '%s', table: '%s', format: debezium-json}]"
	tt := func(re, table string) string { return fmt.Sprintf(srv, re, table) }
	f(tt(`srv\.public\..*`, "${topic.last}"), nil, "")
	f(tt(`srv\.public\..*`, "cdc.${topic.last}"), nil, "")
	// A database part with a placeholder needs the databases it may be;
	// databases: is only for such a template.
	f(tt(`srv\.(\w+)\.(\w+)`, "${1}.${2}_v2"), nil, `routes[0].table: "${1}.${2}_v2" takes its database from the topic's name ("${1}"); write the database literally ("analytics.${topic.last}"), or list the databases it may write to in routes[0].databases`)
	f(strings.Replace(tt(`srv\.(\w+)\.(\w+)`, "${1}.${2}_v2"), "format:", "databases: [public, inventory], format:", 1), nil, "")
	f(strings.Replace(tt(`srv\.(\w+)\.(\w+)`, "${1}.${2}_v2"), "format:", "databases: [public, 'a.b'], format:", 1), nil, `routes[0].databases: "a.b" is not a valid database name`)
	f(strings.Replace(tt(`srv\..*`, "cdc.${topic.last}"), "format:", "databases: [cdc], format:", 1), nil, `routes[0].databases: only for a table template whose database part has a placeholder, and "cdc.${topic.last}" has none (its database is "cdc")`)
	f(strings.Replace(tt(`srv\..*`, "${topic}"), "format:", "databases: [cdc], format:", 1), nil, `routes[0].databases: only for a table template whose database part has a placeholder, and "${topic}" has none (its database is clickhouse.database)`)
	f(tt(`srv\..*`, "${topic}"), nil, "")
	f(tt(`srv\..*`, "${table}"), nil, `routes[0].table: unknown placeholder "${table}" (want ${topic}, ${topic.last}, or ${1}..${9} for topic_regex groups)`)
	f(tt(`srv\..*`, "${0}"), nil, `routes[0].table: unknown placeholder "${0}"`)
	f(tt(`srv\.(\w+)\..*`, "${2}"), nil, `routes[0].table: ${2}, but topic_regex "srv\\.(\\w+)\\..*" has 1 capture groups`)
	f(tt(`srv\..*`, "${topic.last"), nil, `routes[0].table: "${topic.last" has an unterminated ${`)
	f(tt(`srv\..*`, "a.${topic.last}.b"), nil, `routes[0].table: "a.${topic.last}.b" must be "table" or "database.table"`)
	f("name: t\nkafka: {topics: [srv.a]}\nroutes: [{topic: srv.a, table: '${1}'}]", nil, `routes[0].table: ${1} needs topic_regex with capture groups`)
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic: b, table: b}, {topic: a, table: default.a}]", nil, "routes[2]: same topic and table as routes[0]")
	f(kafkaAB+"routes: [{topic: a, table: a}, {topic: b, table: b}, {topic: a, table: other}]", nil,
		`routes[2]: never used: routes[0] has no when: and takes every record of topic "a" first (give routes[0] a when:, or set fanout: all to feed both)`)
	f(kafkaAB+"fanout: all\nroutes: [{topic: a, table: a}, {topic: b, table: b}, {topic: a, table: other}]", nil, "")
	f(kafkaAB+"routes: [{topic: a, table: a, when: {key: x}}, {topic: b, table: b}, {topic: a, table: other}]", nil, "")
	f(kafkaAB+"routes: [{topic: a, table: a, when: {key: x}}, {topic: b, table: b}, {topic: a, table: a, when: {key: y}}]", nil, "")
	f(kafkaAB+"routes: [{topic: a, table: a, when: {key: x}}, {topic: b, table: b}]", nil, "")
	// Dotted subjects survive the YAML loader (koanf splits keys on dots, but not inside lists).
	f(kafkaAB+"routes: [{topic: a, table: a, when: {header.type: order, field.kind: [a, 1]}}, {topic: b, table: b}]", nil, "")
	f(kafkaAB+"routes: [{topic: a, table: a, when: {kind: x}}, {topic: b, table: b}]", nil, `routes[0].when: unknown condition "kind" (want key, header.NAME or field.PATH)`)
	f(kafkaAB+"routes: [{topic: a, table: a, when: {field.kind: []}}, {topic: b, table: b}]", nil, `routes[0].when: field.kind: empty list: no record could match`)
	f(kafkaAB+"routes: [{topic: a, table: a, format: debezium-json, when: {field.op: c}}, {topic: b, table: b}]", nil, `routes[0].when: field.op: field conditions need format json`)
	f(kafkaAB+"fanout: some\nroutes: [{topic: a, table: a}, {topic: b, table: b}]", nil, `fanout: "some" is not one of first, all`)
	f(kafkaAB+"errors: {unrouted: dlq}\nroutes: [{topic: a, table: a}, {topic: b, table: b}]", nil, `errors.unrouted: dlq needs errors.dlq_topic`)
	f(kafkaAB+"delivery: exactly_once\nroutes: [{topic: a, table: a, when: {key: x}}, {topic: b, table: b}]", nil, `delivery: exactly_once does not support fan-out routing`)
	const cols = kafkaAB + "routes: [{topic: b, table: b}, {topic: a, table: a, columns: {%s}}]"
	col := func(s string) string { return strings.Replace(cols, "%s", s, 1) }
	f(col("id: id, t: $topic, p: $partition, o: $offset, ts: $timestamp, k: $key, h: $header.trace-id, n: a.b.c"), nil, "")
	f(col("id: $ofset"), nil, `routes[1].columns.id: unknown source "$ofset" (want a JSON path such as a.b.c, or one of $topic, $partition, $offset, $timestamp, $key, $header.NAME)`)
	f(col("h: $header."), nil, `routes[1].columns.h: "$header." needs a header name`)
	f(col("x: a..b"), nil, `routes[1].columns.x: JSON path "a..b" has an empty element`)
	f(col(`x: ""`), nil, "routes[1].columns.x: empty source")
	f(col(`"": a`), nil, "routes[1].columns: empty column name")
	f(col("op: $op"), nil, `routes[1].columns.op: unknown source "$op" (want a JSON path such as a.b.c, or one of $topic, $partition, $offset, $timestamp, $key, $header.NAME)`)

	// errors
	f("", env("SINK_ERRORS__TOLERANCE=some"), `errors.tolerance: "some" is not one of none, all`)
	f("", env("SINK_ERRORS__DLQ_CREATE=true"), "errors.dlq_create: set, but there is no errors.dlq_topic to create")
	f("", env("SINK_ERRORS__ON_MISSING=zero"), `errors.on_missing: "zero" is not one of default, bad_record`)
	f("", env("SINK_ERRORS__ON_NULL=bad_record"), "")
	f("", env("SINK_ERRORS__ON_TOMBSTONE=default"), `errors.on_tombstone: "default" is not one of skip, bad_record`)
	f("", env("SINK_CLICKHOUSE__SCHEMA_REFRESH=-1s"), "clickhouse.schema_refresh (-1s) must be 0 (off) or positive")
	f("", env("SINK_CLICKHOUSE__SCHEMA_REFRESH=0s"), "")
	f("", env("SINK_ERRORS__TOLERANCE=all"), "errors.dlq_topic: required when errors.tolerance is all")
	f("", env("SINK_ERRORS__TOLERANCE=all", "SINK_ERRORS__DLQ_TOPIC=orders_dlq"), "")
	f("", env("SINK_ERRORS__DLQ_TOPIC=orders_dlq"), "errors.dlq_topic: set, but errors.tolerance is none")
	f("", env("SINK_ERRORS__TOLERANCE=all", "SINK_ERRORS__DLQ_TOPIC=orders"), `errors.dlq_topic: "orders" is consumed by this sink`)
	f("", env("SINK_ERRORS__TOLERANCE=all", "SINK_ERRORS__DLQ_TOPIC=dl q"), `errors.dlq_topic: "dl q" is not a valid topic name`)

	// http, log, shutdown
	f("", env("SINK_HTTP__LISTEN=8080"), `http.listen: "8080" is not host:port (or "" to disable)`)
	f("", env("SINK_HTTP__LISTEN=:8080"), "")
	f("", env("SINK_HTTP__LISTEN=0.0.0.0:0"), "")
	f("", env("SINK_HTTP__LISTEN=:99999"), `http.listen: ":99999" has an invalid port "99999"`)
	// http.admin: loopback without a token, anything else with one from the environment
	token := "SINK_HTTP__ADMIN_TOKEN=0123456789abcdef"
	f("http: {admin: true}", nil, "")
	f("http: {admin: true, listen: \"[::1]:8080\"}", nil, "")
	f("http: {admin: true, listen: \"localhost:8080\"}", nil, "")
	f("http: {admin: true, listen: \"0.0.0.0:8080\"}", nil, `http.admin: true on "0.0.0.0:8080", which is not a loopback address, needs a bearer token: set SINK_HTTP__ADMIN_TOKEN (at least 16 characters)`)
	f("http: {admin: true, listen: \":8080\"}", nil, `http.admin: true on ":8080", which is not a loopback address, needs a bearer token`)
	f("http: {admin: true, listen: \"sink.example:8080\"}", nil, `http.admin: true on "sink.example:8080", which is not a loopback address, needs a bearer token`)
	f("http: {admin: true, listen: \"0.0.0.0:8080\"}", env(token), "")
	f("http: {admin: true, listen: \"0.0.0.0:8080\"}", env("SINK_HTTP__ADMIN_TOKEN=short"), "http.admin_token (SINK_HTTP__ADMIN_TOKEN): 5 characters is too short to be a secret; use at least 16")
	f("http: {admin: true, listen: \"\"}", nil, "http.admin: true needs http.listen")
	f("", env(token), "http.admin_token: set (SINK_HTTP__ADMIN_TOKEN), but http.admin is false, so the admin endpoints are off")
	f("http: {admin: true, admin_token: 0123456789abcdef}", nil, "http.admin_token: a token may not be written in the config file; set SINK_HTTP__ADMIN_TOKEN")
	// http.allowed_hosts: host names, "*." in front for any name below
	f("http: {allowed_hosts: [sink.ns.svc, \"*.svc.cluster.local\", sink-1, localhost.]}", nil, "")
	f("http: {allowed_hosts: [\"sink:8080\"]}", nil, `http.allowed_hosts: "sink:8080" is not a host name`)
	f("http: {allowed_hosts: [\"http://sink\"]}", nil, `http.allowed_hosts: "http://sink" is not a host name`)
	f("http: {allowed_hosts: [\"*\"]}", nil, `http.allowed_hosts: "*" is not a host name`)
	f("http: {allowed_hosts: [\"\"]}", nil, `http.allowed_hosts: "" is not a host name`)
	f("", env("SINK_LOG__LEVEL=trace"), `log.level: "trace" is not one of info, debug, warn, error`)
	f("", env("SINK_LOG__FORMAT=text"), `log.format: "text" is not one of json, console`)
	f("", env("SINK_LOG__LEVEL=warn", "SINK_LOG__FORMAT=console"), "")
	f("", env("SINK_SHUTDOWN_TIMEOUT=0s"), "shutdown_timeout (0s) must be positive")
	f("delivery: exactly-once", nil, `delivery: "exactly-once" is not one of at_least_once, exactly_once`)
}

func TestValidateReportsEverything(t *testing.T) {
	_, err := Parse([]byte(base), []string{
		"SINK_BATCH__MAX_ROWS=0",
		"SINK_LOG__LEVEL=loud",
		"SINK_KAFKA__FETCH_MAX_WAIT=2s",
		"SINK_KAFKA__REQUEST_TIMEOUT=1s",
	})
	if err == nil {
		t.Fatal("no error")
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 3 {
		t.Fatalf("want 3 joined errors, got %v", err)
	}
	for _, want := range []string{"batch.max_rows", "log.level", "kafka.request_timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%v\ndoes not mention %s", err, want)
		}
	}

	// Validate on its own: plain "key: message" lines, no prefix.
	c := &Config{}
	err = c.Validate()
	if err == nil {
		t.Fatal("empty Config validated")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) < 20 {
		t.Fatalf("want every zero option reported, got %d:\n%v", len(lines), err)
	}
	if lines[0] != "name: required (it is also the default consumer group)" {
		t.Fatalf("first line %q", lines[0])
	}
}

func TestExampleFiles(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %v; want at least example.yaml and local.yaml", files)
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			c, err := Load(file, nil)
			if err != nil {
				t.Fatal(err)
			}
			// What sink check prints must load back to the same Config.
			back, err := Parse([]byte(c.String()), nil)
			if err != nil {
				t.Fatalf("String() does not parse back: %v\n%s", err, c)
			}
			back.ClickHouse.Password = c.ClickHouse.Password
			if !reflect.DeepEqual(noCache(back), noCache(c)) {
				t.Fatalf("String() round trip differs:\n%s\nvs\n%s", back, c)
			}
		})
	}
}

// example.yaml documents the defaults, so it must set exactly them.
func TestExampleMatchesDefaults(t *testing.T) {
	c, err := Load("example.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.Name = c.Name
	want.Kafka.Topics = c.Kafka.Topics
	want.Routes = c.Routes
	want.fillDerived()
	if !reflect.DeepEqual(noCache(c), noCache(want)) {
		t.Fatalf("example.yaml differs from the defaults:\n%s\nwant:\n%s", c, want)
	}
}

func TestLocalYAML(t *testing.T) {
	c, err := Load("local.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Kafka.Brokers, []string{"127.0.0.1:9092"}) || !reflect.DeepEqual(c.ClickHouse.Addrs, []string{"127.0.0.1:9000"}) {
		t.Fatalf("local.yaml: brokers %v, addrs %v", c.Kafka.Brokers, c.ClickHouse.Addrs)
	}
	r, ok := c.RouteFor("demo_events")
	if !ok || r.Format != "json" {
		t.Fatalf("route for demo_events: %+v, %v", r, ok)
	}
	if db, table := c.TableFor(r); db != "default" || table != "demo_events" {
		t.Fatalf("TableFor = %s.%s", db, table)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sink.yaml")
	if err := os.WriteFile(path, []byte(base+"batch: {max_row: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, nil)
	if err == nil || err.Error() != `config: `+path+`: unknown key "batch.max_row"` {
		t.Fatalf("got %v", err)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"), nil)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("got %v", err)
	}
}

func TestHelpers(t *testing.T) {
	c, err := Parse([]byte(`
name: t
kafka:
  topics: [orders, payments]
  topic_regex: "audit_.*"
clickhouse:
  database: analytics
routes:
  - topic: orders
    table: orders
  - topic: payments
    table: payments
  - topic_regex: "audit_.*"
    table: audit
    columns: {id: id}
`), []string{"SINK_CLICKHOUSE__PASSWORD=hunter2", "SINK_KAFKA__SASL__MECHANISM=PLAIN", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD=swordfish"})
	if err != nil {
		t.Fatal(err)
	}

	// wantTable "": no route.
	f := func(topic string, wantTable string) {
		t.Helper()
		got := ""
		if r, ok := c.RouteFor(topic); ok {
			db, table := c.TableFor(r)
			got = db + "." + table
		}
		if got != wantTable {
			t.Fatalf("RouteFor(%q) -> %q; want %q", topic, got, wantTable)
		}
		if c.Consumes(topic) != (wantTable != "") {
			t.Fatalf("Consumes(%q) = %v", topic, c.Consumes(topic))
		}
	}
	f("orders", "analytics.orders")
	f("payments", "analytics.payments")
	f("audit_x", "analytics.audit")
	f("xaudit_x", "") // anchored
	f("ordersx", "")
	f("", "")

	// A hand-built Route (no Validate) still matches correctly.
	r := Route{TopicRegex: "a+"}
	if !r.Matches("aaa") || r.Matches("aab") || (Route{TopicRegex: "("}).Matches("(") {
		t.Fatal("uncompiled Route.Matches")
	}
	if (Route{}).Matches("") {
		t.Fatal("empty route matches")
	}

	want := []string{`^(?:audit_.*)$`, `^orders$`, `^payments$`}
	if got := c.Kafka.ConsumePatterns(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ConsumePatterns = %q; want %q", got, want)
	}
	if got := (Kafka{Topics: []string{"a.b"}}).ConsumePatterns(); got != nil {
		t.Fatalf("ConsumePatterns without regex = %q", got)
	}

	// Redacted masks the passwords and shares nothing with the original.
	red := c.Redacted()
	if red.ClickHouse.Password.Reveal() != "******" || c.ClickHouse.Password.Reveal() != "hunter2" {
		t.Fatalf("password: redacted %q, original %q", red.ClickHouse.Password.Reveal(), c.ClickHouse.Password.Reveal())
	}
	if red.Kafka.SASL.Password.Reveal() != "******" || c.Kafka.SASL.Password.Reveal() != "swordfish" {
		t.Fatalf("sasl password: redacted %q, original %q", red.Kafka.SASL.Password.Reveal(), c.Kafka.SASL.Password.Reveal())
	}
	red.Kafka.Brokers[0] = "changed"
	red.Routes[2].Columns["id"] = "changed"
	if c.Kafka.Brokers[0] == "changed" || c.Routes[2].Columns["id"] == "changed" {
		t.Fatal("Redacted shares memory with the original")
	}
	if !red.Routes[2].Matches("audit_1") {
		t.Fatal("Redacted lost the compiled route regex")
	}
	s := c.String()
	if strings.Contains(s, "hunter2") || strings.Contains(s, "swordfish") || strings.Count(s, "password: '******'") != 2 {
		t.Fatalf("String() leaks or lacks the masked password:\n%s", s)
	}
	if (&Config{}).Redacted().ClickHouse.Password != "" {
		t.Fatal("empty password must stay empty")
	}
}

func TestWarnings(t *testing.T) {
	f := func(batch, kafka string, want ...string) {
		t.Helper()
		cfg, err := Parse([]byte("name: x\nkafka: {topics: [a]"+kafka+"}\nbatch: {"+batch+"}\nroutes: [{topic: a, table: t}]\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.Warnings()
		if len(got) != len(want) {
			t.Fatalf("batch {%s} kafka {%s}: warnings %q, want %d", batch, kafka, got, len(want))
		}
		for i := range want {
			if !strings.Contains(got[i], want[i]) {
				t.Fatalf("warning %q does not name %q", got[i], want[i])
			}
		}
	}
	f("", "") // the defaults: 256MiB budget, 32MiB batches
	f("buffer_memory: 64MiB", "")
	f("buffer_memory: 48MiB, max_bytes: 32MiB", "", "batch.buffer_memory (48MiB)")
	// deprecated keys first, one line each
	f("buffer_memory: 48MiB, max_bytes: 32MiB", ", fetch_max_bytes: 16MiB", "kafka.fetch_max_bytes is deprecated", "batch.buffer_memory (48MiB)")
}

// A YAML syntax error names the line where the problem is.
func TestYAMLErrorNamesTheLine(t *testing.T) {
	f := func(doc string, line int) {
		t.Helper()
		_, err := Parse([]byte(doc), nil)
		if want := fmt.Sprintf("yaml: line %d:", line); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: %v; want %q", doc, err, want)
		}
	}
	f("name: x\nkafka:\n  topics: [a\nrouters: 1\n", 3)   // unclosed flow sequence
	f("name: x\nkafka: {a: 1\nb: 2\n", 2)                 // unclosed flow mapping
	f("name: x\nkafka:\n  brokers: a\n topics: b\n", 4)   // bad indentation
	f("name: x\n- a\n", 2)                                // a sequence item in a mapping
	f("name: x\nkafka:\n  brokers: a\n   topics: b\n", 4) // scanner error: already right
	f("name: x\n\tkafka: 1\n", 2)                         // tab
}

// TestWhenParsed: a route's when: reaches Conditions() parsed, dotted
// subjects included.
func TestWhenParsed(t *testing.T) {
	c, err := Parse([]byte("name: t\nkafka: {topics: [a]}\nfanout: all\nroutes:\n  - {topic: a, table: x, when: {header.type: order, field.kind: [a, 1]}}\n  - {topic: a, table: y, when: {field: kind, in: [b]}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{c.Routes[0].Conditions().String(), c.Routes[1].Conditions().String()}
	want := []string{"{field.kind: [a, 1], header.type: [order]}", "{field.kind: [b]}"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("conditions %q, want %q", got, want)
	}
	if c.Fanout != FanoutAll || len(c.RoutesFor("a")) != 2 {
		t.Fatalf("fanout %q, routes for a %v", c.Fanout, c.RoutesFor("a"))
	}
	// What sink check prints loads back to the same routes.
	back, err := Parse([]byte(c.String()), nil)
	if err != nil {
		t.Fatalf("String() does not parse back: %v\n%s", err, c)
	}
	if !reflect.DeepEqual(back.Routes, c.Routes) {
		t.Fatalf("routes differ after a round trip:\n%+v\n%+v", back.Routes, c.Routes)
	}
}

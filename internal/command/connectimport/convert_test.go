package connectimport

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sink/config"
)

// base is the least a ClickHouse sink connector needs.
func base(kv ...string) Connector {
	c := Connector{Name: "orders", Config: map[string]string{
		"connector.class": SinkClass,
		"topics":          "orders",
		"hostname":        "ch",
		"port":            "8123",
		"value.converter": jsonConverter, "value.converter.schemas.enable": "false",
	}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(c.Config, kv[i])
			continue
		}
		c.Config[kv[i]] = kv[i+1]
	}
	return c
}

// convert converts c and loads the YAML with the sink's own loader.
func convert(t *testing.T, c Connector, o Options) (*Result, *config.Config) {
	t.Helper()
	r, err := Convert(c, o)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(r.YAML, nil)
	if err != nil {
		t.Fatalf("the YAML does not load: %v\n%s", err, r.YAML)
	}
	if len(r.Fates) != len(c.Config) {
		t.Fatalf("%d fates for %d keys", len(r.Fates), len(c.Config))
	}
	for _, f := range r.Fates {
		if f.Kind == "" {
			t.Errorf("key %s has no fate", f.Key)
		}
	}
	return r, cfg
}

func fate(r *Result, key string) Fate {
	for _, f := range r.Fates {
		if f.Key == key {
			return f
		}
	}
	return Fate{}
}

// A fate check: key has kind, and its To or Why contains want.
type fateWant struct {
	key  string
	kind Kind
	want string
}

func checkFates(t *testing.T, r *Result, wants []fateWant) {
	t.Helper()
	for _, w := range wants {
		f := fate(r, w.key)
		if f.Kind != w.kind || !strings.Contains(f.To+" "+f.Why, w.want) {
			t.Errorf("%s: fate %q to %q (%s); want %q containing %q", w.key, f.Kind, f.To, f.Why, w.kind, w.want)
		}
	}
}

func TestIdentityAndGroup(t *testing.T) {
	r, cfg := convert(t, base(), Options{Brokers: []string{"k:9092"}})
	if cfg.Name != "orders" || cfg.Kafka.Group != "connect-orders" || cfg.Kafka.Brokers[0] != "k:9092" {
		t.Errorf("name %q group %q brokers %v", cfg.Name, cfg.Kafka.Group, cfg.Kafka.Brokers)
	}
	checkFates(t, r, []fateWant{{"connector.class", NotNeeded, "this sink is the connector"}})

	_, cfg = convert(t, base("consumer.override.group.id", "legacy-group"), Options{})
	if cfg.Kafka.Group != "legacy-group" {
		t.Errorf("group %q, want the override", cfg.Kafka.Group)
	}
	// A Connect name the sink cannot take keeps its group exactly.
	c := base()
	c.Name = "orders sink (prod)"
	_, cfg = convert(t, c, Options{})
	if cfg.Name != "orders-sink-prod" || cfg.Kafka.Group != "connect-orders sink (prod)" {
		t.Errorf("name %q group %q", cfg.Name, cfg.Kafka.Group)
	}
	if _, err := Convert(base("connector.class", "io.confluent.connect.jdbc.JdbcSinkConnector"), Options{}); err == nil {
		t.Error("a JDBC sink was converted")
	}
	if _, err := Convert(base("topics", "<unset>"), Options{}); err == nil {
		t.Error("a connector without topics was converted")
	}
}

func TestConnectionKeys(t *testing.T) {
	r, cfg := convert(t, base("ssl", "true", "port", "8443", "database", "db1", "username", "u", "password", "pw", "timeoutSeconds", "90"), Options{})
	ch := cfg.ClickHouse
	if ch.Protocol != "http" || ch.Addrs[0] != "ch:8443" || !ch.TLS.Enabled || ch.Database != "db1" || ch.Username != "u" || ch.QueryTimeout != 90*time.Second {
		t.Errorf("clickhouse %+v", ch)
	}
	if strings.Contains(string(r.YAML), "pw") {
		t.Error("the password is in the YAML")
	}
	checkFates(t, r, []fateWant{{"password", Carried, "SINK_CLICKHOUSE__PASSWORD"}})
	if f := fate(r, "password"); f.Value != "***" {
		t.Errorf("password shown as %q", f.Value)
	}

	r, cfg = convert(t, base(), Options{NativeAddr: "127.0.0.1:9000"})
	if cfg.ClickHouse.Protocol != "native" || cfg.ClickHouse.Addrs[0] != "127.0.0.1:9000" {
		t.Errorf("--native: %+v", cfg.ClickHouse)
	}
	checkFates(t, r, []fateWant{{"hostname", NotNeeded, "--native"}})

	r, cfg = convert(t, base("clickhouseSettings", "insert_quorum=2,wait_end_of_query=1, bad", "tableRefreshInterval", "15", "clusterName", "c1"), Options{})
	if cfg.ClickHouse.Settings["insert_quorum"] != "2" || len(cfg.ClickHouse.Settings) != 1 {
		t.Errorf("settings %v", cfg.ClickHouse.Settings)
	}
	if cfg.ClickHouse.SchemaRefresh != 15*time.Second || cfg.ClickHouse.Cluster != "c1" {
		t.Errorf("schema_refresh %s cluster %q", cfg.ClickHouse.SchemaRefresh, cfg.ClickHouse.Cluster)
	}
	checkFates(t, r, []fateWant{{"clickhouseSettings", Carried, "wait_end_of_query"}})
}

func TestRoutingKeys(t *testing.T) {
	_, cfg := convert(t, base("topics", "a,b", "topic2TableMap", "a=ta"), Options{})
	if len(cfg.Routes) != 2 || cfg.Routes[0].Table != "ta" || cfg.Routes[1].Table != "b" {
		t.Errorf("routes %+v", cfg.Routes)
	}
	_, cfg = convert(t, base("topics", "<unset>", "topics.regex", "ev-.*"), Options{})
	if cfg.Kafka.TopicRegex != "ev-.*" || cfg.Routes[0].TopicRegex != "ev-.*" || cfg.Routes[0].Table != "${topic}" {
		t.Errorf("regex routes %+v", cfg.Routes)
	}
	// RegexRouter renames the topic, and topic2TableMap maps the new name.
	_, cfg = convert(t, base("topics", "db1.public.orders,db1.public.items", "topic2TableMap", "items=order_items",
		"transforms", "r", "transforms.r.type", "org.apache.kafka.connect.transforms.RegexRouter",
		"transforms.r.regex", `([^.]+)\.([^.]+)\.([^.]+)`, "transforms.r.replacement", "$3"), Options{})
	if cfg.Routes[0].Table != "orders" || cfg.Routes[1].Table != "order_items" {
		t.Errorf("routed %+v", cfg.Routes)
	}
	// A table named with dots cannot be written as is: said, not guessed.
	r, cfg := convert(t, base("topics", "a.b.c"), Options{})
	if cfg.Routes[0].Table != "a_b_c" {
		t.Errorf("table %q", cfg.Routes[0].Table)
	}
	checkFates(t, r, []fateWant{{"topics", Unsupported, "a.b.c"}})
	_, cfg = convert(t, base("topics", "shop_orders", "enableDbTopicSplit", "true", "dbTopicSplitChar", "_"), Options{})
	if cfg.Routes[0].Table != "shop.orders" {
		t.Errorf("split table %q", cfg.Routes[0].Table)
	}
}

func TestBatchAndDeliveryKeys(t *testing.T) {
	r, cfg := convert(t, base("bufferCount", "20000", "bufferFlushTime", "1500", "ignorePartitionsWhenBatching", "false", "exactlyOnce", "true"), Options{})
	if cfg.Batch.MaxRows != 20000 || cfg.Batch.MaxWait != 1500*time.Millisecond || !cfg.Batch.IgnorePartitions || !cfg.ExactlyOnce() {
		t.Errorf("batch %+v delivery %s", cfg.Batch, cfg.Delivery)
	}
	checkFates(t, r, []fateWant{
		{"ignorePartitionsWhenBatching", NotNeeded, "across partitions"},
		{"exactlyOnce", Carried, "KeeperMap"},
	})
	_, cfg = convert(t, base("exactlyOnce", "true"), Options{Delivery: "at_least_once"})
	if cfg.ExactlyOnce() {
		t.Error("--delivery at_least_once ignored")
	}
}

func TestErrorKeys(t *testing.T) {
	for _, tc := range []struct {
		kv       []string
		tol, dlq string
		create   bool
	}{
		{[]string{"errors.tolerance", "none"}, "none", "", false},
		{[]string{"errors.tolerance", "all", "errors.deadletterqueue.topic.name", "bad"}, "all", "bad", false},
		{[]string{"errors.tolerance", "all"}, "all", "orders-dlq", true},
	} {
		r, cfg := convert(t, base(append(tc.kv, "errors.deadletterqueue.context.headers.enable", "true")...), Options{})
		if cfg.Errors.Tolerance != tc.tol || cfg.Errors.DLQTopic != tc.dlq || cfg.Errors.DLQCreate != tc.create {
			t.Errorf("%v: errors %+v", tc.kv, cfg.Errors)
		}
		checkFates(t, r, []fateWant{{"errors.deadletterqueue.context.headers.enable", NotNeeded, "sink.error"}})
	}
}

func TestConsumerOverrides(t *testing.T) {
	r, cfg := convert(t, base(
		"consumer.override.fetch.min.bytes", "2097152", "consumer.override.fetch.max.wait.ms", "1000",
		"consumer.override.max.poll.records", "9000", "consumer.override.request.timeout.ms", "45000",
		"consumer.override.max.partition.fetch.bytes", "4194304", "consumer.override.auto.offset.reset", "latest",
		"consumer.override.isolation.level", "read_uncommitted", "consumer.override.linger", "x",
		"consumer.max.poll.records", "5"), Options{})
	k := cfg.Kafka
	if k.FetchMinBytes != 2*config.MiB || k.FetchMaxWait != time.Second || k.RequestTimeout != 45*time.Second ||
		k.MaxPartitionFetchBytes != 0 || k.StartOffset != "latest" {
		t.Errorf("kafka %+v", k)
	}
	checkFates(t, r, []fateWant{
		{"consumer.override.max.partition.fetch.bytes", NotNeeded, "batch.buffer_memory"},
		{"consumer.override.max.poll.records", NotNeeded, "not poll-sized"},
		{"consumer.override.isolation.level", Unsupported, "committed"},
		{"consumer.override.linger", Unsupported, "does not know"},
		{"consumer.max.poll.records", NotNeeded, "worker setting"},
	})
}

// TestConsumerSecurityOverrides pins the security keys of
// consumer.override.*: the protocol turns TLS on, the mechanism and the
// JAAS user are carried, the password is not, and what the sink cannot
// take is unsupported. The carried SASL keys are read off the conversion
// itself here; TestSASLPasswordLeftToEnvironment loads the YAML.
func TestConsumerSecurityOverrides(t *testing.T) {
	v := &conv{fates: map[string]Fate{}, doc: &omap{}, cfg: map[string]string{
		"consumer.override.security.protocol": "sasl_ssl", "consumer.override.sasl.mechanism": "scram-sha-512",
		"consumer.override.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="sink" password="pw";`,
	}}
	v.consumerOverrides()
	kafka, _ := v.doc.vals["kafka"].(*omap)
	if kafka == nil {
		t.Fatalf("no kafka section: %+v", v.doc.vals)
	}
	tls, _ := kafka.vals["tls"].(*omap)
	sasl, _ := kafka.vals["sasl"].(*omap)
	if tls == nil || tls.vals["enabled"] != true || sasl == nil || sasl.vals["mechanism"] != "SCRAM-SHA-512" ||
		sasl.vals["username"] != "sink" || len(sasl.vals) != 2 {
		t.Errorf("kafka.tls %+v, kafka.sasl %+v", tls, sasl)
	}
	r := &Result{}
	for _, k := range sortedKeys(v.cfg) {
		f := v.fates[k]
		f.Key = k
		r.Fates = append(r.Fates, f)
	}
	checkFates(t, r, []fateWant{
		{"consumer.override.security.protocol", Carried, "kafka.tls.enabled"},
		{"consumer.override.sasl.mechanism", Carried, "kafka.sasl.mechanism"},
		{"consumer.override.sasl.jaas.config", Carried, "SINK_KAFKA__SASL__PASSWORD"},
	})

	r, cfg := convert(t, base(
		"consumer.override.security.protocol", "SSL", "consumer.override.session.timeout.ms", "20000",
		"consumer.override.client.id", "sink-1"), Options{})
	if k := cfg.Kafka; !k.TLS.Enabled || k.SessionTimeout != 20*time.Second || k.ClientID != "sink-1" {
		t.Errorf("kafka %+v", k)
	}
	checkFates(t, r, []fateWant{
		{"consumer.override.security.protocol", Carried, "kafka.tls.enabled"},
		{"consumer.override.session.timeout.ms", Carried, "kafka.session_timeout"},
		{"consumer.override.client.id", Carried, "kafka.client_id"},
	})
	r, _ = convert(t, base(
		"consumer.override.security.protocol", "SASL_PLAINTEXT", "consumer.override.sasl.mechanism", "GSSAPI",
		"consumer.override.sasl.jaas.config", "com.sun.security.auth.module.Krb5LoginModule required;",
		"consumer.override.fetch.max.wait.ms", "soon", "consumer.override.fetch.min.bytes", "-1"), Options{})
	checkFates(t, r, []fateWant{
		{"consumer.override.security.protocol", NotNeeded, "kafka.sasl.mechanism is set"},
		{"consumer.override.sasl.mechanism", Unsupported, "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER and AWS_MSK_IAM"},
		{"consumer.override.sasl.jaas.config", Unsupported, "no username"},
		{"consumer.override.fetch.max.wait.ms", Unsupported, "milliseconds"},
		{"consumer.override.fetch.min.bytes", Unsupported, "bytes"},
	})
	r, _ = convert(t, base("consumer.override.security.protocol", "kerberos"), Options{})
	checkFates(t, r, []fateWant{{"consumer.override.security.protocol", Unsupported, "unknown security protocol"}})
}

func TestConverters(t *testing.T) {
	for _, tc := range []struct {
		kv     []string
		format string
		kind   Kind
		urls   string
	}{
		{[]string{"value.converter.schemas.enable", "false"}, "json", Carried, ""},
		{[]string{"value.converter.schemas.enable", "<unset>"}, "connect-json", Carried, ""},
		{[]string{"value.converter.schemas.enable", "true"}, "connect-json", Carried, ""},
		{[]string{"value.converter", "<unset>", "value.converter.schemas.enable", "<unset>"}, "json", "", ""},
		{[]string{"value.converter", stringConverter}, "json", Carried, ""},
		{[]string{"value.converter", confluentAvro, "value.converter.schema.registry.url", "http://r:8081"}, "avro", Carried, "http://r:8081"},
		{[]string{"value.converter", confluentProtobuf, "value.converter.schema.registry.url", "http://r:8081"}, "protobuf", Carried, "http://r:8081"},
		{[]string{"value.converter", confluentJSONSchema, "value.converter.schema.registry.url", "http://r:8081"}, "json-schema", Carried, "http://r:8081"},
		{[]string{"value.converter", apicurioAvro, "value.converter.apicurio.registry.url", "http://a:8080/apis/registry/v2"}, "avro", Carried, "http://a:8080/apis/ccompat/v7"},
		{[]string{"value.converter", "com.example.XmlConverter"}, "json", Unsupported, ""},
		{[]string{"debeziumCDCEnabled", "true", "value.converter.schemas.enable", "true"}, "debezium-json", Carried, ""},
		{[]string{"debeziumCDCEnabled", "true", "value.converter", confluentAvro, "value.converter.schema.registry.url", "http://r:8081"}, "debezium-avro", Carried, "http://r:8081"},
	} {
		r, cfg := convert(t, base(tc.kv...), Options{})
		if string(cfg.Routes[0].Format) != tc.format || strings.Join(cfg.SchemaRegistry.URLs, ",") != tc.urls {
			t.Errorf("%v: format %s urls %v, want %s %s", tc.kv, cfg.Routes[0].Format, cfg.SchemaRegistry.URLs, tc.format, tc.urls)
		}
		if f := fate(r, "value.converter"); f.Kind != tc.kind {
			t.Errorf("%v: value.converter %s (%s), want %s", tc.kv, f.Kind, f.Why, tc.kind)
		}
	}
	for _, v := range []string{"true", "false"} {
		r, _ := convert(t, base("value.converter.schemas.enable", v), Options{})
		if f := fate(r, "value.converter.schemas.enable"); f.Kind != Carried || !strings.HasPrefix(f.To, "routes[].format: ") {
			t.Errorf("schemas.enable=%s: %s %s (%s)", v, f.Kind, f.To, f.Why)
		}
	}
	_, cfg := convert(t, base("debeziumCDCEnabled", "true"), Options{})
	if r := cfg.Routes[0]; r.VersionColumn != "_version" || r.DeletedColumn != "is_deleted" {
		t.Errorf("debeziumCDCEnabled route %+v", r)
	}
}

func TestTransforms(t *testing.T) {
	unwrap := []string{"transforms", "u", "transforms.u.type", unwrapSMT}
	for _, tc := range []struct {
		name    string
		kv      []string
		columns string // k=v sorted, of routes[0]
		deleted string
		fates   []fateWant
	}{
		{"unwrap default", unwrap, "", "_deleted", []fateWant{{"transforms.u.type", Carried, "debezium"}}},
		{"unwrap rewrite add.fields", append(unwrap, "transforms.u.delete.handling.mode", "rewrite", "transforms.u.add.fields", "op,table,source.ts_ms"),
			"__op=$op,__source_ts_ms=$source.ts_ms,__table=$source.table", "__deleted",
			[]fateWant{{"transforms.u.delete.handling.mode", Carried, "UInt8 or Bool"}}},
		{"unwrap other key", append(unwrap, "transforms.u.route.by.field", "x"), "", "_deleted",
			[]fateWant{{"transforms.u.route.by.field", Unsupported, "does not map"}}},
		{"insert field", []string{"transforms", "i", "transforms.i.type", "org.apache.kafka.connect.transforms.InsertField$Value",
			"transforms.i.partition.field", "p", "transforms.i.timestamp.field", "ts!", "transforms.i.static.field", "env", "transforms.i.static.value", "prod"},
			"p=$partition,ts=$timestamp", "",
			[]fateWant{{"transforms.i.static.field", Unsupported, "DEFAULT"}}},
		{"timestamp converter format", []string{"transforms", "c", "transforms.c.type", "org.apache.kafka.connect.transforms.TimestampConverter$Value",
			"transforms.c.field", "at", "transforms.c.format", "yyyy-MM-dd", "transforms.c.target.type", "Timestamp"}, "", "",
			[]fateWant{{"transforms.c.type", Unsupported, "format pattern"}, {"transforms.c.format", Unsupported, "see"}}},
		{"value to key", []string{"transforms", "k", "transforms.k.type", "org.apache.kafka.connect.transforms.ValueToKey", "transforms.k.fields", "id"}, "", "",
			[]fateWant{{"transforms.k.type", NotNeeded, "key"}, {"transforms.k.fields", NotNeeded, "see"}}},
		{"flatten", []string{"transforms", "f", "transforms.f.type", "org.apache.kafka.connect.transforms.Flatten$Value"}, "", "",
			[]fateWant{{"transforms.f.type", Unsupported, "a.b"}}},
		{"predicate", []string{"transforms", "k", "transforms.k.type", "org.apache.kafka.connect.transforms.ValueToKey", "transforms.k.fields", "id", "transforms.k.predicate", "p"}, "", "",
			[]fateWant{{"transforms.k.predicate", Unsupported, "predicates"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, cfg := convert(t, base(tc.kv...), Options{})
			var cols []string
			for _, k := range sortedKeys(cfg.Routes[0].Columns) {
				cols = append(cols, k+"="+cfg.Routes[0].Columns[k])
			}
			if strings.Join(cols, ",") != tc.columns || cfg.Routes[0].DeletedColumn != tc.deleted {
				t.Errorf("columns %v deleted %q, want %s %q", cols, cfg.Routes[0].DeletedColumn, tc.columns, tc.deleted)
			}
			checkFates(t, r, tc.fates)
		})
	}
}

func TestEveryKeyHasAFateAndUnknownIsUnsupported(t *testing.T) {
	r, _ := convert(t, base("somethingNew", "1", "suppressTableExistenceException", "true", "proxyType", "HTTP", "jdbcConnectionProperties", "?x=1"), Options{})
	checkFates(t, r, []fateWant{
		{"somethingNew", Unsupported, "not a key this import knows"},
		{"suppressTableExistenceException", Unsupported, "missing"},
		{"proxyType", Unsupported, "proxy"},
		{"jdbcConnectionProperties", Unsupported, "clickhouse.settings"},
	})
	if len(r.Unsupported()) != 4 || !strings.Contains(string(r.YAML), "4 key(s) NOT SUPPORTED") {
		t.Errorf("unsupported %v", r.Unsupported())
	}
}

// Debezium events through a converter the Debezium formats do not read
// are said to be unsupported; the routes read the records as that format.
func TestDebeziumWithProtobufIsUnsupported(t *testing.T) {
	r, cfg := convert(t, base("debeziumCDCEnabled", "true", "value.converter", confluentProtobuf,
		"value.converter.schema.registry.url", "http://r:8081"), Options{})
	if cfg.Routes[0].Format != "protobuf" || cfg.Routes[0].VersionColumn != "" {
		t.Errorf("route %+v", cfg.Routes[0])
	}
	checkFates(t, r, []fateWant{{"debeziumCDCEnabled", Unsupported, "debezium-avro"}})
}

// TestSASLPasswordLeftToEnvironment: a connector with a SASL mechanism and
// a registry user still gets its YAML; the passwords are left to the
// environment, the YAML's comment names their variables, and the YAML
// loads once they are set (and says what is missing when they are not).
func TestSASLPasswordLeftToEnvironment(t *testing.T) {
	c := base("consumer.override.security.protocol", "SASL_SSL", "consumer.override.sasl.mechanism", "PLAIN",
		"consumer.override.sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="sink" password="pw";`,
		"value.converter", "io.confluent.connect.avro.AvroConverter", "value.converter.schemas.enable", "<unset>",
		"value.converter.schema.registry.url", "http://registry:8081",
		"value.converter.basic.auth.credentials.source", "USER_INFO",
		"value.converter.basic.auth.user.info", "reg:secret")
	r, err := Convert(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	y := string(r.YAML)
	for _, want := range []string{"#   SINK_KAFKA__SASL__PASSWORD (or kafka.sasl.password_file", "#   SINK_SCHEMA_REGISTRY__PASSWORD (or schema_registry.password_file"} {
		if !strings.Contains(y, want) {
			t.Errorf("the YAML's comment lacks %q:\n%s", want, y)
		}
	}
	if strings.Contains(y, "pw") || strings.Contains(y, "secret") {
		t.Errorf("a password is in the YAML:\n%s", y)
	}
	_, err = config.Parse(r.YAML, nil)
	if err == nil || !strings.Contains(err.Error(), "kafka.sasl.password: required") || !strings.Contains(err.Error(), "schema_registry.password: required") {
		t.Errorf("without the variables: %v", err)
	}
	cfg, err := config.Parse(r.YAML, []string{"SINK_KAFKA__SASL__PASSWORD=pw", "SINK_SCHEMA_REGISTRY__PASSWORD=secret"})
	if err != nil {
		t.Fatalf("with the variables: %v\n%s", err, y)
	}
	if s := cfg.Kafka.SASL; s.Mechanism != "PLAIN" || s.Username != "sink" || s.Password.Reveal() != "pw" || cfg.SchemaRegistry.Username != "reg" {
		t.Errorf("kafka.sasl %+v, schema_registry.username %q", s, cfg.SchemaRegistry.Username)
	}
}

// TestTrustAndKeyStores: consumer.override.ssl.truststore.* and
// ssl.keystore.* are carried to kafka.tls's store keys, the passwords left
// to the environment (named in the YAML's comment, never written); the
// YAML is written though the stores are not on this machine, and loads
// on one where they are.
func TestTrustAndKeyStores(t *testing.T) {
	c := base("consumer.override.security.protocol", "SSL",
		"consumer.override.ssl.truststore.location", "/etc/kafka/truststore.jks", "consumer.override.ssl.truststore.type", "jks",
		"consumer.override.ssl.truststore.password", "trust-pw",
		"consumer.override.ssl.keystore.location", "/etc/kafka/keystore.p12", "consumer.override.ssl.keystore.type", "PKCS12",
		"consumer.override.ssl.keystore.password", "key-pw", "consumer.override.ssl.key.password", "entry-pw")
	r, err := Convert(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	y := string(r.YAML)
	for _, want := range []string{"truststore_file: /etc/kafka/truststore.jks", "truststore_type: JKS", "keystore_file: /etc/kafka/keystore.p12", "keystore_type: PKCS12",
		"#   SINK_KAFKA__TLS__TRUSTSTORE_PASSWORD (or kafka.tls.truststore_password_file", "#   SINK_KAFKA__TLS__KEYSTORE_PASSWORD (or kafka.tls.keystore_password_file",
		"#   SINK_KAFKA__TLS__KEY_PASSWORD (or kafka.tls.key_password_file"} {
		if !strings.Contains(y, want) {
			t.Errorf("the YAML lacks %q:\n%s", want, y)
		}
	}
	for _, pw := range []string{"trust-pw", "key-pw", "entry-pw"} {
		if strings.Contains(y, pw) {
			t.Errorf("a password is in the YAML:\n%s", y)
		}
	}
	checkFates(t, r, []fateWant{
		{"consumer.override.ssl.truststore.location", Carried, "kafka.tls.truststore_file"},
		{"consumer.override.ssl.truststore.type", Carried, "kafka.tls.truststore_type"},
		{"consumer.override.ssl.truststore.password", Carried, "SINK_KAFKA__TLS__TRUSTSTORE_PASSWORD"},
		{"consumer.override.ssl.keystore.password", Carried, "SINK_KAFKA__TLS__KEYSTORE_PASSWORD"},
		{"consumer.override.ssl.key.password", Carried, "SINK_KAFKA__TLS__KEY_PASSWORD"},
	})
	// Where the files are missing, loading names them: the only problem.
	_, err = config.Parse(r.YAML, []string{"SINK_KAFKA__TLS__TRUSTSTORE_PASSWORD=x", "SINK_KAFKA__TLS__KEYSTORE_PASSWORD=x", "SINK_KAFKA__TLS__KEY_PASSWORD=x"})
	for _, line := range strings.Split(fmt.Sprint(err), "\n") {
		if !strings.Contains(line, "no such file") {
			t.Errorf("loading where the stores are missing: %s", line)
		}
	}
	r, _ = convert(t, base("consumer.override.ssl.truststore.type", "PEM"), Options{})
	checkFates(t, r, []fateWant{{"consumer.override.ssl.truststore.type", Unsupported, "ca_file"}})
}

// TestSubjectStrategy: each subject name strategy class, under the
// converter's prefix or bare, gives schema_registry.subject_strategy; of
// several, the one that refuses the fewest records; an unknown class is
// not supported and leaves any; a format without a registry needs none.
func TestSubjectStrategy(t *testing.T) {
	const confluent, apicurio = "io.confluent.kafka.serializers.subject.", "io.apicurio.registry.serde.strategy."
	avro := []string{"value.converter", confluentAvro, "value.converter.schema.registry.url", "http://r:8081", "value.converter.schemas.enable", "<unset>"}
	for _, tc := range []struct {
		kv   []string
		want string // subject_strategy as loaded
		kind Kind   // the fate of the first strategy key
	}{
		{[]string{"value.converter.value.subject.name.strategy", confluent + "TopicNameStrategy"}, config.SubjectTopicName, Carried},
		{[]string{"value.converter.value.subject.name.strategy", confluent + "TopicRecordNameStrategy"}, config.SubjectTopicRecordName, Carried},
		{[]string{"value.converter.value.subject.name.strategy", confluent + "RecordNameStrategy"}, config.SubjectAny, Carried},
		{[]string{"value.subject.name.strategy", confluent + "TopicNameStrategy"}, config.SubjectTopicName, Carried},
		{[]string{"key.converter.key.subject.name.strategy", confluent + "TopicNameStrategy"}, config.SubjectTopicName, Carried},
		{[]string{"key.subject.name.strategy", confluent + "TopicRecordNameStrategy"}, config.SubjectTopicRecordName, Carried},
		{[]string{"value.converter.apicurio.registry.artifact-resolver-strategy", apicurio + "TopicIdStrategy"}, config.SubjectTopicName, Carried},
		{[]string{"value.converter.apicurio.registry.artifact-resolver-strategy", apicurio + "TopicRecordIdStrategy"}, config.SubjectTopicRecordName, Carried},
		{[]string{"value.converter.apicurio.registry.artifact-resolver-strategy", apicurio + "SimpleTopicIdStrategy"}, config.SubjectAny, Carried},
		{[]string{"value.converter.value.subject.name.strategy", confluent + "TopicNameStrategy",
			"key.converter.key.subject.name.strategy", confluent + "RecordNameStrategy"}, config.SubjectAny, Carried},
		{[]string{"value.converter.value.subject.name.strategy", "com.example.MyStrategy"}, config.SubjectAny, Unsupported},
	} {
		r, cfg := convert(t, base(append(slices.Clone(avro), tc.kv...)...), Options{})
		if got := cfg.SchemaRegistry.SubjectStrategy; got != tc.want {
			t.Errorf("%v: subject_strategy %q, want %q", tc.kv, got, tc.want)
		}
		if f := fate(r, tc.kv[0]); f.Kind != tc.kind || (f.Kind == Carried && !strings.Contains(f.To, "schema_registry.subject_strategy: "+tc.want)) {
			t.Errorf("%v: fate %+v, want %s to %s", tc.kv, f, tc.kind, tc.want)
		}
	}
	// Differing strategies are noted; JSON reads no registry.
	r, _ := convert(t, base(append(slices.Clone(avro), "value.converter.value.subject.name.strategy", confluent+"TopicNameStrategy",
		"key.converter.key.subject.name.strategy", confluent+"TopicRecordNameStrategy")...), Options{})
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "strategies differ") }) {
		t.Errorf("differing strategies not noted: %q", r.Notes)
	}
	r, cfg := convert(t, base("value.subject.name.strategy", confluent+"TopicNameStrategy"), Options{})
	if f := fate(r, "value.subject.name.strategy"); f.Kind != NotNeeded || cfg.SchemaRegistry.SubjectStrategy != config.SubjectAny {
		t.Errorf("format json: fate %+v, subject_strategy %q; want not needed and the default", f, cfg.SchemaRegistry.SubjectStrategy)
	}
}

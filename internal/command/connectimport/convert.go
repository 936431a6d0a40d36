package connectimport

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"sink/config"
	"sink/internal/consumer"
)

// SinkClass is the connector class this import reads.
const SinkClass = "com.clickhouse.kafka.connect.ClickHouseSinkConnector"

// Options are what a connector's config does not say.
type Options struct {
	// Brokers are the Connect worker's bootstrap.servers, which a
	// connector's config does not hold (unless it overrides them).
	Brokers []string
	// NativeAddr, when set, makes the sink talk ClickHouse's native
	// protocol at this host:port instead of HTTP at the connector's
	// hostname:port (the official sink speaks only HTTP).
	NativeAddr string
	// Delivery, when set, replaces what exactlyOnce says
	// (at_least_once or exactly_once).
	Delivery string
	// Samples are what was read of Result.SampleTopics, for a connector
	// that names no value.converter (nil: the topics were not read).
	Samples []Sample
}

// Result is one connector, converted.
type Result struct {
	// Name is the sink's name (the connector's, with characters a sink
	// name cannot hold replaced by '-').
	Name string
	// YAML is the sink's config, starting with a comment that holds the
	// fate table.
	YAML []byte
	// Fates has one entry per input key, in key order.
	Fates []Fate
	// Notes say what the input left open (e.g. the worker's converters).
	Notes []string
	// SampleTopics are the topics whose records show which converter the
	// Connect worker applies, for a connector that names none (empty when
	// it names one, its records are Debezium's, or the brokers or topics
	// are unknown): convert again with Options.Samples read from them.
	SampleTopics []string
}

// conv is the state of one conversion.
type conv struct {
	cfg   map[string]string
	opts  Options
	fates map[string]Fate
	notes []string
	doc   *omap // the YAML being built
	name  string

	format   string // the routes' format
	cdc      bool   // debezium-json / debezium-avro
	routes   []*omap
	columns  map[string]string // columns every route gets (from transforms)
	tableFor func(topic string) (string, bool)
	routers  []router
	deleted  string // deleted_column from ExtractNewRecordState
	// passwords are the store passwords the connector had, which the
	// YAML leaves to the environment.
	passwords []envSecret
}

// Convert maps one connector. It fails only when the input is not a
// ClickHouse sink connector or lacks what any sink needs (topics); every
// key it cannot carry is in Result.Fates as Unsupported.
func Convert(c Connector, o Options) (*Result, error) {
	v, r, err := mapKeys(c, o)
	if err != nil {
		return nil, err
	}
	y, err := render(v.doc, r, c, v.passwords)
	if err != nil {
		return nil, err
	}
	r.YAML = y
	return r, nil
}

// mapKeys maps every key of c: the document to write, and the Result with
// each key's fate (a secret's value masked) but no YAML yet.
func mapKeys(c Connector, o Options) (*conv, *Result, error) {
	v := &conv{cfg: c.Config, opts: o, fates: map[string]Fate{}, doc: &omap{}, columns: map[string]string{}}
	if class := c.Config["connector.class"]; class != SinkClass && class != "ClickHouseSinkConnector" {
		if class == "" {
			return nil, nil, fmt.Errorf("connector %q: no connector.class; this import reads %s", c.Name, SinkClass)
		}
		return nil, nil, fmt.Errorf("connector %q: connector.class %s is not %s", c.Name, class, SinkClass)
	}
	if strings.TrimSpace(c.Config["topics"]) == "" && strings.TrimSpace(c.Config["topics.regex"]) == "" {
		return nil, nil, fmt.Errorf("connector %q: neither topics nor topics.regex is set", c.Name)
	}
	v.notNeeded("connector.class", "this sink is the connector")
	v.identity(c.Name)
	v.connection()
	v.converters()
	v.transforms()
	v.routing()
	v.batching()
	v.errorsKeys()
	v.consumerOverrides()
	v.delivery()
	v.officialMisc()
	v.rest()

	v.doc.set("routes", v.routes)
	r := &Result{Name: v.name, Notes: v.notes, SampleTopics: v.sampleTopicsOf()}
	for _, k := range sortedKeys(c.Config) {
		f := v.fates[k]
		f.Key = k
		f.Value = c.Config[k]
		if secretKey(k) && f.Value != "" {
			f.Value = "***"
		}
		r.Fates = append(r.Fates, f)
	}
	return v, r, nil
}

func (v *conv) set(key string, kind Kind, to, why string) {
	if _, done := v.fates[key]; done {
		return
	}
	v.fates[key] = Fate{Kind: kind, To: to, Why: why}
}

func (v *conv) carry(key, to, why string)   { v.set(key, Carried, to, why) }
func (v *conv) notNeeded(key, why string)   { v.set(key, NotNeeded, "", why) }
func (v *conv) unsupported(key, why string) { v.set(key, Unsupported, "", why) }

// has reports whether key is set to something other than blank.
func (v *conv) has(key string) bool { return strings.TrimSpace(v.cfg[key]) != "" }

func (v *conv) get(key string) string { return strings.TrimSpace(v.cfg[key]) }

// boolKey reads a boolean as Java's Boolean.parseBoolean does: only
// "true" (any case) is true.
func (v *conv) boolKey(key string) bool { return strings.EqualFold(v.get(key), "true") }

var badNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// identity: the name, and the consumer group the connector committed in.
func (v *conv) identity(name string) {
	v.name = strings.Trim(badNameChars.ReplaceAllString(name, "-"), "-._")
	if v.name == "" {
		v.name = "imported"
	}
	v.doc.set("name", v.name)
	group := "connect-" + name
	why := "Kafka Connect's group for a sink connector is connect-<name>: the sink goes on from its committed offsets"
	if v.has("consumer.override.group.id") {
		group = v.get("consumer.override.group.id")
		v.carry("consumer.override.group.id", "kafka.group", "the sink goes on from the connector's committed offsets")
		why = "kafka.group comes from consumer.override.group.id"
	}
	if v.has("name") {
		v.carry("name", "name, kafka.group", why)
	}
	brokers := v.opts.Brokers
	if v.has("consumer.override.bootstrap.servers") {
		brokers = splitList(v.get("consumer.override.bootstrap.servers"))
		v.carry("consumer.override.bootstrap.servers", "kafka.brokers", "")
	}
	if len(brokers) == 0 {
		v.notes = append(v.notes, "kafka.brokers: a connector config does not name the brokers (the Connect worker's bootstrap.servers does); set them with --brokers or edit kafka.brokers (127.0.0.1:9092 written)")
		brokers = []string{"127.0.0.1:9092"}
	}
	v.doc.set("kafka.brokers", brokers)
	v.doc.set("kafka.group", group)
	v.notNeeded("tasks.max", "one sink process consumes every partition; run more processes with the same YAML to share them (Kafka rebalances)")
}

// connection: hostname, port, ssl, database, username, password.
func (v *conv) connection() {
	ssl := v.boolKey("ssl")
	if v.has("ssl") {
		v.carry("ssl", "clickhouse.tls.enabled", "")
	}
	v.address(ssl)
	if ssl {
		v.doc.set("clickhouse.tls.enabled", true)
	} else if v.has("ssl") {
		v.doc.set("clickhouse.tls.enabled", false)
	}
	if v.has("database") {
		v.doc.set("clickhouse.database", v.get("database"))
		v.carry("database", "clickhouse.database", "")
	}
	if v.has("username") {
		v.doc.set("clickhouse.username", v.get("username"))
		v.carry("username", "clickhouse.username", "")
	}
	if _, ok := v.cfg["password"]; ok {
		if v.cfg["password"] == "" {
			v.notNeeded("password", "empty: no password")
		} else {
			v.carry("password", "SINK_CLICKHOUSE__PASSWORD", "never written to the YAML: set the variable, or clickhouse.password_file")
		}
	}
	if v.has("timeoutSeconds") {
		v.queryTimeout()
	}
	if v.has("clickhouseSettings") {
		v.clickhouseSettings()
	}
	if v.has("tableRefreshInterval") {
		v.schemaRefresh()
	}
	if v.has("clusterName") {
		v.doc.set("clickhouse.cluster", v.get("clusterName"))
		v.carry("clusterName", "clickhouse.cluster", "named in the sink's DDL (ON CLUSTER)")
	}
}

// address: where the server is, by --native, endpoints, or hostname and
// port (ssl: the connector's ssl).
func (v *conv) address(ssl bool) {
	host := v.get("hostname")
	port := v.get("port")
	if port == "" {
		port = "8443" // the official sink's default
	}
	switch {
	case v.opts.NativeAddr != "":
		v.doc.set("clickhouse.protocol", "native")
		v.doc.set("clickhouse.addrs", []string{v.opts.NativeAddr})
		why := "replaced by --native " + v.opts.NativeAddr + " (ClickHouse's native protocol)"
		v.notNeeded("hostname", why)
		v.notNeeded("port", why)
		if ssl {
			v.set("ssl", Carried, "clickhouse.tls.enabled", "the native address must be the secure port (tcp_port_secure, usually 9440)")
		}
	case v.has("endpoints") && v.get("endpoints") != "endpoints":
		v.doc.set("clickhouse.protocol", "http")
		v.doc.set("clickhouse.addrs", splitList(v.get("endpoints")))
		v.carry("endpoints", "clickhouse.addrs", "over HTTP, as the official sink")
		v.notNeeded("hostname", "endpoints wins over hostname, as in the official sink")
		v.notNeeded("port", "endpoints wins over port, as in the official sink")
	case host != "":
		v.doc.set("clickhouse.protocol", "http")
		v.doc.set("clickhouse.addrs", []string{host + ":" + port})
		v.carry("hostname", "clickhouse.addrs", "over HTTP, as the official sink (needs ClickHouse 23.2+; --native HOST:PORT for the native protocol)")
		if v.has("port") {
			v.carry("port", "clickhouse.addrs", "")
		}
	default:
		v.notes = append(v.notes, "clickhouse.addrs: the connector has no hostname; 127.0.0.1:9000 (native) written")
	}
}

// queryTimeout: timeoutSeconds.
func (v *conv) queryTimeout() {
	if n, err := strconv.Atoi(v.get("timeoutSeconds")); err == nil && n > 0 {
		v.doc.set("clickhouse.query_timeout", (time.Duration(n) * time.Second).String())
		v.carry("timeoutSeconds", "clickhouse.query_timeout", "per INSERT attempt; a failed batch is retried, never dropped")
	} else {
		v.unsupported("timeoutSeconds", "not a positive number of seconds")
	}
}

// schemaRefresh: tableRefreshInterval.
func (v *conv) schemaRefresh() {
	n, err := strconv.Atoi(v.get("tableRefreshInterval"))
	switch {
	case err != nil || n < 0:
		v.unsupported("tableRefreshInterval", "not a whole number of seconds")
	case n == 0:
		v.notNeeded("tableRefreshInterval", "0 (never); the sink re-reads a table after an INSERT fails on an unknown column, and every clickhouse.schema_refresh (30s)")
	default:
		v.doc.set("clickhouse.schema_refresh", (time.Duration(n) * time.Second).String())
		v.carry("tableRefreshInterval", "clickhouse.schema_refresh", "")
	}
}

// clickhouseSettings: the settings sent with every INSERT, less the
// official sink's own HTTP and JSON ones.
func (v *conv) clickhouseSettings() {
	settings := map[string]string{}
	var dropped []string
	for _, kv := range strings.Split(v.get("clickhouseSettings"), ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" {
			continue // the official sink skips these too
		}
		switch k {
		case "input_format_skip_unknown_fields", "wait_end_of_query", "send_progress_in_http_headers", "async_insert":
			// The official sink's own HTTP and JSON settings: the sink
			// inserts named columns synchronously.
			dropped = append(dropped, k)
			continue
		}
		settings[k] = val
	}
	if len(settings) > 0 {
		v.doc.set("clickhouse.settings", settings)
	}
	why := "sent with every INSERT"
	if len(dropped) > 0 {
		why += "; left out (the sink inserts named columns synchronously): " + strings.Join(dropped, ", ")
	}
	v.carry("clickhouseSettings", "clickhouse.settings", why)
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// fetchMaxWait is the kafka.fetch_max_wait the YAML will have: the
// connector's consumer.override.fetch.max.wait.ms, else the sink's default.
func (v *conv) fetchMaxWait() time.Duration {
	if n, err := strconv.ParseInt(v.get("consumer.override.fetch.max.wait.ms"), 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Millisecond
	}
	return 500 * time.Millisecond
}

// batching: bufferCount, bufferFlushTime, ignorePartitionsWhenBatching.
func (v *conv) batching() {
	if v.has("bufferCount") {
		n, err := strconv.Atoi(v.get("bufferCount"))
		switch {
		case err != nil || n < 0:
			v.unsupported("bufferCount", "not a whole number of records")
		case n == 0:
			v.notNeeded("bufferCount", "0: the official sink inserted each poll; the sink batches by batch.max_rows, max_bytes, max_latency (defaults 100000, 32MiB, a batch every 5s)")
		default:
			v.doc.set("batch.max_rows", n)
			v.carry("bufferCount", "batch.max_rows", "")
		}
	}
	if v.has("bufferFlushTime") {
		n, err := strconv.Atoi(v.get("bufferFlushTime"))
		switch {
		case err != nil || n < 0:
			v.unsupported("bufferFlushTime", "not a whole number of milliseconds")
		case n == 0:
			v.notNeeded("bufferFlushTime", "0: no time trigger in the official sink; the sink's follows batch.max_latency (a batch every 5s by default)")
		default:
			v.doc.set("batch.max_latency", (time.Duration(n)*time.Millisecond + v.fetchMaxWait()).String())
			v.carry("bufferFlushTime", "batch.max_latency", "plus kafka.fetch_max_wait: a batch waits max_latency less fetch_max_wait, the flush time")
		}
	}
	if v.has("ignorePartitionsWhenBatching") {
		if v.boolKey("ignorePartitionsWhenBatching") {
			v.doc.set("batch.ignore_partitions", true)
			v.carry("ignorePartitionsWhenBatching", "batch.ignore_partitions", "")
		} else {
			v.notNeeded("ignorePartitionsWhenBatching", "false: one INSERT per partition; the sink batches across partitions (batch.ignore_partitions: true, its default), which is why it makes fewer, larger INSERTs")
		}
	}
}

// errorsKeys: errors.tolerance and the dead-letter queue.
func (v *conv) errorsKeys() {
	tol := strings.ToLower(v.get("errors.tolerance"))
	dlq := v.get("errors.deadletterqueue.topic.name")
	switch tol {
	case "", "none":
		if v.has("errors.tolerance") {
			v.doc.set("errors.tolerance", "none")
			v.carry("errors.tolerance", "errors.tolerance", "a bad record stops the sink")
		}
		if dlq != "" {
			v.notNeeded("errors.deadletterqueue.topic.name", "errors.tolerance none: Connect sends nothing to it")
		}
	case "all":
		v.doc.set("errors.tolerance", "all")
		if dlq != "" {
			v.doc.set("errors.dlq_topic", dlq)
			v.carry("errors.tolerance", "errors.tolerance", "")
			v.carry("errors.deadletterqueue.topic.name", "errors.dlq_topic", "the record unchanged, with headers saying why and where from")
		} else {
			v.doc.set("errors.dlq_topic", v.name+"-dlq")
			v.doc.set("errors.dlq_create", true)
			v.carry("errors.tolerance", "errors.tolerance, errors.dlq_topic, errors.dlq_create",
				"Connect skipped bad records with no dead-letter topic; the sink never drops one silently, so it sends them to "+v.name+"-dlq, created at start")
		}
	default:
		v.unsupported("errors.tolerance", "want none or all")
	}
	v.notNeeded("errors.deadletterqueue.context.headers.enable", "every dead-lettered copy has the headers "+strings.Join(consumer.DeadLetterHeaders, ", ")+" (docs/guarantees.md#the-dead-letter-topics-headers)")
	v.notNeeded("errors.deadletterqueue.topic.replication.factor", "the dead-letter topic is the operator's (errors.dlq_create makes one with the broker's default replication factor)")
	v.notNeeded("errors.retry.timeout", "the sink retries a failed INSERT until it succeeds or the process stops (clickhouse.retry_initial, retry_max)")
	v.notNeeded("errors.retry.delay.max.ms", "the sink's backoff is clickhouse.retry_initial and retry_max")
	v.notNeeded("errors.log.enable", "the sink logs every bad record")
	v.notNeeded("errors.log.include.messages", "the sink logs every bad record, and the DLQ copy is the record unchanged")
}

// consumerOverrides maps consumer.override.* (and Connect's consumer.*,
// which is the worker's and ignored in a connector config).
func (v *conv) consumerOverrides() {
	const p = "consumer.override."
	for _, key := range sortedKeys(v.cfg) {
		name, ok := strings.CutPrefix(key, p)
		if !ok {
			continue
		}
		rule, ok := overrideRules[name]
		if !ok {
			rule, ok = saslRules[name]
		}
		if !ok {
			v.unsupported(key, "a consumer setting this import does not know; the sink's consumer settings are under kafka: (config/example.yaml)")
			continue
		}
		rule(v, key, v.get(key))
	}
	for _, key := range sortedKeys(v.cfg) {
		if strings.HasPrefix(key, "consumer.") && !strings.HasPrefix(key, p) {
			v.notNeeded(key, "a worker setting, ignored by Connect in a connector config (consumer.override.* is the connector's)")
		}
	}
}

// overrideRule maps one consumer.override.* key, key, of value val.
type overrideRule func(v *conv, key, val string)

// overrideRules are the consumer settings the import knows, by their name
// after consumer.override.
var overrideRules = map[string]overrideRule{
	"group.id":                  func(*conv, string, string) {}, // identity() took it
	"bootstrap.servers":         func(*conv, string, string) {}, // identity() took it
	"fetch.min.bytes":           bytesTo("kafka.fetch_min_bytes"),
	"fetch.max.wait.ms":         millisTo("kafka.fetch_max_wait"),
	"fetch.max.bytes":           notNeededFor("the sink sizes its fetches from batch.buffer_memory"),
	"max.partition.fetch.bytes": notNeededFor("the sink sizes its fetches from batch.buffer_memory"),
	"request.timeout.ms":        millisTo("kafka.request_timeout"),
	"session.timeout.ms":        millisTo("kafka.session_timeout"),
	"client.id": func(v *conv, key, val string) {
		v.doc.set("kafka.client_id", val)
		v.carry(key, "kafka.client_id", "")
	},
	"max.poll.records":      notNeededFor("the sink's INSERTs are not poll-sized: batch.max_rows, max_bytes and max_latency decide, across polls and partitions"),
	"max.poll.interval.ms":  notNeededFor("franz-go heartbeats on its own; kafka.session_timeout and rebalance_timeout bound a member"),
	"heartbeat.interval.ms": notNeededFor("franz-go heartbeats on its own; kafka.session_timeout and rebalance_timeout bound a member"),
	"auto.offset.reset":     (*conv).offsetReset,
	"isolation.level":       (*conv).isolationLevel,
	"security.protocol":     (*conv).securityProtocol,
	// The sasl.* keys are saslRules (sasl.go).
	// Java trust and key stores: the files and their types carried, the
	// passwords left to the environment.
	"ssl.truststore.location": storeTo("kafka.tls.truststore_file"),
	"ssl.truststore.type":     storeTypeTo("kafka.tls.truststore_type"),
	"ssl.truststore.password": passwordTo("kafka.tls.truststore_password"),
	"ssl.keystore.location":   storeTo("kafka.tls.keystore_file"),
	"ssl.keystore.type":       storeTypeTo("kafka.tls.keystore_type"),
	"ssl.keystore.password":   passwordTo("kafka.tls.keystore_password"),
	"ssl.key.password":        passwordTo("kafka.tls.key_password"),
}

// storeTo carries a trust or key store's location to the file key to.
func storeTo(to string) overrideRule {
	return func(v *conv, key, val string) {
		v.doc.set(to, val)
		v.carry(key, to, "a path on the machine the sink runs on: the store must be there")
	}
}

// storeTypeTo carries a store's type (JKS or PKCS12) to the key to.
func storeTypeTo(to string) overrideRule {
	return func(v *conv, key, val string) {
		switch t := strings.ToUpper(val); t {
		case "JKS", "PKCS12":
			v.doc.set(to, t)
			v.carry(key, to, "")
		case "PEM":
			v.unsupported(key, "a PEM store goes in kafka.tls ca_file, cert_file and key_file (files, not Connect's inline PEM values)")
		default:
			v.unsupported(key, "the sink reads JKS and PKCS12 stores")
		}
	}
}

// passwordTo notes a store password: never written, it goes to the
// environment variable of key to (or to's _file key).
func passwordTo(to string) overrideRule {
	env := config.EnvPrefix + strings.ToUpper(strings.ReplaceAll(to, ".", "__"))
	return func(v *conv, key, _ string) {
		v.passwords = append(v.passwords, envSecret{key: to, env: env})
		v.carry(key, env, "never written to the YAML: set the variable, or "+to+"_file")
	}
}

// millisTo carries a number of milliseconds to the duration key to.
func millisTo(to string) overrideRule {
	return func(v *conv, key, val string) {
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 0 {
			v.unsupported(key, "not a number of milliseconds")
			return
		}
		v.doc.set(to, (time.Duration(n) * time.Millisecond).String())
		v.carry(key, to, "")
	}
}

// bytesTo carries a number of bytes to key to.
func bytesTo(to string) overrideRule {
	return func(v *conv, key, val string) {
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 0 {
			v.unsupported(key, "not a number of bytes")
			return
		}
		v.doc.set(to, n)
		v.carry(key, to, "")
	}
}

// notNeededFor marks a key not needed, for the reason why.
func notNeededFor(why string) overrideRule {
	return func(v *conv, key, _ string) { v.notNeeded(key, why) }
}

func (v *conv) offsetReset(key, val string) {
	switch strings.ToLower(val) {
	case "earliest", "latest":
		v.doc.set("kafka.start_offset", strings.ToLower(val))
		v.carry(key, "kafka.start_offset", "only for partitions with no committed offset, as in Kafka")
	default:
		v.unsupported(key, "the sink takes earliest or latest; none (fail without a committed offset) is not built")
	}
}

func (v *conv) isolationLevel(key, val string) {
	if strings.EqualFold(val, "read_committed") {
		v.notNeeded(key, "the sink always reads committed records only")
	} else {
		v.unsupported(key, "the sink always reads committed records only: records of open or aborted transactions are not read")
	}
}

func (v *conv) securityProtocol(key, val string) {
	switch strings.ToUpper(val) {
	case "PLAINTEXT":
		v.notNeeded(key, "the default")
	case "SSL", "SASL_SSL":
		v.doc.set("kafka.tls.enabled", true)
		v.carry(key, "kafka.tls.enabled", "")
	case "SASL_PLAINTEXT":
		v.notNeeded(key, "SASL is on when kafka.sasl.mechanism is set")
	default:
		v.unsupported(key, "unknown security protocol")
	}
}

// delivery: exactlyOnce and its KeeperMap state.
func (v *conv) delivery() {
	eo := v.boolKey("exactlyOnce")
	switch {
	case v.opts.Delivery != "":
		v.doc.set("delivery", v.opts.Delivery)
		if v.has("exactlyOnce") {
			v.carry("exactlyOnce", "delivery", "replaced by --delivery "+v.opts.Delivery)
		}
	case eo:
		v.doc.set("delivery", "exactly_once")
		v.carry("exactlyOnce", "delivery: exactly_once",
			"the official sink's state (KeeperMap table connect_state: per topic-partition its last batch's minOffset, maxOffset and state) is not read; the committed offsets of the group carry over, and on its first start the sink treats every partition as unmarked: rows already in the table at offsets from the committed one on (its _topic, _partition, _offset columns) are not inserted again; sink check says what the tables need (docs/migrating.md)")
	case v.has("exactlyOnce"):
		v.notNeeded("exactlyOnce", "false: at_least_once, the sink's default")
	}
	const keeper = "the official sink's exactly-once state in KeeperMap; the sink keeps its own in the group's offset commits and the table (docs/guarantees.md), and never reads this"
	for _, k := range []string{"zkPath", "zkDatabase", "keeperOnCluster", "tolerateStateMismatch"} {
		v.notNeeded(k, keeper)
	}
}

// officialMisc: the official sink's keys that have no counterpart.
func (v *conv) officialMisc() {
	v.notNeeded("retryCount", "the sink retries a failed INSERT until it succeeds or the process stops, with backoff (clickhouse.retry_initial, retry_max)")
	v.notNeeded("hashFunctionName", "the official sink's endpoint choice; the sink takes addrs in turn")
	v.notNeeded("bypassRowBinary", "an insert format of the official sink; the sink inserts native columns")
	v.notNeeded("bypassSchemaValidation", "the official sink's check of record schemas; the sink checks each value against its column")
	v.notNeeded("bypassFieldCleanup", "the sink reads only the fields its columns take")
	v.notNeeded("clientVersion", "the official sink's Java client version")
	if v.boolKey("suppressTableExistenceException") {
		v.unsupported("suppressTableExistenceException", "the official sink skipped records whose table is missing; the sink skips none silently: a table of topics must exist at start (sink check names it), and a topic of topics.regex whose table is missing gives bad records (dead-lettered with errors.tolerance: all)")
	} else {
		v.notNeeded("suppressTableExistenceException", "false: a missing table stops the connector; in the sink, a table of topics must exist at start, and a topic of topics.regex whose table is missing gives bad records (the first stops the connector with errors.tolerance: none)")
	}
	if v.has("jdbcConnectionProperties") {
		v.unsupported("jdbcConnectionProperties", "JDBC URL properties have no counterpart: set ClickHouse settings in clickhouse.settings and TLS in clickhouse.tls")
	}
	for _, k := range []string{"proxyType", "proxyHost", "proxyPort"} {
		if v.has(k) && !strings.EqualFold(v.get(k), "ignore") && !strings.EqualFold(v.get(k), "none") && v.get(k) != "-1" {
			v.unsupported(k, "the sink connects to ClickHouse directly (no HTTP or SOCKS proxy)")
		} else {
			v.notNeeded(k, "no proxy")
		}
	}
	if v.has("dateTimeFormats") {
		v.unsupported("dateTimeFormats", "the sink reads RFC 3339, ClickHouse's text form and unix numbers into DateTime columns; custom Java patterns are not supported (send one of those, or a String column)")
	}
}

// rest gives every key not yet decided its fate.
func (v *conv) rest() {
	for _, k := range sortedKeys(v.cfg) {
		if _, done := v.fates[k]; done {
			continue
		}
		switch {
		case k == "header.converter" || strings.HasPrefix(k, "header.converter."):
			v.notNeeded(k, "headers are read as bytes ($header.NAME)")
		case k == "config.action.reload":
			v.notNeeded(k, "a Connect setting: the sink reads its YAML at start")
		case k == "producer.override.bootstrap.servers" || strings.HasPrefix(k, "producer.override.") || strings.HasPrefix(k, "admin.override."):
			v.notNeeded(k, "the sink's dead-letter producer uses the kafka: section")
		case k == "security.protocol" || strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl."):
			v.notNeeded(k, "a worker setting, not read from a connector config; the sink's are under kafka.tls and kafka.sasl")
		case k == "schemas.enable":
			v.notNeeded(k, "not a connector key (the converter's is value.converter.schemas.enable)")
		case v.cfg[k] == "":
			v.notNeeded(k, "empty")
		default:
			v.unsupported(k, "not a key this import knows (of the official sink or Kafka Connect): check what it does")
		}
	}
}

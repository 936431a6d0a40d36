// Package config is the sink's configuration: the typed Config, its defaults,
// loading from one YAML file plus SINK_* environment overrides, and Validate,
// which checks every option once, in one place, and reports every problem at
// the same time with the full key path of each.
//
// One YAML file describes one connector: one Kafka consumer group reading some
// topics, and the routes that send each topic to a ClickHouse table. See
// example.yaml beside this file for every key with its default.
//
// A *Config returned by Load or Parse is valid and read-only: nothing in the
// daemon may modify it, which is what makes it safe to share between
// goroutines without locking. (Validate caches compiled regular expressions
// inside the Config; Load and Parse call it before returning, so the cache is
// written before the Config is shared.)
package config

import (
	"maps"
	"regexp"
	"strings"
	"time"

	"sink/internal/cluster"
	"sink/internal/route"
)

// Config is the whole configuration of one sink process.
type Config struct {
	// Name identifies the connector. It is also the default consumer group,
	// so two processes with the same Name share partitions, which is how
	// the sink scales out.
	Name            string        `koanf:"name"`
	Kafka           Kafka         `koanf:"kafka"`
	ClickHouse      ClickHouse    `koanf:"clickhouse"`
	Batch           Batch         `koanf:"batch"`
	Routes          []Route       `koanf:"routes"`
	Errors          Errors        `koanf:"errors"`
	HTTP            HTTP          `koanf:"http"`
	Log             Log           `koanf:"log"`
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// Delivery is DeliveryAtLeastOnce or DeliveryExactlyOnce (see
	// docs/guarantees.md).
	Delivery string `koanf:"delivery"`
	// Fanout is "first" (a record goes to the first route whose topic and
	// when: match it) or "all" (to every such route); see routing.go.
	Fanout string `koanf:"fanout"`
	// SchemaRegistry is where Avro, Protobuf and JSON Schema records
	// framed in the Confluent wire format find their schemas.
	SchemaRegistry SchemaRegistry `koanf:"schema_registry"`

	// deprecated holds one warning per deprecated key the file or the
	// environment set (see deprecations); Warnings returns them first.
	deprecated []string
}

// Delivery guarantees.
const (
	DeliveryAtLeastOnce = "at_least_once"
	DeliveryExactlyOnce = "exactly_once"
)

// The values of kafka.group_protocol, named as Kafka's group.protocol names
// them.
const (
	GroupClassic  = "classic"
	GroupConsumer = "consumer"
)

// ExactlyOnce reports whether delivery is exactly_once.
func (c *Config) ExactlyOnce() bool { return c.Delivery == DeliveryExactlyOnce }

// Kafka configures the consumer.
type Kafka struct {
	Brokers []string `koanf:"brokers"`
	// Group defaults to Config.Name.
	Group string `koanf:"group"`
	// ClientID defaults to "sink-" + Config.Name; brokers log and quota by it.
	ClientID string   `koanf:"client_id"`
	Topics   []string `koanf:"topics"`
	// TopicRegex is matched against the whole topic name (it is anchored,
	// like Kafka Connect's topics.regex). Use ConsumePatterns to hand it
	// to franz-go, whose regex matching is unanchored.
	TopicRegex  string `koanf:"topic_regex"`
	StartOffset string `koanf:"start_offset"`
	// GroupProtocol is the consumer group protocol the sink asks for:
	// GroupClassic (members balance among themselves; every member rejoins
	// for each rebalance) or GroupConsumer (KIP-848: the broker assigns and
	// tells each member its change on its next heartbeat). A broker without
	// KIP-848 gets a classic member; the consumer package says so.
	GroupProtocol string `koanf:"group_protocol"`
	// FetchMinBytes and FetchMaxWait decide how much a broker accumulates
	// before answering a fetch, and therefore how big batches get at low
	// input rates.
	FetchMinBytes ByteSize      `koanf:"fetch_min_bytes"`
	FetchMaxWait  time.Duration `koanf:"fetch_max_wait"`
	// FetchMaxBytes and MaxPartitionFetchBytes are deprecated keys: the
	// consumer derives both from batch.buffer_memory
	// (consumer.FetchLimitsFor). Set (not 0), each still lowers its
	// derived size. They are printed only when set.
	FetchMaxBytes          ByteSize      `koanf:"fetch_max_bytes" print:"omitzero"`
	MaxPartitionFetchBytes ByteSize      `koanf:"max_partition_fetch_bytes" print:"omitzero"`
	CommitInterval         time.Duration `koanf:"commit_interval"`
	SessionTimeout         time.Duration `koanf:"session_timeout"`
	RebalanceTimeout       time.Duration `koanf:"rebalance_timeout"`
	RequestTimeout         time.Duration `koanf:"request_timeout"`
	// TLS and SASL secure the connection to the brokers; both are off by
	// default (the local stack's PLAINTEXT listener).
	TLS  TLS  `koanf:"tls"`
	SASL SASL `koanf:"sasl"`

	topicRE *regexp.Regexp `koanf:"-"` // compiled TopicRegex, set by Validate
}

// ClickHouse configures the writer.
type ClickHouse struct {
	// Protocol is "native" (ports 9000/9440) or "http" (ports 8123/8443,
	// HTTPS when TLS is enabled); addrs must name ports of that protocol.
	Protocol string   `koanf:"protocol"`
	Addrs    []string `koanf:"addrs"`
	Database string   `koanf:"database"`
	Username string   `koanf:"username"`
	// Password comes from the environment (SINK_CLICKHOUSE__PASSWORD); a
	// password written in the config file is refused. PasswordFile is the
	// alternative: its content, without a trailing newline.
	Password     Secret `koanf:"password"`
	PasswordFile string `koanf:"password_file"`
	// TLS is for the secure native port (tcp_port_secure, usually 9440),
	// or HTTPS (https_port, usually 8443) with protocol http.
	TLS         TLS    `koanf:"tls"`
	Compression string `koanf:"compression"`
	// Settings are sent with every INSERT (e.g. insert_quorum,
	// insert_quorum_timeout, max_insert_block_size); values go to the
	// server as given.
	Settings    map[string]any `koanf:"settings"`
	DialTimeout time.Duration  `koanf:"dial_timeout"`
	// QueryTimeout bounds one INSERT attempt, not the batch: a batch is
	// retried until it succeeds or the process stops.
	QueryTimeout time.Duration `koanf:"query_timeout"`
	// MaxInFlight is the number of INSERTs per table at once.
	MaxInFlight int `koanf:"max_in_flight"`
	// MaxInsertsPerMinute is the budget of INSERTs a server receives from
	// the connector per minute, summed over every table it holds (on a
	// cluster, per shard: every INSERT a shard receives counts against
	// it); 0 turns it off. With a budget, a table's batch whose max_wait
	// has passed waits for room in the budget, up to its latency bound
	// (Route.MaxLatency, else the larger of batch.max_wait and
	// batch.max_latency); latency wins, and the sink says when the budget
	// is exceeded (internal/pace).
	MaxInsertsPerMinute float64 `koanf:"max_inserts_per_minute"`
	// ShareBudget makes max_inserts_per_minute the server's budget, summed
	// over every client that writes to it: the connector reads the
	// server's count of INSERTs (system.events) every few seconds and
	// takes a share in proportion to what it has to write, so that the
	// connectors (pods) writing to one server hold its budget together
	// with no coordinator (internal/budget). False: the budget is this
	// connector's alone.
	ShareBudget bool `koanf:"share_budget"`
	// ConnMaxLifetime closes a pooled connection to ClickHouse this long
	// after it was dialed (at its next release, or while it idles). A
	// connection keeps buffers as large as the largest block it has sent
	// or read, so a bounded lifetime lets the pool's memory follow the
	// current load instead of the largest burst since the sink started,
	// and spreads connections again after a replica or a load balancer
	// comes back.
	ConnMaxLifetime time.Duration `koanf:"conn_max_lifetime"`
	RetryInitial    time.Duration `koanf:"retry_initial"`
	RetryMax        time.Duration `koanf:"retry_max"`
	// SchemaRefresh is how often every target table's columns are read
	// again, so that columns added or dropped while the sink runs are used
	// without a restart; 0 re-reads only after an INSERT fails with an
	// unknown column or table (codes 16, 47, 60), which it always does.
	// A record carrying a field no column takes also re-reads the table
	// before it is decoded, at most once per field per SchemaRefresh (once
	// per field when 0).
	SchemaRefresh time.Duration `koanf:"schema_refresh"`
	// Cluster, when set, names the servers' cluster (remote_servers): its
	// shards, weights and replicas are read from system.clusters for the
	// routes with a target (see Route.Target), and it is named in the
	// sink's DDL (ALTER TABLE … ON CLUSTER, for routes with
	// schema.evolve: add_columns) so that every replica's table gets the
	// column.
	Cluster string `koanf:"cluster"`
	// Shards lists the cluster's shards, each as its replicas' native
	// host:port, every shard of weight 1, instead of reading them from
	// system.clusters; with Cluster too, Cluster is still the name in DDL.
	Shards [][]string `koanf:"shards"`
	// ReplicaOrder is which replica of a shard a route with a target sends
	// each shard's part to first (the names of clickhouse-go's
	// ConnOpenStrategy): round_robin, the shard's replicas in turn, part
	// after part; in_order, replica 1 unless it fails; random, any. A
	// failed attempt goes on to the shard's next replica in every order.
	ReplicaOrder string `koanf:"replica_order"`
	// SchemaAgreementTimeout bounds how long the parts of a route with a
	// target are held while its local tables have different columns on
	// different replicas or shards (a half-applied ALTER, seen when the
	// schema is re-read): the sink waits for them to agree rather than
	// insert around the difference; past it the batch fails and the
	// connector stops, committing nothing past it.
	SchemaAgreementTimeout time.Duration `koanf:"schema_agreement_timeout"`
}

// Replica orders (ClickHouse.ReplicaOrder).
const (
	ReplicaRoundRobin = "round_robin"
	ReplicaInOrder    = "in_order"
	ReplicaRandom     = "random"
)

// Clustered reports whether a cluster is configured, by name or by list.
func (ch *ClickHouse) Clustered() bool { return ch.Cluster != "" || len(ch.Shards) > 0 }

// Batch configures the per-table accumulators. A batch is sealed when any of
// MaxRows, MaxBytes or MaxWait is reached, whichever comes first.
//
// MaxLatency is the one latency knob: the longest a row may take from its
// record's timestamp to being in the table (a route's max_latency sets it
// for that route's table). In fixed mode a batch's wait is MaxLatency less
// kafka.fetch_max_wait; adaptive batching and the INSERT budget keep rows
// within it (docs/sizing.md#latency-and-the-insert-budget).
type Batch struct {
	MaxRows  int      `koanf:"max_rows"`
	MaxBytes ByteSize `koanf:"max_bytes"`
	// MaxWait is the wait of a fixed-mode batch, derived from MaxLatency
	// (fillLatency). The key batch.max_wait is deprecated: set, it is the
	// wait as before, and MaxLatency defaults to 30s as before.
	MaxWait time.Duration `koanf:"max_wait" print:"-"`
	// IgnorePartitions lets one batch hold records from every partition
	// (and every topic routed to the same table). Without it a table gets
	// one insert per partition, and insert rate grows with partition count.
	IgnorePartitions bool `koanf:"ignore_partitions"`
	// BufferMemory bounds all buffered and in-flight batch bytes; when it
	// is full the consumer stops fetching.
	BufferMemory ByteSize `koanf:"buffer_memory"`
	// Mode is fixed (max_rows/max_wait as configured) or adaptive: a
	// controller per table (internal/adapt) chooses each batch's wait and
	// rows from the measured input rate and ClickHouse's feedback, to hold
	// TargetInsertsPerMinute within MaxLatency. max_bytes stays a ceiling.
	Mode string `koanf:"mode"`
	// TargetInsertsPerMinute is the adaptive mode's cadence per table.
	TargetInsertsPerMinute float64 `koanf:"target_inserts_per_minute"`
	// MaxLatency bounds record timestamp → row in the table; only
	// ClickHouse's pushback (parts, TOO_MANY_PARTS) makes adaptive
	// batching wait longer, and then it logs and reports that. Default:
	// DefaultWait plus kafka.fetch_max_wait in fixed mode, 30s in adaptive
	// mode (and with the deprecated max_wait).
	MaxLatency time.Duration `koanf:"max_latency" print:"omitzero"`

	// derivedWait: MaxWait was derived from MaxLatency (the deprecated
	// max_wait was not set).
	derivedWait bool
}

// DefaultWait is how long a fixed-mode batch waits when no latency bound
// is set: a table with rows is inserted at least every 5 seconds.
const DefaultWait = 5 * time.Second

// adaptiveLatency is the default latency bound of adaptive batching (and
// of a config with the deprecated batch.max_wait, as it was).
const adaptiveLatency = 30 * time.Second

// defaultFetchMaxWait is kafka.fetch_max_wait when the config sets none.
const defaultFetchMaxWait = 500 * time.Millisecond

// fillLatency fills the latency bound's default and derives the fixed-mode
// wait from it (fetch is kafka.fetch_max_wait: what a record may have
// waited in Kafka before it reached a batch).
func (b *Batch) fillLatency(fetch time.Duration) {
	if b.MaxLatency == 0 {
		b.MaxLatency = DefaultWait + fetch
		if b.Mode == BatchAdaptive || b.MaxWait != 0 {
			b.MaxLatency = adaptiveLatency
		}
	}
	if b.MaxWait == 0 {
		b.derivedWait = true
		b.MaxWait = max(b.MaxLatency-fetch, time.Millisecond)
	}
}

// Batch modes.
const (
	BatchFixed    = "fixed"
	BatchAdaptive = "adaptive"
)

// Route sends the records of matching topics to one table. From the
// environment, SINK_ROUTES sets the whole list as JSON (see EnvPrefix).
type Route struct {
	// Exactly one of Topic and TopicRegex is set. TopicRegex is anchored.
	Topic      string `koanf:"topic"`
	TopicRegex string `koanf:"topic_regex"`
	// Table is "db.table", or "table" in clickhouse.database. It may be
	// taken from the topic name with placeholders: ${topic} (the whole
	// name), ${topic.last} (what follows the last dot: Debezium's
	// server.schema.table gives table) and, with TopicRegex, ${1}..${9}
	// (its capture groups). Such a table is looked up when the first
	// record of a topic arrives (see TableForTopic). Its database is the
	// part before the template's first dot outside a placeholder, written
	// literally, or, with a placeholder, one of Databases: a topic's name
	// never chooses the database.
	Table string `koanf:"table"`
	// Databases lists the databases a table template whose database part
	// has a placeholder ("${1}.${2}") may expand to; required for such a
	// template, refused for any other.
	Databases []string     `koanf:"databases"`
	Format    route.Format `koanf:"format"`
	// Columns maps a table column to its source: a JSON path "a.b.c" into
	// the record value, or one of $topic, $partition, $offset, $timestamp,
	// $key, $header.NAME. When empty, each column is read from the
	// top-level JSON field of the same name. With debezium-json, paths
	// point into the row image, and $op, $ts_ms, $source.PATH, $version
	// and $deleted are added.
	Columns map[string]string `koanf:"columns"`
	// VersionColumn and DeletedColumn (debezium-json only) receive the row
	// version and the delete marker, for ReplacingMergeTree(version[,
	// deleted]); they default to _version and _deleted.
	VersionColumn string `koanf:"version_column"`
	DeletedColumn string `koanf:"deleted_column"`
	// Truncate (the CDC formats) is what a TRUNCATE event (op t) of the
	// route's topics does: TruncateSkip (the default) counts and logs it
	// and leaves the table as it is; TruncateApply flushes and inserts
	// every earlier record of the table, then runs TRUNCATE TABLE. Apply
	// is only safe when the table's records all come from one partition
	// (sink check refuses it otherwise) and not with exactly_once.
	Truncate string `koanf:"truncate"`
	// When selects which records of the route's topics it takes: a map of
	// key, header.NAME or field.PATH to a value or list of values (the
	// grammar is route.When's). Empty: every record.
	When map[string]any `koanf:"when"`
	// Schema says what happens to record fields no column takes (see
	// RouteSchema).
	Schema RouteSchema `koanf:"schema"`
	// DLQTable overrides errors.dlq_table for the route's bad records.
	DLQTable string `koanf:"dlq_table"`
	// Target is where a cluster's rows go: "" (the table through
	// clickhouse.addrs, as on a single server), TargetDistributed (the
	// table is a Distributed table; each INSERT returns once every shard
	// has its rows) or TargetLocal (the sink writes each shard's local
	// table itself, placing rows by Sharding or ShardingKey).
	Target string `koanf:"target"`
	// Sharding "random" (target local) sends each whole batch to one
	// shard, picked by weight. Otherwise ShardingKey names the column
	// whose ShardingHash (default cityHash64) modulo the total weight
	// picks each row's shard, as the Distributed engine does.
	Sharding     string `koanf:"sharding"`
	ShardingKey  string `koanf:"sharding_key"`
	ShardingHash string `koanf:"sharding_hash"`
	// MaxLatency is the longest the route's table's rows may wait, from
	// their record's arrival at the sink to their INSERT: with a budget
	// (clickhouse.max_inserts_per_minute) the table's batch is never held
	// past it, and in any mode its batches close by then (it caps
	// max_wait and adaptive batching's max_latency for the table). 0: the
	// table's bound is the larger of batch.max_wait and batch.max_latency.
	// A table several routes fill takes the smallest.
	MaxLatency time.Duration `koanf:"max_latency"`
	// Message (protobuf only) is the full name of the Protobuf message
	// type the route reads, for a topic that carries several (each record
	// names its type by the message index in its frame); records of other
	// types are skipped and counted. Empty: every type fills the columns
	// whose names it has.
	Message string `koanf:"message"`

	re   *regexp.Regexp `koanf:"-"` // compiled TopicRegex, set by Validate
	when route.When     `koanf:"-"` // parsed When, set by Validate
}

// The values of Route.Target and Route.Sharding.
const (
	TargetDistributed = "distributed"
	TargetLocal       = "local"
	ShardingRandom    = "random"
)

// Hash is the route's sharding_hash, cityHash64 when not set.
func (r *Route) Hash() string {
	if r.ShardingHash == "" {
		return cluster.HashCity
	}
	return r.ShardingHash
}

// Errors configures what happens to records that cannot be decoded or
// converted.
type Errors struct {
	// Tolerance "none" stops the connector on the first bad record; "all"
	// sends bad records to DLQTopic and carries on.
	Tolerance string `koanf:"tolerance"`
	DLQTopic  string `koanf:"dlq_topic"`
	// DLQCreate creates DLQTopic at start when it does not exist, with the
	// largest partition count of the consumed topics and the broker's
	// default replication factor.
	DLQCreate bool `koanf:"dlq_create"`
	// DLQTable is a ClickHouse table ("db.table" or "table") that takes one
	// row per bad record, instead of or besides DLQTopic (dlqtable.go).
	DLQTable string `koanf:"dlq_table"`
	// DLQTableTTL is the TTL the sink gives DLQTable when it creates it
	// (0: rows are kept until deleted).
	DLQTableTTL time.Duration `koanf:"dlq_table_ttl"`
	// DLQValueMax is the most bytes of a bad record's value DLQTable keeps;
	// a longer value is stored cut, with its original length.
	DLQValueMax ByteSize `koanf:"dlq_value_max"`
	// OnMissing: "default" gives a non-Nullable column whose value is
	// absent from the record its type's default (0, "", the epoch, []);
	// "bad_record" makes such a record bad (tolerance decides: stop or DLQ).
	OnMissing string `koanf:"on_missing"`
	// OnNull: the same for JSON null in a non-Nullable column.
	OnNull string `koanf:"on_null"`
	// OnTombstone (json format): "skip" counts a record with a null value
	// as skipped and commits past it; "bad_record" makes it a bad record.
	OnTombstone string `koanf:"on_tombstone"`
	// Unrouted: "skip" counts a record no route takes
	// (sink_records_unrouted_total) and commits past it; "dlq" sends it to
	// DLQTopic.
	Unrouted string `koanf:"unrouted"`
}

// HTTP configures the metrics, health and status endpoint.
type HTTP struct {
	// Listen is host:port; "" disables the server.
	Listen string `koanf:"listen"`
	// Admin turns on POST /pause and POST /resume. Off by default: they
	// stop the connector's work, so whoever can reach the port could.
	Admin bool `koanf:"admin"`
	// AdminToken is the bearer token the admin endpoints require. It comes
	// from the environment only (AdminTokenEnv); the config file may not
	// hold it. Required when Admin is on and Listen is not a loopback
	// address.
	AdminToken Secret `koanf:"admin_token"`
	// AllowedHosts are the names, besides IP addresses and localhost, that
	// a request's Host header may give (a Service's DNS name, a proxy's);
	// "*.example.com" admits any name below example.com. Any other Host is
	// refused on every endpoint but /healthz, so a web page whose name
	// resolves to this address (DNS rebinding) cannot read it. The host of
	// Listen, when it is a name, is admitted too.
	AllowedHosts []string `koanf:"allowed_hosts"`
}

// AdminTokenEnv is the environment variable that holds http.admin_token.
const AdminTokenEnv = EnvPrefix + "HTTP__ADMIN_TOKEN"

// MinAdminTokenLen is the shortest admin token accepted: a bearer token is
// a password sent with every request, and a short one can be guessed.
const MinAdminTokenLen = 16

// Log configures logging.
type Log struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// The values of clickhouse.protocol.
const (
	ProtocolNative = "native"
	ProtocolHTTP   = "http"
)

// Supported values of the enumerated options. The first of each is the default.
var (
	startOffsets   = []string{"earliest", "latest"}
	groupProtocols = []string{GroupClassic, GroupConsumer}
	compressions   = []string{"auto", "lz4", "zstd", "none"}
	protocols      = []string{ProtocolNative, ProtocolHTTP}
	tolerances     = []string{"none", "all"}
	onValues       = []string{"default", "bad_record"}
	onTombstones   = []string{"skip", "bad_record"}
	logLevels      = []string{"info", "debug", "warn", "error"}
	logFormats     = []string{"json", "console"}
	deliveries     = []string{DeliveryAtLeastOnce, DeliveryExactlyOnce}
	fanouts        = []string{FanoutFirst, FanoutAll}
	unrouteds      = []string{"skip", "dlq"}
)

// DefaultClickHouse is the clickhouse section of an empty config file: what
// a command that is given no config file connects with (`sink report`).
func DefaultClickHouse() ClickHouse { return defaults().ClickHouse }

// defaults returns the configuration that an empty YAML file amounts to,
// before the derived defaults (kafka.group, kafka.client_id) are filled in.
func defaults() *Config {
	return &Config{
		Kafka:      defaultKafka(),
		ClickHouse: defaultClickHouse(),
		Batch:      defaultBatch(),
		Errors:     defaultErrors(),
		// One table per record unless asked otherwise.
		Fanout: FanoutFirst,
		HTTP: HTTP{
			// Loopback: metrics are not exposed beyond the host unless
			// asked for (containers set 0.0.0.0:8080).
			Listen: "127.0.0.1:8080",
		},
		Log: Log{
			// The production level; debug is for following single batches.
			Level: "info",
			// Machine-readable by default: the daemon runs under a log
			// collector far more often than in a terminal.
			Format: "json",
		},
		// Room to flush every batch through a slow INSERT and commit.
		// Kubernetes also kills after 30s by default, so deployments set
		// terminationGracePeriodSeconds above this; a flush cut short
		// means replay after restart, not loss.
		ShutdownTimeout: 30 * time.Second,
		// Replays after a crash insert again (ReplacingMergeTree collapses
		// them); exactly_once needs deduplication tokens and a window.
		Delivery: DeliveryAtLeastOnce,
	}
}

// defaultKafka is the kafka section's defaults.
func defaultKafka() Kafka {
	return Kafka{
		// The local stack's broker, so that a laptop run needs no
		// kafka section at all.
		Brokers: []string{"127.0.0.1:9092"},
		// A new group reads the topic from the start: a sink that
		// silently skips existing data is worse than a slow first run.
		StartOffset: "earliest",
		// The protocol every Kafka version speaks; consumer
		// (KIP-848) is an opt-in until a deployment's brokers have it.
		GroupProtocol: GroupClassic,
		// The main lever of insert size. The broker holds a fetch until
		// 1MiB is ready (or FetchMaxWait passes), so each fetch brings
		// thousands of rows instead of a handful; the Java default of
		// 1 byte is what produced one insert per message.
		FetchMinBytes: 1 * MiB,
		// The longest delay a fetch may add when input is
		// slow; small next to batch.max_wait so it does not dominate
		// end-to-end latency.
		FetchMaxWait: defaultFetchMaxWait,
		// Commits only ever cover rows already in ClickHouse, so a
		// short interval costs little and bounds replay after a crash.
		CommitInterval: 5 * time.Second,
		// Kafka's default since 3.0: long enough to ride out a GC
		// pause or a slow INSERT, short enough to reassign a dead pod.
		SessionTimeout: 45 * time.Second,
		// Time members get to flush and commit during a rebalance;
		// covers one slow INSERT plus a commit.
		RebalanceTimeout: 60 * time.Second,
		// Must exceed fetch_max_wait, else every idle fetch
		// times out; 30s is Kafka's request.timeout.ms default.
		RequestTimeout: 30 * time.Second,
	}
}

// defaultClickHouse is the clickhouse section's defaults.
func defaultClickHouse() ClickHouse {
	return ClickHouse{
		// The native protocol is ClickHouse's own and what every
		// server version speaks; HTTP is for services that expose
		// only HTTP(S).
		Protocol: ProtocolNative,
		// The local stack's server, native protocol port.
		Addrs: []string{"127.0.0.1:9000"},
		// ClickHouse's own default database, which every server has.
		Database: "default",
		// ClickHouse's built-in user, what a fresh install accepts.
		Username: "default",
		// Both protocols can compress every block; LZ4 cuts bytes
		// on the wire for little CPU, zstd more for more. auto: no
		// compression when every address is a loopback one (where
		// lz4 cost 16% of the sink's CPU and bought nothing),
		// lz4 otherwise.
		Compression: "auto",
		// A reachable server answers in milliseconds; 10s tolerates a
		// slow network without hanging start-up for long.
		DialTimeout: 10 * time.Second,
		// Generous: a full batch normally inserts in seconds, but a
		// server throttling inserts while merges catch up
		// (parts_to_delay_insert) needs longer, and abandoning an
		// attempt that would have succeeded only repeats the work.
		QueryTimeout: 60 * time.Second,
		// Two per table: one insert runs while the next batch is
		// sealed and sent, without multiplying parts per second.
		MaxInFlight: 2,
		// A burst makes the pools dial more connections and grow
		// their buffers; with a minute's lifetime that memory is gone
		// a minute or two after the burst. Redialing costs one
		// handshake per connection per minute.
		ConnMaxLifetime: time.Minute,
		// A server's budget is what it can take from all its writers.
		ShareBudget: true,
		// First backoff after a retriable error: a network blip is
		// usually over by then.
		RetryInitial: 500 * time.Millisecond,
		// Backoff ceiling: TOO_MANY_PARTS needs merges to catch up,
		// which takes tens of seconds; retrying faster only adds load.
		RetryMax: 30 * time.Second,
		// One cheap system.columns query per table: a column added
		// to the table is filled from the records that carry it at
		// most this long (plus batch.max_wait) after the ALTER.
		SchemaRefresh: 30 * time.Second,
		// Every replica of a shard takes parts, so the INSERT work
		// (and the part each one writes before replication copies
		// it) is shared, and a replica that is failing is found by
		// the next part rather than after a failover.
		ReplicaOrder: ReplicaRoundRobin,
		// An ON CLUSTER ALTER reaches every host within seconds; one
		// left half-applied needs a person, who gets this long.
		SchemaAgreementTimeout: 10 * time.Minute,
	}
}

// defaultBatch is the batch section's defaults.
func defaultBatch() Batch {
	return Batch{
		// Tens of thousands of rows per INSERT is where the fixed
		// cost of an insert (a part, a merge) becomes noise.
		MaxRows: 100_000,
		// Keeps a single INSERT (and its retry) a manageable block.
		MaxBytes: 32 * MiB,
		// MaxWait and MaxLatency are derived (fillLatency): at most 12
		// inserts per minute per table at low input rates.
		// Batch across partitions (invariant 3: inserts/min does not
		// grow with partition count).
		IgnorePartitions: true,
		// Eight full batches: room for MaxInFlight inserts per table
		// on a few tables while the next batches fill.
		BufferMemory: 256 * MiB,
		// Batches sealed by max_rows/max_bytes/max_wait as set; adaptive
		// is opt-in.
		Mode: BatchFixed,
		// Adaptive: one insert every 10 seconds per table, a load
		// ClickHouse's merges absorb on any table.
		TargetInsertsPerMinute: 6,
	}
}

// defaultErrors is the errors section's defaults.
func defaultErrors() Errors {
	return Errors{
		// Stop rather than lose data silently; opting into a DLQ is an
		// explicit decision.
		Tolerance: "none",
		// Today's conversion rules: a missing or null value becomes
		// the column's default, counted in sink_defaults_applied_total.
		OnMissing: "default",
		OnNull:    "default",
		// Compacted topics carry tombstones; they hold no row.
		OnTombstone: "skip",
		// Records no route's when: takes are as expected as those of a
		// topic no route names: counted, not errors.
		Unrouted: "skip",
		// Enough for any JSON event worth reading in SQL, small enough
		// that a stream of huge bad records cannot bloat the table.
		DLQValueMax: 1 * MiB,
	}
}

// normalize makes empty lists and maps nil, whether they were written as []
// or {} or left out, so that code and tests need to handle only one form.
func (c *Config) normalize() {
	// Kafka spells mechanisms in upper case; "scram-sha-256" is not a
	// different choice, just a different spelling.
	c.Kafka.SASL.Mechanism = strings.ToUpper(strings.TrimSpace(c.Kafka.SASL.Mechanism))
	nilIfEmpty(&c.Kafka.Brokers)
	nilIfEmpty(&c.Kafka.Topics)
	nilIfEmpty(&c.ClickHouse.Addrs)
	nilIfEmpty(&c.ClickHouse.Shards)
	nilIfEmpty(&c.SchemaRegistry.URLs)
	nilIfEmpty(&c.Routes)
	nilIfEmpty(&c.HTTP.AllowedHosts)
	if len(c.ClickHouse.Settings) == 0 {
		c.ClickHouse.Settings = nil
	}
	if len(c.Kafka.SASL.OAuth.Extensions) == 0 {
		c.Kafka.SASL.OAuth.Extensions = nil
	}
	for i := range c.Routes {
		if len(c.Routes[i].Columns) == 0 {
			c.Routes[i].Columns = nil
		}
		if len(c.Routes[i].When) == 0 {
			c.Routes[i].When = nil
		}
		nilIfEmpty(&c.Routes[i].Databases)
		nilIfEmpty(&c.Routes[i].Schema.Allow)
		nilIfEmpty(&c.Routes[i].Schema.Deny)
		if len(c.Routes[i].Schema.Settings) == 0 {
			c.Routes[i].Schema.Settings = nil
		}
	}
}

func nilIfEmpty[T any](s *[]T) {
	if len(*s) == 0 {
		*s = nil
	}
}

// fillDerived sets the defaults that depend on other options.
func (c *Config) fillDerived() {
	c.Batch.fillLatency(c.Kafka.FetchMaxWait)
	if c.Kafka.Group == "" {
		c.Kafka.Group = c.Name
	}
	if c.Kafka.ClientID == "" && c.Name != "" {
		c.Kafka.ClientID = "sink-" + c.Name
	}
	if c.SchemaRegistry.SubjectStrategy == "" {
		c.SchemaRegistry.SubjectStrategy = SubjectAny
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Format == "" {
			r.Format = route.DefaultFormat
		}
		r.fillSchemaDefaults()
		if r.Format.CDC() {
			if r.VersionColumn == "" {
				r.VersionColumn = "_version"
			}
			if r.DeletedColumn == "" {
				r.DeletedColumn = "_deleted"
			}
			if r.Truncate == "" {
				r.Truncate = TruncateSkip
			}
		}
	}
}

// anchor makes re match whole topic names only.
func anchor(re string) string { return `^(?:` + re + `)$` }

// Matches reports whether the route applies to topic.
func (r Route) Matches(topic string) bool {
	if r.Topic != "" {
		return r.Topic == topic
	}
	if r.TopicRegex == "" {
		return false
	}
	if r.re != nil {
		return r.re.MatchString(topic)
	}
	// Not validated (a Config built by hand): correct but slow.
	ok, err := regexp.MatchString(anchor(r.TopicRegex), topic)
	return err == nil && ok
}

// Consumes reports whether the consumer subscribes to topic: it is listed in
// kafka.topics or matches kafka.topic_regex.
func (c *Config) Consumes(topic string) bool {
	for _, t := range c.Kafka.Topics {
		if t == topic {
			return true
		}
	}
	switch {
	case c.Kafka.topicRE != nil:
		return c.Kafka.topicRE.MatchString(topic)
	case c.Kafka.TopicRegex != "":
		ok, err := regexp.MatchString(anchor(c.Kafka.TopicRegex), topic)
		return err == nil && ok
	}
	return false
}

// ConsumePatterns returns the subscription for kgo.ConsumeTopics when
// kafka.topic_regex is set, to be used together with kgo.ConsumeRegex: the
// anchored topic_regex followed by each literal topic, quoted. It returns nil
// when topic_regex is empty; then consume Topics as they are.
func (k Kafka) ConsumePatterns() []string {
	if k.TopicRegex == "" {
		return nil
	}
	out := []string{anchor(k.TopicRegex)}
	for _, t := range k.Topics {
		out = append(out, "^"+regexp.QuoteMeta(t)+"$")
	}
	return out
}

// RouteFor returns the first route, in configuration order, whose topic
// matches topic (ok false: none does), whatever its when: says. With when:
// conditions or fanout: all several routes may take records of one topic;
// RoutesFor lists them.
func (c *Config) RouteFor(topic string) (r Route, ok bool) {
	for _, r := range c.Routes {
		if r.Matches(topic) {
			return r, true
		}
	}
	return Route{}, false
}

// TableFor splits the route's table into database and table name, using
// clickhouse.database when the route names no database. For a table with
// placeholders use TableForTopic.
func (c *Config) TableFor(r Route) (db, table string) {
	if db, table, ok := strings.Cut(r.Table, "."); ok {
		return db, table
	}
	return c.ClickHouse.Database, r.Table
}

// redactedPassword replaces a non-empty password in printed configuration.
const redactedPassword = "******"

// Redacted returns a deep copy of c with every password masked, for
// printing. An empty password stays empty so that "no password" is visible.
// (A Secret masks itself when printed; Redacted also masks the value, so
// that a copy handed to code that calls Reveal leaks nothing either.)
func (c *Config) Redacted() *Config {
	cp := *c
	cp.Kafka.Brokers = clone(c.Kafka.Brokers)
	cp.Kafka.Topics = clone(c.Kafka.Topics)
	cp.ClickHouse.Addrs = clone(c.ClickHouse.Addrs)
	if c.ClickHouse.Settings != nil {
		cp.ClickHouse.Settings = make(map[string]any, len(c.ClickHouse.Settings))
		for k, v := range c.ClickHouse.Settings {
			cp.ClickHouse.Settings[k] = v
		}
	}
	if c.ClickHouse.Password != "" {
		cp.ClickHouse.Password = redactedPassword
	}
	if c.Kafka.SASL.Password != "" {
		cp.Kafka.SASL.Password = redactedPassword
	}
	if c.Kafka.SASL.OAuth.ClientSecret != "" {
		cp.Kafka.SASL.OAuth.ClientSecret = redactedPassword
	}
	cp.Kafka.SASL.OAuth.Extensions = maps.Clone(c.Kafka.SASL.OAuth.Extensions)
	cp.SchemaRegistry.URLs = clone(c.SchemaRegistry.URLs)
	if c.SchemaRegistry.Password != "" {
		cp.SchemaRegistry.Password = redactedPassword
	}
	if c.Routes != nil {
		cp.Routes = make([]Route, len(c.Routes))
		for i, r := range c.Routes {
			if r.Columns != nil {
				cols := make(map[string]string, len(r.Columns))
				for k, v := range r.Columns {
					cols[k] = v
				}
				r.Columns = cols
			}
			r.When = maps.Clone(r.When)
			r.Schema.Settings = maps.Clone(r.Schema.Settings)
			cp.Routes[i] = r
		}
	}
	return &cp
}

func clone(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sink/internal/cluster"
	"sink/internal/route"
)

// Limits that are not a matter of taste.
const (
	// Kafka serializes these timeouts as int32 milliseconds; anything
	// longer silently wraps on the wire (franz-go applies the same bound).
	maxWireTimeout = time.Duration(math.MaxInt32) * time.Millisecond
	// franz-go refuses to read broker responses over 1GiB, and a fetch
	// response is at least fetch_max_bytes when data is plentiful.
	maxFetchBytes = 1 * GiB
	// franz-go's lower bounds: less makes the client spin.
	minFetchMaxWait = 10 * time.Millisecond
	// maxInsertBudget bounds clickhouse.max_inserts_per_minute: 100 a
	// second, far past what a budget is for.
	maxInsertBudget   = 6000
	minGroupTimeout   = 100 * time.Millisecond
	minCommitInterval = 100 * time.Millisecond
	// franz-go's limit for a client id.
	maxClientIDLen = 256
)

var (
	// Names end up as consumer group and client id, in metrics labels and
	// log fields; the Kafka topic alphabet is safe in all of them.
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)
	topicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	// Identifiers are always quoted in generated SQL (chschema.QuoteIdent),
	// so quotes, backticks and spaces are harmless and allowed. A dot would
	// make "db.table" ambiguous; control characters are never intended.
	identRE = regexp.MustCompile(`^[^.\x00-\x1f\x7f]+$`)
	// hostNameRE is a DNS name, or "*." and one (http.allowed_hosts).
	hostNameRE = regexp.MustCompile(`^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$`)
)

// Validate checks every option and returns all problems at once, joined with
// errors.Join, each starting with the full key path of the option at fault.
// It does not fill defaults; Load and Parse do that before calling it.
//
// Validate also caches the compiled topic regular expressions used by
// Route.Matches and Config.Consumes, so call it before sharing a Config that
// was built by hand.
func (c *Config) Validate() error {
	var p problems

	switch {
	case c.Name == "":
		p.add("name: required (it is also the default consumer group)")
	case !nameRE.MatchString(c.Name):
		p.add("name: %q must be 1-200 letters, digits, '.', '_' or '-', starting with a letter or digit (it is the default consumer group and client id)", c.Name)
	}

	c.validateKafka(&p)
	c.validateClickHouse(&p)
	c.validateBatch(&p)
	c.validateRoutes(&p)
	c.validateErrors(&p)
	c.validateFanout(&p)
	c.validateTruncate(&p)
	c.validateSecurity(&p)
	c.validateSchemaRegistry(&p)

	c.validateHTTP(&p)
	p.oneOf("log.level", c.Log.Level, logLevels)
	p.oneOf("log.format", c.Log.Format, logFormats)
	p.positive("shutdown_timeout", c.ShutdownTimeout)
	p.oneOf("delivery", c.Delivery, deliveries)

	return errors.Join(p...)
}

func (c *Config) validateKafka(p *problems) {
	k := &c.Kafka
	p.addrs("kafka.brokers", k.Brokers)
	if k.Group == "" && c.Name != "" {
		p.add("kafka.group: required")
	}
	if len(k.ClientID) > maxClientIDLen {
		p.add("kafka.client_id: %d bytes is longer than the maximum %d", len(k.ClientID), maxClientIDLen)
	}

	if len(k.Topics) == 0 && k.TopicRegex == "" {
		p.add("kafka.topics: set topics or topic_regex")
	}
	seen := make(map[string]int, len(k.Topics))
	for i, t := range k.Topics {
		key := fmt.Sprintf("kafka.topics[%d]", i)
		p.topic(key, t)
		if j, dup := seen[t]; dup {
			p.add("%s: %q is already kafka.topics[%d]", key, t, j)
		}
		seen[t] = i
	}
	k.topicRE = p.regex("kafka.topic_regex", k.TopicRegex)

	p.oneOf("kafka.start_offset", k.StartOffset, startOffsets)
	p.oneOf("kafka.group_protocol", k.GroupProtocol, groupProtocols)

	p.positiveSize("kafka.fetch_min_bytes", k.FetchMinBytes)
	// fetch_max_bytes and max_partition_fetch_bytes are deprecated: 0
	// (unset) lets the consumer derive them.
	if k.FetchMaxBytes > maxFetchBytes {
		p.add("kafka.fetch_max_bytes (%v) must be at most %v", k.FetchMaxBytes, maxFetchBytes)
	}
	if k.FetchMaxBytes > 0 && k.FetchMinBytes > k.FetchMaxBytes {
		// The broker would answer every fetch only at fetch_max_wait.
		p.add("kafka.fetch_min_bytes (%v) must be at most kafka.fetch_max_bytes (%v)", k.FetchMinBytes, k.FetchMaxBytes)
	}
	if k.FetchMaxBytes > 0 && k.MaxPartitionFetchBytes > k.FetchMaxBytes {
		// franz-go would silently clamp it; say so instead.
		p.add("kafka.max_partition_fetch_bytes (%v) must be at most kafka.fetch_max_bytes (%v)", k.MaxPartitionFetchBytes, k.FetchMaxBytes)
	}

	p.between("kafka.fetch_max_wait", k.FetchMaxWait, minFetchMaxWait, maxWireTimeout)
	p.between("kafka.session_timeout", k.SessionTimeout, minGroupTimeout, maxWireTimeout)
	p.between("kafka.rebalance_timeout", k.RebalanceTimeout, minGroupTimeout, maxWireTimeout)
	p.between("kafka.commit_interval", k.CommitInterval, minCommitInterval, maxWireTimeout)
	p.between("kafka.request_timeout", k.RequestTimeout, minGroupTimeout, maxWireTimeout)
	if k.RequestTimeout > 0 && k.RequestTimeout <= k.FetchMaxWait {
		// A broker legitimately holds a fetch for fetch_max_wait; a
		// shorter request timeout fails every quiet fetch.
		p.add("kafka.request_timeout (%v) must exceed kafka.fetch_max_wait (%v)", k.RequestTimeout, k.FetchMaxWait)
	}
}

func (c *Config) validateClickHouse(p *problems) {
	ch := &c.ClickHouse
	p.oneOf("clickhouse.protocol", ch.Protocol, protocols)
	p.addrs("clickhouse.addrs", ch.Addrs)
	p.ident("clickhouse.database", ch.Database, "database")
	if ch.Username == "" {
		p.add("clickhouse.username: required")
	}
	p.oneOf("clickhouse.compression", ch.Compression, compressions)
	p.insertSettings(ch.Settings)
	p.positive("clickhouse.dial_timeout", ch.DialTimeout)
	p.positive("clickhouse.query_timeout", ch.QueryTimeout)
	if ch.MaxInFlight < 1 {
		p.add("clickhouse.max_in_flight (%d) must be at least 1", ch.MaxInFlight)
	}
	p.positive("clickhouse.conn_max_lifetime", ch.ConnMaxLifetime)
	if ch.MaxInsertsPerMinute < 0 || ch.MaxInsertsPerMinute > maxInsertBudget {
		p.add("clickhouse.max_inserts_per_minute (%g) must be 0 (no budget) or above 0 and at most %d", ch.MaxInsertsPerMinute, maxInsertBudget)
	}
	p.positive("clickhouse.retry_initial", ch.RetryInitial)
	p.positive("clickhouse.retry_max", ch.RetryMax)
	if ch.RetryMax > 0 && ch.RetryInitial > ch.RetryMax {
		p.add("clickhouse.retry_initial (%v) must be at most clickhouse.retry_max (%v)", ch.RetryInitial, ch.RetryMax)
	}
	if ch.Cluster != "" {
		p.ident("clickhouse.cluster", ch.Cluster, "cluster")
	}
	p.shards(ch)
	switch ch.ReplicaOrder {
	case ReplicaRoundRobin, ReplicaInOrder, ReplicaRandom:
	default:
		p.add("clickhouse.replica_order %q: want %s, %s or %s", ch.ReplicaOrder, ReplicaRoundRobin, ReplicaInOrder, ReplicaRandom)
	}
	if ch.SchemaAgreementTimeout <= 0 {
		p.add("clickhouse.schema_agreement_timeout (%v) must be positive", ch.SchemaAgreementTimeout)
	}
	if ch.SchemaRefresh < 0 {
		p.add("clickhouse.schema_refresh (%v) must be 0 (off) or positive", ch.SchemaRefresh)
	}
}

// insertSettings checks clickhouse.settings: named, each a string, a
// number or a boolean.
func (p *problems) insertSettings(settings map[string]any) {
	for _, name := range sortedKeys(settings) {
		key := "clickhouse.settings." + name
		if name == "" {
			p.add("clickhouse.settings: empty setting name")
			continue
		}
		switch settings[name].(type) {
		case string, bool, int, int64, uint64, float64:
		default:
			p.add("%s: must be a string, number or boolean, got %T", key, settings[name])
		}
	}
}

// shards checks clickhouse.shards: each shard has replicas, each replica
// a host:port listed once, and insert_quorum no more than a shard's
// replicas.
func (p *problems) shards(ch *ClickHouse) {
	seenAddr := map[string]string{}
	for i, shard := range ch.Shards {
		key := fmt.Sprintf("clickhouse.shards[%d]", i)
		if len(shard) == 0 {
			p.add("%s: a shard needs at least one replica (host:port)", key)
		}
		for j, a := range shard {
			rkey := fmt.Sprintf("%s[%d]", key, j)
			if err := checkHostPort(a, false); err != nil {
				p.add("%s: %q %v", rkey, a, err)
			} else if prev, dup := seenAddr[a]; dup {
				p.add("%s: %q is already %s", rkey, a, prev)
			}
			seenAddr[a] = rkey
		}
	}
	if q, ok := settingInt(ch.Settings["insert_quorum"]); ok {
		for _, r := range ch.Shards {
			if q > len(r) {
				p.add("clickhouse.settings.insert_quorum (%d) is more than the %d replicas of a shard in clickhouse.shards: no INSERT could succeed", q, len(r))
				break
			}
		}
	}
}

func (c *Config) validateBatch(p *problems) {
	b := &c.Batch
	if b.MaxRows < 1 {
		p.add("batch.max_rows (%d) must be at least 1", b.MaxRows)
	}
	p.positiveSize("batch.max_bytes", b.MaxBytes)
	if b.BufferMemory < b.MaxBytes {
		// One full batch must fit, or the consumer would stop fetching
		// before any batch can seal by size.
		p.add("batch.buffer_memory (%v) must be at least batch.max_bytes (%v)", b.BufferMemory, b.MaxBytes)
	}
	p.oneOf("batch.mode", b.Mode, []string{BatchFixed, BatchAdaptive})
	if b.TargetInsertsPerMinute <= 0 || b.TargetInsertsPerMinute > 600 {
		p.add("batch.target_inserts_per_minute (%g) must be above 0 and at most 600", b.TargetInsertsPerMinute)
	}
	p.positive("batch.max_latency", b.MaxLatency)
	if (b.Mode == BatchAdaptive || b.derivedWait) && b.MaxLatency <= c.Kafka.FetchMaxWait {
		p.add("batch.max_latency (%v) must exceed kafka.fetch_max_wait (%v): a record can wait that long in Kafka before it reaches a batch",
			b.MaxLatency, c.Kafka.FetchMaxWait)
	}
}

func (c *Config) validateRoutes(p *problems) {
	k := &c.Kafka
	if len(c.Routes) == 0 && len(k.Topics) == 0 {
		// With listed topics, the per-topic "has no route" below says it.
		p.add("routes: at least one route is required")
	}
	type target struct{ topic, regex, db, table string }
	seen := make(map[target]int, len(c.Routes))
	for i := range c.Routes {
		r := &c.Routes[i]
		key := fmt.Sprintf("routes[%d]", i)
		c.validateRoute(p, key, r)

		db, table := c.TableFor(*r)
		t := target{r.Topic, r.TopicRegex, db, table}
		if j, dup := seen[t]; dup && r.Table != "" && len(r.When) == 0 && len(c.Routes[j].When) == 0 {
			p.add("%s: same topic and table as routes[%d]; every record would be inserted twice", key, j)
		} else {
			seen[t] = i
		}
	}

	for _, t := range k.Topics {
		if !slices.ContainsFunc(c.Routes, func(r Route) bool { return r.Matches(t) }) {
			p.add("kafka.topics: topic %q has no route", t)
		}
	}
}

// validateRoute checks one route, r at key, on its own: its topics, its
// table, its format and what goes with it, its target, its bound.
func (c *Config) validateRoute(p *problems, key string, r *Route) {
	c.routeTopics(p, key, r)
	p.routeTable(key, r)
	c.routeFormat(p, key, r)
	p.validateDebezium(key, r)
	p.validateSchema(key, r)
	p.validateCreate(key, r)
	if err := route.CheckMessage(r.Format, r.Message); err != nil {
		p.add("%s.message: %v", key, err)
	}
	for _, col := range sortedKeys(r.Columns) {
		if col == "" {
			p.add("%s.columns: empty column name", key)
			continue
		}
		if _, err := route.ParseSource(r.Format, r.Columns[col]); err != nil {
			p.add("%s.columns.%s: %v", key, col, err)
		}
	}
	c.validateTarget(p, key, r)
	if r.MaxLatency < 0 {
		p.add("%s.max_latency (%v) must be 0 (the batch settings' bound) or positive", key, r.MaxLatency)
	} else if r.MaxLatency > 0 && r.MaxLatency <= c.Kafka.FetchMaxWait {
		p.add("%s.max_latency (%v) must exceed kafka.fetch_max_wait (%v): a record can wait that long in Kafka before it reaches a batch",
			key, r.MaxLatency, c.Kafka.FetchMaxWait)
	}
}

// routeTopics checks a route's topic or topic_regex against what the sink
// consumes, and compiles the regex.
func (c *Config) routeTopics(p *problems, key string, r *Route) {
	k := &c.Kafka
	r.re = nil
	switch {
	case r.Topic != "" && r.TopicRegex != "":
		p.add("%s: set topic or topic_regex, not both", key)
	case r.Topic == "" && r.TopicRegex == "":
		p.add("%s.topic: set topic or topic_regex", key)
	case r.Topic != "":
		if p.topic(key+".topic", r.Topic) && !c.Consumes(r.Topic) {
			if k.TopicRegex == "" {
				p.add("%s: topic %q is not consumed (not in kafka.topics)", key, r.Topic)
			} else {
				p.add("%s: topic %q is not consumed (not in kafka.topics and does not match kafka.topic_regex)", key, r.Topic)
			}
		}
	default:
		r.re = p.regex(key+".topic_regex", r.TopicRegex)
		// Only a literal subscription can be checked before the
		// broker's topic list is known.
		if r.re != nil && k.TopicRegex == "" && !slices.ContainsFunc(k.Topics, r.re.MatchString) {
			p.add("%s: topic_regex %q matches none of kafka.topics", key, r.TopicRegex)
		}
	}
}

// routeTable checks a route's table: required, a template that expands,
// and "table" or "database.table" of valid names.
func (p *problems) routeTable(key string, r *Route) {
	tbl := p.checkTableTemplate(key, r)
	p.checkTemplateDatabase(key, r)
	if r.Table == "" {
		p.add("%s.table: %s", key, missingTable(r))
	} else if db, table, ok := strings.Cut(tbl, "."); ok {
		if strings.Contains(table, ".") {
			p.add("%s.table: %q must be \"table\" or \"database.table\"", key, r.Table)
		} else {
			p.ident(key+".table", db, "database")
			p.ident(key+".table", table, "table")
		}
	} else {
		p.ident(key+".table", tbl, "table")
	}
}

// routeFormat checks a route's format: set, known, and with a registry
// where it needs one.
func (c *Config) routeFormat(p *problems, key string, r *Route) {
	switch {
	case r.Format == "":
		p.add("%s.format: required (supported: %s)", key, route.FormatNames())
	case !r.Format.Valid():
		p.add("%s.format: unsupported format %q (supported: %s)", key, r.Format, route.FormatNames())
	case r.Format.Registry() && !c.SchemaRegistry.Enabled():
		p.add("%s.format: %s records name their schema by registry id, so schema_registry.urls is required", key, r.Format)
	}
}

// validateTarget checks a route's cluster target and its sharding, and that
// every route into the same table places rows the same way.
func (c *Config) validateTarget(p *problems, key string, r *Route) {
	if !c.validateSharding(p, key, r) {
		return
	}
	if c.ExactlyOnce() {
		switch {
		case r.Target == TargetDistributed:
			// The Distributed engine re-splits the block on each shard's
			// side; whether each shard drops a replayed part by the
			// batch's token is not something this sink has proven.
			p.add("%s: delivery exactly_once with target distributed is not supported; use target: local with sharding_key (each shard's part is rebuilt identically and deduplicated there)", key)
		case r.Target == TargetLocal && r.Sharding == ShardingRandom:
			p.add("%s: delivery exactly_once with sharding random: a replayed batch could go to another shard and be inserted twice; use sharding_key", key)
		}
	}
	db, table := c.TableFor(*r)
	for j := range c.Routes {
		o := &c.Routes[j]
		if o == r {
			break
		}
		if odb, ot := c.TableFor(*o); odb == db && ot == table && !samePlacement(o, r) {
			p.add("%s: writes %s.%s like routes[%d] but with another target or sharding; one table is placed one way", key, db, table, j)
		}
	}
}

// samePlacement reports whether routes a and b place a table's rows the
// same way: target, sharding, key and hash.
func samePlacement(a, b *Route) bool {
	return a.Target == b.Target && a.Sharding == b.Sharding && a.ShardingKey == b.ShardingKey && a.Hash() == b.Hash()
}

// validateSharding checks a route's target and the sharding keys that go
// with it; false for a target it does not know (nothing more to check).
func (c *Config) validateSharding(p *problems, key string, r *Route) bool {
	sharded := r.Sharding != "" || r.ShardingKey != "" || r.ShardingHash != ""
	switch r.Target {
	case "":
		if sharded {
			p.add("%s: sharding, sharding_key and sharding_hash need target: local", key)
		}
	case TargetDistributed:
		if sharded {
			p.add("%s: target distributed: the Distributed table's own sharding key places rows; sharding, sharding_key and sharding_hash are for target: local", key)
		}
	case TargetLocal:
		if !c.ClickHouse.Clustered() {
			p.add("%s.target: local writes each shard's table, so clickhouse.cluster or clickhouse.shards is required", key)
		}
		p.localSharding(key, r)
	default:
		p.add("%s.target: %q is not one of distributed, local (or unset: the table through clickhouse.addrs)", key, r.Target)
		return false
	}
	return true
}

// localSharding checks how a target: local route places rows: at random,
// or by a key column and one of the hashes.
func (p *problems) localSharding(key string, r *Route) {
	switch {
	case r.Sharding != "" && r.Sharding != ShardingRandom:
		p.add("%s.sharding: %q is not random (or set sharding_key)", key, r.Sharding)
	case r.Sharding == ShardingRandom && (r.ShardingKey != "" || r.ShardingHash != ""):
		p.add("%s: sharding random places whole batches; sharding_key and sharding_hash are for placing rows by key", key)
	case r.Sharding == "" && r.ShardingKey == "":
		p.add("%s: target local needs sharding: random or sharding_key: COLUMN", key)
	case r.ShardingHash != "" && !slices.Contains(cluster.Hashes, r.ShardingHash):
		p.add("%s.sharding_hash: %q is not one of %s", key, r.ShardingHash, strings.Join(cluster.Hashes, ", "))
	}
}

func (c *Config) validateErrors(p *problems) {
	e := &c.Errors
	p.oneOf("errors.tolerance", e.Tolerance, tolerances)
	p.oneOf("errors.on_missing", e.OnMissing, onValues)
	p.oneOf("errors.on_null", e.OnNull, onValues)
	p.oneOf("errors.on_tombstone", e.OnTombstone, onTombstones)
	c.validateDLQTable(p)
	switch {
	case e.Tolerance == "all" && e.DLQTopic == "" && !c.HasDLQTable():
		p.add("errors.dlq_topic: required when errors.tolerance is all (or errors.dlq_table)")
	case e.DLQCreate && e.DLQTopic == "":
		p.add("errors.dlq_create: set, but there is no errors.dlq_topic to create")
	case e.Tolerance == "none" && e.DLQTopic != "":
		p.add("errors.dlq_topic: set, but errors.tolerance is none, so nothing is sent to it (set errors.tolerance: all)")
	case e.DLQTopic != "":
		if p.topic("errors.dlq_topic", e.DLQTopic) && c.Consumes(e.DLQTopic) {
			p.add("errors.dlq_topic: %q is consumed by this sink (kafka.topics or kafka.topic_regex); dead letters would be read back", e.DLQTopic)
		}
	}
}

// checkHostPort accepts "host:port"; listen admits ":8080" (all interfaces)
// and port 0 (any free port), which only make sense for a listener.
func (c *Config) validateHTTP(p *problems) {
	h := c.HTTP
	if h.Listen != "" {
		if err := checkHostPort(h.Listen, true); err != nil {
			p.add("http.listen: %q %v (or \"\" to disable)", h.Listen, err)
			return
		}
	}
	for _, name := range h.AllowedHosts {
		if !hostNameRE.MatchString(name) {
			p.add("http.allowed_hosts: %q is not a host name (letters, digits, '-' and dots, no port; \"*.\" in front admits any name below)", name)
		}
	}
	switch {
	case !h.Admin:
		if h.AdminToken != "" {
			p.add("http.admin_token: set (%s), but http.admin is false, so the admin endpoints are off", AdminTokenEnv)
		}
	case h.Listen == "":
		p.add("http.admin: true needs http.listen (the admin endpoints are served there)")
	case h.AdminToken == "" && !LoopbackListen(h.Listen):
		p.add("http.admin: true on %q, which is not a loopback address, needs a bearer token: set %s (at least %d characters)", h.Listen, AdminTokenEnv, MinAdminTokenLen)
	case h.AdminToken != "" && len(h.AdminToken) < MinAdminTokenLen:
		p.add("http.admin_token (%s): %d characters is too short to be a secret; use at least %d", AdminTokenEnv, len(h.AdminToken), MinAdminTokenLen)
	}
}

// LoopbackListen reports whether the listen address addr (host:port) is
// reachable only from this host: a loopback IP or "localhost". An empty
// host listens on every interface, and any other name may resolve to a
// public address, so neither is loopback.
func LoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func checkHostPort(s string, listen bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("is not host:port")
	}
	if host == "" && !listen {
		return errors.New("has no host")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (n == 0 && !listen) {
		return fmt.Errorf("has an invalid port %q", port)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// problems collects validation errors.
type problems []error

func (p *problems) add(format string, args ...any) {
	*p = append(*p, fmt.Errorf(format, args...))
}

func (p *problems) oneOf(key, v string, allowed []string) {
	if !slices.Contains(allowed, v) {
		p.add("%s: %q is not one of %s", key, v, strings.Join(allowed, ", "))
	}
}

func (p *problems) positive(key string, d time.Duration) {
	if d <= 0 {
		p.add("%s (%v) must be positive", key, d)
	}
}

func (p *problems) positiveSize(key string, b ByteSize) {
	if b <= 0 {
		p.add("%s (%v) must be positive", key, b)
	}
}

func (p *problems) between(key string, d, lo, hi time.Duration) {
	switch {
	case d < lo:
		p.add("%s (%v) must be at least %v", key, d, lo)
	case d > hi:
		p.add("%s (%v) must be at most %v", key, d, hi)
	}
}

func (p *problems) addrs(key string, addrs []string) {
	if len(addrs) == 0 {
		p.add("%s: required (host:port, ...)", key)
	}
	for i, a := range addrs {
		if err := checkHostPort(a, false); err != nil {
			p.add("%s[%d]: %q %v", key, i, a, err)
		}
	}
}

// topic reports whether t is a legal Kafka topic name, adding a problem if not.
func (p *problems) topic(key, t string) bool {
	if !topicRE.MatchString(t) || t == "." || t == ".." {
		p.add("%s: %q is not a valid topic name (1-249 letters, digits, '.', '_' or '-')", key, t)
		return false
	}
	return true
}

// settingRE is a table setting's name.
var settingRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateCreate checks routes[i].schema's create, engine, order_by,
// partition_by and settings.
func (p *problems) validateCreate(key string, r *Route) {
	s := r.Schema
	key += ".schema"
	switch s.Create {
	case "", "never":
		p.createOnly(key, s)
		return
	case CreateIfMissing:
	default:
		p.add("%s.create: %q is not one of never, %s", key, s.Create, CreateIfMissing)
		return
	}
	switch {
	case r.TopicRegex != "":
		p.add("%s.create: %s needs a route with topic: (the columns come from that topic's records); a topic_regex route's tables must exist", key, CreateIfMissing)
	case r.TableFromTopic():
		p.add("%s.create: %s needs a table name without placeholders (%q); create the tables named after topics yourself", key, CreateIfMissing, r.Table)
	}
	if r.Format.CDC() {
		p.add("%s.create: %s does not work with format %s (its columns mirror the source database's table; create it with the types you want)", key, CreateIfMissing, r.Format)
	}
	if len(r.Columns) > 0 {
		p.add("%s.create: %s makes a column of each top-level field of the records; it cannot be combined with columns: (create the table yourself to map sources into it)", key, CreateIfMissing)
	}
	p.createTable(key, s)
}

// createOnly refuses the keys that describe a created table on a route
// that creates none.
func (p *problems) createOnly(key string, s RouteSchema) {
	for _, set := range []struct {
		name string
		on   bool
	}{{"engine", s.Engine != ""}, {"order_by", s.OrderBy != ""}, {"partition_by", s.PartitionBy != ""}, {"settings", len(s.Settings) > 0}} {
		if set.on {
			p.add("%s.%s: only used with create: %s (it describes the table the sink creates)", key, set.name, CreateIfMissing)
		}
	}
}

// createTable checks the table a route creates: its engine, its sorting
// and partition expressions, its settings.
func (p *problems) createTable(key string, s RouteSchema) {
	if s.Engine != "" && s.Engine != EngineReplacingMergeTree && s.Engine != EngineMergeTree && s.Engine != "ReplacingMergeTree(_offset)" {
		p.add("%s.engine: %q is not one of %s (versioned by _offset, with the Kafka columns) or %s", key, s.Engine, EngineReplacingMergeTree, EngineMergeTree)
	}
	if strings.TrimSpace(s.OrderBy) == "" {
		p.add("%s.order_by: required with create: %s (the sorting key, e.g. \"(id)\", never guessed; \"tuple()\" for none) (%s)", key, CreateIfMissing, createDoc)
	}
	for _, e := range []struct{ name, v string }{{"order_by", s.OrderBy}, {"partition_by", s.PartitionBy}} {
		if strings.ContainsAny(e.v, ";\x00") {
			p.add("%s.%s: %q: an expression, without ';'", key, e.name, e.v)
		}
	}
	for _, name := range sortedKeys(s.Settings) {
		if !settingRE.MatchString(name) {
			p.add("%s.settings: %q is not a setting name (letters, digits and '_')", key, name)
		}
		switch v := s.Settings[name].(type) {
		case string, bool, int, int64, uint64, float64:
			if str, ok := v.(string); ok && strings.ContainsAny(str, "\x00") {
				p.add("%s.settings.%s: a value without NUL bytes", key, name)
			}
		default:
			p.add("%s.settings.%s: %v is not a number, a boolean or a string", key, name, v)
		}
	}
}

func (p *problems) ident(key, v, what string) {
	if !identRE.MatchString(v) {
		p.add("%s: %q is not a valid %s name (not empty, no dots, no control characters)", key, v, what)
	}
}

// regex compiles re anchored, returning nil (and adding a problem) when it
// does not compile, and nil without a problem when re is empty.
func (p *problems) regex(key, re string) *regexp.Regexp {
	if re == "" {
		return nil
	}
	compiled, err := regexp.Compile(anchor(re))
	if err != nil {
		// Report against the user's pattern, not the anchored one.
		if _, err2 := regexp.Compile(re); err2 != nil {
			err = err2
		}
		p.add("%s: invalid regular expression: %v", key, err)
		return nil
	}
	return compiled
}

// Warnings lists settings that are valid but likely to surprise: they are
// printed by `sink check` and logged at start, never refused. The
// deprecated keys set come first, one line each.
func (c *Config) Warnings() []string {
	// One line per deprecated key set, first.
	w := slices.Clone(c.deprecated)
	if c.Batch.MaxBytes > 0 && c.Batch.BufferMemory < 2*c.Batch.MaxBytes {
		w = append(w, fmt.Sprintf("batch.buffer_memory (%s) holds fewer than two batches of batch.max_bytes (%s): "+
			"fetching pauses while a full batch is inserted", c.Batch.BufferMemory, c.Batch.MaxBytes))
	}
	return append(w, c.plaintextWarnings()...)
}

// settingInt reads a ClickHouse setting's value as a whole number: from
// YAML an integer, from the environment a string.
func settingInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case uint64:
		return int(min(x, math.MaxInt32)), true
	case float64:
		return int(x), x == math.Trunc(x) && math.Abs(x) <= math.MaxInt32
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		return n, err == nil
	}
	return 0, false
}

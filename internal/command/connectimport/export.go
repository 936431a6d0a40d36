package connectimport

import (
	"net"
	"strconv"
	"strings"
	"time"

	"sink/config"
)

// ConnectClass is the connector.class the sink reports for itself in
// Kafka Connect's shapes (GET /connectors/NAME/config and .../tasks): it is
// not a Connect plugin, and says so rather than borrow one's name.
const ConnectClass = "sink"

// exportRule maps one of the sink's keys (config.Flat's) back to the key
// of ClickHouse's Kafka Connect sink that `sink import` reads it from: the
// reverse of a carried key. conv turns the sink's value into the
// connector's (nil: the same text); !ok leaves the key as the sink's.
type exportRule struct {
	from, to string
	conv     func(cfg *config.Config, v string) (string, bool)
}

// exportRules are the keys that have a counterpart in a Connect config,
// each the reverse of what mapKeys carries.
var exportRules = []exportRule{
	{"kafka.topics", "topics", nil},
	{"kafka.topic_regex", "topics.regex", nil},
	{"kafka.group", "consumer.override.group.id", nil},
	{"kafka.brokers", "consumer.override.bootstrap.servers", nil},
	{"kafka.client_id", "consumer.override.client.id", nil},
	{"kafka.fetch_min_bytes", "consumer.override.fetch.min.bytes", bytesText},
	{"kafka.fetch_max_wait", "consumer.override.fetch.max.wait.ms", unitsOf(time.Millisecond)},
	{"kafka.request_timeout", "consumer.override.request.timeout.ms", unitsOf(time.Millisecond)},
	{"kafka.session_timeout", "consumer.override.session.timeout.ms", unitsOf(time.Millisecond)},
	{"kafka.start_offset", "consumer.override.auto.offset.reset", nil},
	{"clickhouse.database", "database", nil},
	{"clickhouse.username", "username", nil},
	{"clickhouse.password", "password", nil},
	{"clickhouse.tls.enabled", "ssl", nil},
	{"clickhouse.query_timeout", "timeoutSeconds", unitsOf(time.Second)},
	{"clickhouse.schema_refresh", "tableRefreshInterval", unitsOf(time.Second)},
	{"batch.max_rows", "bufferCount", nil},
	{"batch.max_latency", "bufferFlushTime", flushTime},
	{"batch.ignore_partitions", "ignorePartitionsWhenBatching", nil},
	{"errors.tolerance", "errors.tolerance", nil},
	{"errors.dlq_topic", "errors.deadletterqueue.topic.name", nil},
	{"delivery", "exactlyOnce", func(_ *config.Config, v string) (string, bool) {
		return strconv.FormatBool(v == config.DeliveryExactlyOnce), true
	}},
}

// ConnectConfig is cfg the way Kafka Connect's GET /connectors/NAME/config
// shows a connector's config: name, connector.class (ConnectClass) and
// tasks.max (1: one process consumes every partition it is given), each
// setting that ClickHouse's Kafka Connect sink has a key for under that
// key (the keys `sink import` reads, so the two directions agree), and
// every other setting under the sink's own key path (config.Flat). Secrets
// are masked; a setting that is not set ("") is left out, as Connect
// leaves out a key a config does not name.
func ConnectConfig(cfg *config.Config) map[string]string {
	flat := cfg.Flat()
	out := map[string]string{"name": cfg.Name, "connector.class": ConnectClass, "tasks.max": "1"}
	delete(flat, "name")
	for _, r := range exportRules {
		v, ok := flat[r.from]
		if !ok {
			continue
		}
		if r.conv != nil {
			if v, ok = r.conv(cfg, v); !ok {
				continue
			}
		}
		delete(flat, r.from)
		if v != "" {
			out[r.to] = v
		}
	}
	exportAddress(cfg, flat, out)
	for k, v := range flat {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// exportAddress gives one HTTP address as the official sink's hostname
// and port (the only protocol it speaks); several addresses, or native
// ones, stay clickhouse.addrs.
func exportAddress(cfg *config.Config, flat, out map[string]string) {
	if cfg.ClickHouse.Protocol != "http" || len(cfg.ClickHouse.Addrs) != 1 {
		return
	}
	host, port, err := net.SplitHostPort(cfg.ClickHouse.Addrs[0])
	if err != nil {
		return
	}
	out["hostname"], out["port"] = host, port
	delete(flat, "clickhouse.addrs")
}

// flushTime is the official sink's bufferFlushTime for a fixed-mode
// config: the batch's wait in milliseconds (batch.max_latency less
// kafka.fetch_max_wait, which import adds back). Adaptive batching has no
// flush time: batch.max_latency stays the sink's key.
func flushTime(cfg *config.Config, _ string) (string, bool) {
	w := cfg.Batch.MaxWait
	if cfg.Batch.Mode == config.BatchAdaptive || w <= 0 || w%time.Millisecond != 0 {
		return "", false
	}
	return strconv.FormatInt(w.Milliseconds(), 10), true
}

// unitsOf turns a duration's text into a whole number of unit (what
// Connect's *.ms and *Seconds keys hold); !ok when it is not whole.
func unitsOf(unit time.Duration) func(*config.Config, string) (string, bool) {
	return func(_ *config.Config, v string) (string, bool) {
		d, err := time.ParseDuration(v)
		if err != nil || d%unit != 0 {
			return v, false
		}
		return strconv.FormatInt(int64(d/unit), 10), true
	}
}

// bytesText turns a size's text (16MiB) into a number of bytes.
func bytesText(_ *config.Config, v string) (string, bool) {
	b, err := config.ParseByteSize(strings.TrimSpace(v))
	if err != nil {
		return v, false
	}
	return strconv.FormatInt(int64(b), 10), true
}

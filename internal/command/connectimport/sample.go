package connectimport

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/consumer"
	"sink/internal/jsonscan"
)

// A connector whose config names no value.converter gets the Connect
// worker's, which is JsonConverter with schemas.enable=true unless the
// worker's own config says otherwise. The import cannot see the worker's
// config, so it reads a sample of the connector's topics and says what the
// records are: Kafka Connect's JSON envelope ({"schema", "payload"}, what
// the default writes), plain JSON objects (schemas.enable=false), or
// something else; the routes' format follows.

// Sample is what a sample of one topic's newest records shows.
type Sample struct {
	Topic string
	// Envelopes are Kafka Connect's JSON envelopes (jsonscan's rule), Plain
	// other JSON objects, Other values that are not a JSON object,
	// Tombstones null values.
	Envelopes, Plain, Other, Tombstones int
	Err                                 error // the topic could not be read
}

// Records reads up to n of the newest records of topic with the Kafka
// settings of a sink config (the YAML the import wrote): KafkaRecords.
type Records func(ctx context.Context, yaml []byte, topic string, n int) ([]*kgo.Record, error)

// KafkaRecords is the Records of `sink import`: consumer.Sampler with the
// YAML's kafka settings, passwords from the environment (SINK_...) as for
// `sink run`.
func KafkaRecords(ctx context.Context, yaml []byte, topic string, n int) ([]*kgo.Record, error) {
	cfg, err := config.Parse(yaml, os.Environ())
	if err != nil {
		return nil, err
	}
	return consumer.Sampler{Kafka: cfg.Kafka}.Sample(ctx, topic, n)
}

// sampleTimeout bounds the reading of one connector's topics (brokers
// that do not answer cost this much, once).
const sampleTimeout = 10 * time.Second

// sampleTopics reads n records of each topic with read and classifies
// them.
func sampleTopics(read Records, yaml []byte, topics []string, n int) []Sample {
	ctx, cancel := context.WithTimeout(context.Background(), sampleTimeout)
	defer cancel()
	out := make([]Sample, 0, len(topics))
	for _, t := range topics {
		recs, err := read(ctx, yaml, t, n)
		s := classify(t, recs)
		s.Err = err
		out = append(out, s)
	}
	return out
}

// classify counts what kind of value each record holds.
func classify(topic string, recs []*kgo.Record) Sample {
	s := Sample{Topic: topic}
	var sc jsonscan.Scanner
	for _, r := range recs {
		if r.Value == nil {
			s.Tombstones++
			continue
		}
		top, err := sc.Scan(r.Value)
		_, _, env := sc.Envelope()
		switch {
		case err != nil || top != "object":
			s.Other++
		case env:
			s.Envelopes++
		default:
			s.Plain++
		}
	}
	return s
}

// sampled sums samples: the records of each kind over every topic, and
// the topics that could not be read.
func sampled(samples []Sample) (total Sample, failed []string) {
	for _, s := range samples {
		total.Envelopes += s.Envelopes
		total.Plain += s.Plain
		total.Other += s.Other
		total.Tombstones += s.Tombstones
		if s.Err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", s.Topic, s.Err))
		}
	}
	return total, failed
}

// defaultConverter picks the format of a connector that names no
// value.converter and says why: from what the sample of its topics shows
// (Options.Samples), else format json, which reads the default's envelope
// and plain JSON alike.
func (v *conv) defaultConverter() {
	const assumed = "value.converter is not in the connector config, so the Connect worker's applies (Connect's default: JsonConverter with schemas.enable=true, which writes {\"schema\", \"payload\"} envelopes)"
	if v.cdc {
		v.notes = append(v.notes, assumed+"; format debezium-json reads Debezium's events with or without the schema")
		return
	}
	v.format = "json"
	if v.opts.Samples == nil {
		v.notes = append(v.notes, assumed+"; format json reads the envelope by its schema, and plain JSON too should the worker's converter have schemas off; not checked against the topics: "+v.noSample())
		return
	}
	total, failed := sampled(v.opts.Samples)
	n := total.Envelopes + total.Plain + total.Other
	found := fmt.Sprintf("of %d records sampled from %s, ", n, sampledTopics(v.opts.Samples))
	switch {
	case n == 0:
		v.notes = append(v.notes, assumed+"; format json reads it and plain JSON alike; the sample held no record to check it by")
	case total.Other > 0:
		v.notes = append(v.notes, fmt.Sprintf("%s; but %s%d are not JSON objects (the worker's converter writes something else, e.g. Avro or strings): set routes[].format (avro, protobuf and json-schema need schema_registry) before sink check", assumed, found, total.Other))
	case total.Plain == 0:
		v.format = "connect-json"
		v.notes = append(v.notes, fmt.Sprintf("%s; checked: %sall %d are such envelopes, so routes[].format: connect-json", assumed, found, n))
	case total.Envelopes == 0:
		v.notes = append(v.notes, fmt.Sprintf("%s; checked: %sall %d are plain JSON objects (the worker's converter has schemas.enable=false), so routes[].format: json", assumed, found, n))
	default:
		v.notes = append(v.notes, fmt.Sprintf("%s; checked: %s%d are envelopes and %d plain JSON objects; format json reads each record as what it is", assumed, found, total.Envelopes, total.Plain))
	}
	if len(failed) > 0 {
		v.notes = append(v.notes, "could not read "+strings.Join(failed, ", "))
	}
}

// sampledTopics names the topics of samples.
func sampledTopics(samples []Sample) string {
	names := make([]string, len(samples))
	for i, s := range samples {
		names[i] = s.Topic
	}
	return strings.Join(names, ", ")
}

// brokersKnown: the import writes the connector's real brokers (from
// --brokers or consumer.override.bootstrap.servers), not a placeholder.
func (v *conv) brokersKnown() bool {
	return len(v.opts.Brokers) > 0 || v.has("consumer.override.bootstrap.servers")
}

// noSample says why the connector's topics are not read.
func (v *conv) noSample() string {
	switch {
	case !v.brokersKnown():
		return "no --brokers"
	case !v.has("topics"):
		return "topics.regex names no topic to read"
	}
	return "the topics were not read (--sample 0)"
}

// sampleTopicsOf are the topics to read for the check: those of a
// connector without a value.converter whose records are not Debezium's,
// when the brokers are known.
func (v *conv) sampleTopicsOf() []string {
	if v.cdc || v.has("value.converter") || !v.brokersKnown() || !v.has("topics") {
		return nil
	}
	return splitList(v.get("topics"))
}

// Command loadgen produces a reproducible stream of events into a Kafka
// topic: for the demo, tests and benchmarks. Events look like a product's
// click stream (user_id, ts, event_type, channel, cost, payload) and are about
// --size bytes each as JSON; tools/gen makes them. --rate paces them, and
// --rate-profile paces them in steps (500:60s,10000:60s,500:60s). With
// --topic-count the events go to that many topics, evenly or with a Zipf
// skew across them (--topic-skew), from the one process. With --format avro,
// protobuf or json-schema the same events are re-encoded (tools/eventfmt)
// and framed in the Confluent wire format with the schema id that loadgen
// registers in the schema registry at --registry.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/tools/gen"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated Kafka brokers")
	topic := flag.String("topic", "", "topic to produce to (required)")
	count := flag.Int("count", 100_000, "number of events")
	partitions := flag.Int("partitions", 8, "partitions when the topic is created")
	recreate := flag.Bool("recreate", false, "delete and create the topic first (fresh offsets)")
	size := flag.Int("size", 180, "approximate event size in bytes (payload is padded to reach it)")
	rate := flag.Float64("rate", 0, "events per second, 0 = as fast as possible")
	profile := flag.String("rate-profile", "", "paced in steps instead of --rate: RATE:DURATION,… in events per second, e.g. 500:60s,10000:60s,500:60s (a 20× change up and down); --count defaults to the profile's events")
	seed := flag.Uint64("seed", 1, "random seed: the same seed gives the same events")
	startID := flag.Int("start-id", 0, "id of the first event (ids are consecutive)")
	skew := flag.Float64("skew", 0, "Zipf exponent (> 1) of user_id, events then keyed by user_id; 0 = uniform, unkeyed, round-robin")
	format := flag.String("format", "json", "json, or avro, protobuf, json-schema: registry-framed (Confluent wire format), schema registered at --registry")
	registryURL := flag.String("registry", "http://127.0.0.1:8081/apis/ccompat/v7", "schema registry base URL (its Confluent-compatible API), for the registry formats")
	subject := flag.String("subject", "", "subject to register the schema under (default: TOPIC-value)")
	topicCount := flag.Int("topic-count", 0, "spread the events over this many topics, TOPIC_0 … TOPIC_<N-1> (created with --partitions each if missing), from this one process; --rate is then the total (json only)")
	topicSkew := flag.Float64("topic-skew", 0, "with --topic-count: Zipf exponent (> 1) of the topics' shares, topic i getting (i+1)^-skew of the events; 0 = even")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: loadgen --topic T [flags]\n\nProduces click-stream events to Kafka, as JSON or registry-framed Avro,\nProtobuf or JSON Schema.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var steps gen.Profile
	if *profile != "" {
		var err error
		if steps, err = gen.ParseProfile(*profile); err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: --%v\n", err)
			os.Exit(2)
		}
		if !isSet("count") {
			*count = steps.Events()
		}
	}
	if *topic == "" || *count < 0 || *partitions < 1 {
		flag.Usage()
		os.Exit(2)
	}
	switch *format {
	case "json", "avro", "protobuf", "json-schema":
	default:
		fmt.Fprintf(os.Stderr, "loadgen: --format %q: want json, avro, protobuf or json-schema\n", *format)
		os.Exit(2)
	}
	if *subject == "" {
		*subject = *topic + "-value"
	}
	p := gen.Produce{
		Brokers:    strings.Split(*brokers, ","),
		Topic:      *topic,
		Count:      *count,
		Partitions: *partitions,
		Recreate:   *recreate,
		Rate:       *rate,
		Profile:    steps,
		Events:     gen.Config{Size: *size, Seed: *seed, StartID: *startID, Skew: *skew},
		Progress: func(done int) {
			fmt.Fprintf(os.Stderr, "loadgen: %d/%d events\n", done, *count)
		},
	}
	if *topicCount > 0 {
		if *format != "json" {
			fmt.Fprintln(os.Stderr, "loadgen: --topic-count produces json only")
			os.Exit(2)
		}
		for i := range *topicCount {
			p.Topics = append(p.Topics, fmt.Sprintf("%s_%d", *topic, i))
		}
		p.TopicSkew = *topicSkew
		if err := ensureTopics(p); err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
			os.Exit(1)
		}
	}
	run := p.Run
	if *format != "json" {
		run = func(ctx context.Context) (gen.Result, error) {
			return produceFramed(ctx, p, *format, *registryURL, *subject)
		}
	}
	res, err := run(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
	if res.Events == 0 {
		fmt.Fprintf(os.Stderr, "loadgen: topic %s ready, no events produced (--count 0)\n", *topic)
		return
	}
	fmt.Fprintf(os.Stderr, "loadgen: produced %d %s events (%d bytes) to %s in %s (%.0f/s)\n",
		res.Events, *format, res.Bytes, *topic, res.Took.Round(1e6), float64(res.Events)/res.Took.Seconds())
}

// ensureTopics creates p.Topics that are missing.
func ensureTopics(p gen.Produce) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	return gen.EnsureTopics(context.Background(), kadm.NewClient(cl), p.Topics, p.Partitions)
}

// isSet reports whether the flag was given on the command line.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

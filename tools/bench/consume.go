package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/consumer"
)

// consumeMain is `bench consume`: the floor under any Kafka-to-ClickHouse
// path built on franz-go. It reads --count records of --topic from the
// start with exactly the Kafka client options `sink run` uses for a
// default config (internal/consumer.Options: group, fetch sizes,
// read_committed), touches each record's value and nothing more, and
// prints its own CPU time per record. Set beside `kcat … > /dev/null` (the
// consume half of the kcat | clickhouse-client pipe) it tells how much of
// a row's client CPU no decoding or inserting can save.
func consumeMain(args []string) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka brokers, comma-separated")
	topic := fs.String("topic", "", "topic to read from the beginning")
	count := fs.Int("count", 1_000_000, "records to read, then exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" {
		return fmt.Errorf("consume: --topic is required")
	}
	group := fmt.Sprintf("bench-consume-%d", time.Now().UnixNano())
	yaml := fmt.Sprintf("name: %s\nkafka: {brokers: [%q], topics: [%q]}\nclickhouse: {addrs: [\"127.0.0.1:9000\"]}\nroutes: [{topic: %q, table: t, format: json}]\n",
		group, *brokers, *topic, *topic)
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	opts, err := consumer.Options(cfg, zerolog.Nop(), consumer.Hooks{})
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	// The sink's options block rebalances while records are being handled
	// (BlockRebalanceOnPoll); leaving the group at Close needs them allowed.
	defer func() { cl.AllowRebalance(); cl.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cpu0, start := cpuTime(), time.Now()
	var n, bytes int
	var sum byte
	for n < *count {
		f := cl.PollFetches(ctx)
		if err := f.Err0(); err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		f.EachRecord(func(r *kgo.Record) {
			n++
			bytes += len(r.Value)
			if len(r.Value) > 0 {
				sum += r.Value[len(r.Value)-1]
			}
		})
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	fmt.Printf("records %d, value bytes %d, wall %.2f s, CPU %.2f s, %.3f µs CPU per record (checksum %d)\n",
		n, bytes, wall.Seconds(), cpu.Seconds(), float64(cpu.Microseconds())/float64(n), sum)
	return nil
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "getrusage:", err)
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

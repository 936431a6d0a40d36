package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// naiveMain is `bench naive`: the "before" of seeds 002 and 004, a consumer
// that sends every record as its own INSERT (HTTP, JSONEachRow, one row),
// waiting for each before the next, as a connector without batching does.
// It stops after --count records.
func naiveMain(args []string) error {
	fs := flag.NewFlagSet("naive", flag.ContinueOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka brokers, comma-separated")
	topic := fs.String("topic", "", "topic to read from the beginning")
	group := fs.String("group", "", "consumer group")
	count := fs.Int("count", 2000, "records to insert, then exit")
	url := fs.String("url", "http://127.0.0.1:8123/", "ClickHouse HTTP address")
	table := fs.String("table", "", "db.table to insert into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" || *group == "" || *table == "" {
		return fmt.Errorf("naive: --topic, --group and --table are required")
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	ch := newCH(*url)
	insert := ch.insertURL(*table, "JSONEachRow")
	hc := &http.Client{Timeout: 30 * time.Second}
	ctx := context.Background()
	done := 0
	for done < *count {
		f := cl.PollFetches(ctx)
		if err := f.Err0(); err != nil {
			return fmt.Errorf("naive: fetch: %w", err)
		}
		for it := f.RecordIter(); !it.Done() && done < *count; {
			r := it.Next()
			resp, err := hc.Post(insert, "application/octet-stream", bytes.NewReader(r.Value))
			if err != nil {
				return fmt.Errorf("naive: insert of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("naive: insert of %s/%d@%d: %s", r.Topic, r.Partition, r.Offset, oneLine(string(body)))
			}
			done++
		}
	}
	return nil
}

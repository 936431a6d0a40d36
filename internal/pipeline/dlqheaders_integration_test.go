//go:build integration

package pipeline_test

import (
	"regexp"
	"slices"
	"testing"

	"sink/internal/consumer"
	"sink/internal/testenv"
)

// docsDeadLetterHeaders lists the headers docs/guarantees.md's table of
// the dead-letter topic's headers names, in its order.
func docsDeadLetterHeaders(t *testing.T) []string {
	t.Helper()
	section := testenv.DocSection(t, "../../docs/guarantees.md", "The dead-letter topic's headers")
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDLQHeaders: on both servers, a record that is not JSON and one whose
// id a UInt64 column cannot take are dead-lettered; each copy read back
// from the stack's Kafka carries exactly the headers the docs list, in
// their order, with Connect's values for where it came from, the connector
// and the stage that failed.
func TestDLQHeaders(t *testing.T) {
	docs := docsDeadLetterHeaders(t)
	if !slices.Equal(docs, consumer.DeadLetterHeaders) {
		t.Fatalf("docs list %v;\nthe code writes %v", docs, consumer.DeadLetterHeaders)
	}
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		_, db, topic := reproSetup(t, s)
		produceValues(t, topic, `{"id":0}`, `not json`, `{"id":"x"}`, `{"id":3}`)
		dlq := testenv.UniqueName(t, "hdr_dlq")
		createTopic(t, dlq, 1)
		cfg := dlqConfig(t, s, topic, db, dlq, "")
		runUntilCommitted(t, cfg, topic, 4)
		recs := dlqRecords(t, dlq)
		if len(recs) != 2 {
			t.Fatalf("%d dead letters; want 2", len(recs))
		}
		for i, want := range []struct{ offset, stage, exception string }{
			{"1", "VALUE_CONVERTER", "org.apache.kafka.connect.errors.DataException"},
			{"2", "TASK_PUT", "org.apache.kafka.connect.errors.DataException"},
		} {
			var keys []string
			for _, h := range recs[i].Headers {
				keys = append(keys, h.Key)
			}
			if !slices.Equal(keys, docs) {
				t.Errorf("dead letter %d has headers %v; the docs list %v", i, keys, docs)
			}
			msg, _ := header(recs[i], "sink.error")
			for k, v := range map[string]string{
				"__connect.errors.topic": topic, "__connect.errors.partition": "0", "__connect.errors.offset": want.offset,
				"__connect.errors.connector.name": cfg.Name, "__connect.errors.task.id": "0",
				"__connect.errors.stage": want.stage, "__connect.errors.exception.class.name": want.exception,
				"__connect.errors.exception.message": msg, "__connect.errors.exception.stacktrace": want.exception + ": " + msg,
				"sink.source.offset": want.offset,
			} {
				if got, _ := header(recs[i], k); got != v || msg == "" {
					t.Errorf("dead letter %d: %s = %q; want %q", i, k, got, v)
				}
			}
		}
	})
}

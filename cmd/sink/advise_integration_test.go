//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sink/config"
	"sink/internal/testenv"
)

// sink advise measures a topic fed at 2,000 records/s (the measurement
// itself is tested in internal/command/advise) and prints the arithmetic, what to
// expect, and a YAML fragment that loads.
func TestAdviseCommand(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 4)
	testenv.ProduceAt(t, topic, 2000, 200)
	testenv.WaitRecords(t, topic, 100) // steady state, and records to sample

	path := writeConfig(t, fmt.Sprintf("name: advise\nkafka: {brokers: [%q], topics: [%q]}\nroutes: [{topic: %q, table: db.t}]\n",
		brokers[0], topic, topic))
	code, out, errOut := sinkCmd(t, "advise", "--config", path, "--window", "2s", "--inserts-per-minute", "2")
	if code != 0 {
		t.Fatalf("sink advise: exit %d\n%s%s", code, out, errOut)
	}
	for _, s := range []string{"topic " + topic + ": end offsets +", "insert interval T = 60s / 2 = 30s",
		"fetch_max_wait = T / 10 = 3s", "db.t: 2.0 inserts/min", "as YAML:\nkafka:\n"} {
		if !strings.Contains(out, s) {
			t.Fatalf("sink advise output lacks %q:\n%s", s, out)
		}
	}
	y := out[strings.Index(out, "as YAML:\n")+len("as YAML:\n"):]
	if _, err := config.Parse([]byte("name: x\nroutes: [{topic: a, table: t}]\n"+y), []string{"SINK_KAFKA__TOPICS=a"}); err != nil {
		t.Fatalf("the printed YAML does not load: %v\n%s", err, y)
	}
}

// sink advise reaches brokers that require TLS, a client certificate and
// SASL with the connector's own settings: both the offsets it watches and
// the records it samples come through the SASL_SSL listener.
func TestAdviseOverSASLSSL(t *testing.T) {
	s := testenv.KafkaSASL(t)
	topic := testenv.NewTopic(t, 1)
	produceJSON(t, topic, 40, func(i int) string { return fmt.Sprintf(`{"n":"%03d"}`, i) }) // 11 bytes each
	t.Setenv("SINK_KAFKA__SASL__PASSWORD", s.Password)
	path := writeConfig(t, fmt.Sprintf(`
name: advise-secure
kafka:
  brokers: [%q]
  topics: [%q]
  tls: {enabled: true, ca_file: %q, cert_file: %q, key_file: %q}
  sasl: {mechanism: SCRAM-SHA-512, username: %s}
routes: [{topic: %q, table: db.t}]
`, s.Brokers[0], topic, s.CAFile, s.CertFile, s.KeyFile, s.User, topic))
	start := time.Now()
	code, out, errOut := sinkCmd(t, "advise", "--config", path, "--window", "1s", "--sample", "10")
	if code != 0 || !strings.Contains(out, "sample of 10 records: avg 11 bytes") {
		t.Fatalf("sink advise over SASL_SSL: exit %d after %s\nstdout:\n%s\nstderr:\n%s", code, time.Since(start), out, errOut)
	}
}

// sink advise sizes a topic against the table its route names for it
// (${topic} filled in), as run and check do, not a table literally called
// "${topic}".
func TestAdviseResolvesTableFromTopic(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 1)
	produceJSON(t, topic, 10, func(i int) string { return fmt.Sprintf(`{"id":%d}`, i) })
	path := writeConfig(t, fmt.Sprintf(`
name: advise-template
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {database: cdc}
routes: [{topic_regex: "test_.*", table: "${topic}"}]
`, brokers[0], topic))
	code, out, errOut := sinkCmd(t, "advise", "--config", path, "--window", "1s", "--sample", "10")
	if code != 0 || !strings.Contains(out, "\n  cdc."+topic+": ") || strings.Contains(out, "${topic}") {
		t.Fatalf("sink advise: exit %d; want the table cdc.%s, not ${topic}\nstdout:\n%s\nstderr:\n%s", code, topic, out, errOut)
	}
}

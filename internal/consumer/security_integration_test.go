//go:build integration

package consumer_test

// The consumer against the local stack's SASL_SSL listener (127.0.0.1:9094:
// TLS from the stack's test CA, client certificate required, SASL PLAIN and
// SCRAM-SHA-256/512), configured the way users configure it: YAML plus SINK_*
// environment, through config.Parse.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/consumer"
	"sink/internal/testenv"
)

// secureConfig is a valid config for topic over the SASL_SSL listener with
// mechanism, plus env overrides (which win over the defaults set here).
func secureConfig(t *testing.T, s testenv.SecureKafka, topic, mechanism string, env ...string) (*config.Config, error) {
	t.Helper()
	yaml := fmt.Sprintf(`
name: %s
kafka:
  brokers: [%q]
  topics: [%q]
  request_timeout: 10s
  tls: {enabled: true, ca_file: %q, cert_file: %q, key_file: %q}
  sasl: {mechanism: %s, username: %s}
routes: [{topic: %q, table: t}]
`, testenv.UniqueName(t, "sec"), s.Brokers[0], topic, s.CAFile, s.CertFile, s.KeyFile, mechanism, s.User, topic)
	return config.Parse([]byte(yaml), append([]string{"SINK_KAFKA__SASL__PASSWORD=" + s.Password}, env...))
}

func TestProbeThroughSASLSSL(t *testing.T) {
	s := testenv.KafkaSASL(t)
	topic := testenv.NewTopic(t, 3)
	pwFile := filepath.Join(t.TempDir(), "kafka-password")
	if err := os.WriteFile(pwFile, []byte(s.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := func(mechanism string, env ...string) {
		t.Helper()
		cfg, err := secureConfig(t, s, topic, mechanism, env...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := consumer.Probe(context.Background(), cfg)
		if err != nil || got[topic] != 3 {
			t.Fatalf("%s %v: Probe = %v, %v; want %s: 3 partitions", mechanism, env, got, err, topic)
		}
	}
	f(config.SASLPlain)
	f(config.SASLScramSHA256)
	f(config.SASLScramSHA512)
	// The password from a file instead of the environment.
	f(config.SASLScramSHA512, "SINK_KAFKA__SASL__PASSWORD=", "SINK_KAFKA__SASL__PASSWORD_FILE="+pwFile)
	// The broker's certificate names kafka.sink.test too; server_name picks
	// which name is verified.
	f(config.SASLScramSHA256, "SINK_KAFKA__TLS__SERVER_NAME=kafka.sink.test")
}

// TestConsumeThroughSASLSSL: records produced on the PLAINTEXT listener are
// consumed, all of them, by the group client over SCRAM-SHA-256 on TLS.
func TestConsumeThroughSASLSSL(t *testing.T) {
	s := testenv.KafkaSASL(t)
	topic := testenv.NewTopic(t, 3)
	const n = 300
	prod := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf(`{"i":%d}`, i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	cfg, err := secureConfig(t, s, topic, config.SASLScramSHA256)
	if err != nil {
		t.Fatal(err)
	}
	var assigned atomic.Int32
	c, err := consumer.New(ctx, cfg, zerolog.Nop(), consumer.Hooks{
		Assigned: func(_ context.Context, parts map[string][]int32) { assigned.Add(int32(len(parts[topic]))) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := c.Poll(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		c.AllowRebalance()
	}
	if assigned.Load() != 3 {
		t.Fatalf("assigned %d partitions, want 3", assigned.Load())
	}
}

// TestSecurityErrors: every way the connection can be refused is one line
// naming what failed and where, comes well before the request timeout, and
// never contains the password.
func TestSecurityErrors(t *testing.T) {
	s := testenv.KafkaSASL(t)
	topic := testenv.NewTopic(t, 1)
	otherCA := testenv.NewPKI(t).CAFile // a CA that did not sign the broker's certificate
	plaintext := testenv.Kafka(t)[0]

	f := func(mechanism string, env []string, want string) {
		t.Helper()
		cfg, err := secureConfig(t, s, topic, mechanism, env...)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = consumer.Probe(context.Background(), cfg)
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s %v: Probe succeeded; want %q", mechanism, env, want)
		}
		msg := err.Error()
		if !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Fatalf("%s %v: error %q; want one line containing %q", mechanism, env, msg, want)
		}
		if strings.Contains(msg, s.Password) || strings.Contains(msg, "wrong-password") {
			t.Fatalf("error shows the password: %q", msg)
		}
		if took > 5*time.Second {
			t.Fatalf("%s %v: took %v to fail (request_timeout is 10s)", mechanism, env, took)
		}
		t.Logf("%v: %s", took.Round(time.Millisecond), msg)
	}
	wrong := "SINK_KAFKA__SASL__PASSWORD=wrong-password"
	f(config.SASLScramSHA256, []string{wrong}, `kafka: SASL authentication failed for user "sink" at `+s.Brokers[0]+": ")
	f(config.SASLScramSHA512, []string{wrong}, `kafka: SASL authentication failed for user "sink" at `+s.Brokers[0]+": ")
	f(config.SASLPlain, []string{wrong}, `kafka: SASL authentication failed for user "sink" at `+s.Brokers[0]+": ")
	f(config.SASLScramSHA256, []string{"SINK_KAFKA__SASL__USERNAME=nobody"}, `kafka: SASL authentication failed for user "nobody"`)
	f(config.SASLScramSHA256, []string{"SINK_KAFKA__TLS__CA_FILE=" + otherCA}, "kafka: TLS handshake with "+s.Brokers[0]+" failed: x509: certificate signed by unknown authority")
	f(config.SASLScramSHA256, []string{"SINK_KAFKA__TLS__SERVER_NAME=kafka.example.com"}, "kafka: TLS handshake with "+s.Brokers[0]+" failed: x509: certificate is valid for")
	f(config.SASLScramSHA256, []string{"SINK_KAFKA__TLS__CERT_FILE=", "SINK_KAFKA__TLS__KEY_FILE="}, "kafka: TLS handshake with "+s.Brokers[0]+" failed: the broker refused it")
	// TLS to a PLAINTEXT listener, and plaintext to the TLS one: franz-go's
	// own explanation is already the right one.
	f(config.SASLScramSHA256, []string{"SINK_KAFKA__BROKERS=" + plaintext}, "kafka: brokers "+plaintext+": broker closed the connection immediately after a dial, which often happens if the client is using TLS when the broker is not expecting it")
	f(config.SASLScramSHA256, []string{"SINK_KAFKA__TLS__ENABLED=false", "SINK_KAFKA__TLS__CA_FILE=", "SINK_KAFKA__TLS__CERT_FILE=", "SINK_KAFKA__TLS__KEY_FILE="}, "is this a plaintext connection speaking to a tls endpoint?")
}

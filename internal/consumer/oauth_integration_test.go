//go:build integration

package consumer_test

// The consumer against the local stack's OAUTHBEARER listener (127.0.0.1:9095,
// SASL_PLAINTEXT; Kafka's own JWT validator checks each token's signature
// against the JWKS of the stack's token issuer, its issuer and its
// audience), with tokens from the issuer's client-credentials endpoint, and
// every way that can fail.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/consumer"
	"sink/internal/kafkaauth"
	"sink/internal/testenv"
)

// oauthConfig is a valid config for topic over the OAUTHBEARER listener as
// client c, the secret from the environment, plus YAML under kafka.sasl.oauth
// and env overrides.
func oauthConfig(t *testing.T, o testenv.OAuthKafka, c testenv.OAuthClient, topic, oauthExtra string, env ...string) (*config.Config, error) {
	t.Helper()
	yaml := fmt.Sprintf(`
name: %s
kafka:
  brokers: [%q]
  topics: [%q]
  request_timeout: 10s
  sasl:
    mechanism: OAUTHBEARER
    oauth:
      token_endpoint: %q
      client_id: %q
%s
routes: [{topic: %q, table: t}]
`, testenv.UniqueName(t, "oauth"), o.Brokers[0], topic, o.TokenEndpoint, c.ID, oauthExtra, topic)
	return config.Parse([]byte(yaml), append([]string{"SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET=" + c.Secret}, env...))
}

// TestProbeThroughOAuth: a token of the issuer is accepted by Kafka's
// validator, with a scope and SASL extensions too.
func TestProbeThroughOAuth(t *testing.T) {
	o := testenv.KafkaOAuth(t)
	topic := testenv.NewTopic(t, 3)
	c := o.NewClient(t, testenv.OAuthClientSpec{})
	for _, extra := range []string{"", "      scope: kafka.read kafka.write\n      extensions: {logicalCluster: lkc-test, identityPoolId: pool-test}"} {
		cfg, err := oauthConfig(t, o, c, topic, extra)
		if err != nil {
			t.Fatal(err)
		}
		got, err := consumer.Probe(context.Background(), cfg)
		if err != nil || got[topic] != 3 {
			t.Fatalf("%q: Probe = %v, %v; want %s: 3 partitions", extra, got, err, topic)
		}
	}
}

// TestOAuthErrors: each way of not getting in is one line that names its
// class, comes well before the request timeout and never shows the secret.
func TestOAuthErrors(t *testing.T) {
	o := testenv.KafkaOAuth(t)
	topic := testenv.NewTopic(t, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/token"
	_ = l.Close()

	f := func(c testenv.OAuthClient, extra string, env []string, class kafkaauth.Class, want string) {
		t.Helper()
		cfg, err := oauthConfig(t, o, c, topic, extra, env...)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = consumer.Probe(context.Background(), cfg)
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s: Probe succeeded; want %q", class, want)
		}
		msg := err.Error()
		if kafkaauth.Classify(err) != class || !strings.HasPrefix(msg, "kafka: ") || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Fatalf("error %q (class %q); want one line of class %q containing %q", msg, kafkaauth.Classify(err), class, want)
		}
		if strings.Contains(msg, c.Secret) {
			t.Fatalf("error shows the client secret: %q", msg)
		}
		if took > 5*time.Second {
			t.Fatalf("%s: took %v to fail (request_timeout is 10s)", class, took)
		}
		t.Logf("%v: %s", took.Round(time.Millisecond), msg)
	}
	good := o.NewClient(t, testenv.OAuthClientSpec{})
	wrongAudience := o.NewClient(t, testenv.OAuthClientSpec{Audience: []string{"some-other-cluster"}})
	down := o.NewClient(t, testenv.OAuthClientSpec{FailStatus: 503})

	f(wrongAudience, "", nil, kafkaauth.Rejected,
		fmt.Sprintf(`kafka: broker rejected the token: brokers %s refused the OAUTHBEARER token of client %q from %s: `, o.Brokers[0], wrongAudience.ID, o.TokenEndpoint))
	f(good, "", []string{"SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET=wrong-secret"}, kafkaauth.EndpointRefused,
		fmt.Sprintf(`kafka: kafka.sasl.oauth: token endpoint refused: %s for client %q: HTTP 401 Unauthorized: invalid_client: Invalid client or Invalid client credentials`, o.TokenEndpoint, good.ID))
	f(good, "      scope: forbidden", nil, kafkaauth.EndpointRefused, `HTTP 400 Bad Request: invalid_scope: scope "forbidden" is not allowed`)
	f(down, "", nil, kafkaauth.EndpointFailed, `kafka: kafka.sasl.oauth: token endpoint failed: `+o.TokenEndpoint+` for client "`+down.ID+`": HTTP 503 Service Unavailable: server_error`)
	f(good, "", []string{"SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT=" + closed}, kafkaauth.EndpointUnreachable,
		`kafka: kafka.sasl.oauth: token endpoint unreachable: `+closed+` for client "`+good.ID+`": Post "`+closed+`": dial tcp `)
}

// TestOAuthUnannouncedKeyAtStart: a provider that has just started signing
// with a key it did not publish ahead: the broker refuses the first token
// and fetches its JWKS again; the start-up probe asks once more and gets in.
func TestOAuthUnannouncedKeyAtStart(t *testing.T) {
	o := testenv.KafkaOAuth(t)
	topic := testenv.NewTopic(t, 2)
	c := o.NewClient(t, testenv.OAuthClientSpec{OwnKeys: true})
	cfg, err := oauthConfig(t, o, c, topic, "")
	if err != nil {
		t.Fatal(err)
	}
	kid := o.RotateUnannounced(t, c)
	got, err := consumer.Probe(context.Background(), cfg)
	if err != nil || got[topic] != 2 {
		t.Fatalf("Probe right after an unannounced rotation = %v, %v; want %s: 2 partitions", got, err, topic)
	}
	if issued := o.Issued(t, c); issued[kid] != 1 || len(issued) != 1 {
		t.Fatalf("tokens issued per key %v; want one, signed by %s", issued, kid)
	}
}

// membership counts a member's group callbacks.
type membership struct {
	assigned, revoked, lost atomic.Int32
}

func (m *membership) hooks() consumer.Hooks {
	return consumer.Hooks{
		Assigned: func(context.Context, map[string][]int32) { m.assigned.Add(1) },
		Revoked:  func(context.Context, map[string][]int32) { m.revoked.Add(1) },
		Lost:     func(context.Context, map[string][]int32) { m.lost.Add(1) },
	}
}

// TestOAuthTokensRenewedAndKeysRotated: tokens that live 8 seconds are
// replaced while the member consumes for about 30 seconds; the brokers'
// re-authentications (connections.max.reauth.ms) take the new ones in
// place, the issuer's signing key is rotated twice meanwhile (to the key it
// published ahead, which the broker's JWKS refresh every 5 s has fetched),
// and the member neither leaves the group nor loses a partition, and reads
// every record.
func TestOAuthTokensRenewedAndKeysRotated(t *testing.T) {
	o := testenv.KafkaOAuth(t)
	topic := testenv.NewTopic(t, 3)
	c := o.NewClient(t, testenv.OAuthClientSpec{Lifetime: 8 * time.Second, OwnKeys: true})
	cfg, err := oauthConfig(t, o, c, topic, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var m membership
	cons, err := consumer.New(ctx, cfg, zerolog.Nop(), m.hooks())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	prod := testenv.KafkaClient(t, kgo.DefaultProduceTopic(topic))
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	consumed := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		for ctx.Err() == nil {
			fs := cons.Poll(ctx)
			fs.EachRecord(func(r *kgo.Record) { mu.Lock(); seen[string(r.Value)]++; mu.Unlock() })
			cons.AllowRebalance()
		}
	}()
	produced := 0
	phase := func(name string, d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); {
			for range 20 {
				if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf(`{"i":%d}`, produced))).FirstErr(); err != nil {
					t.Fatal(err)
				}
				produced++
			}
			time.Sleep(250 * time.Millisecond)
		}
		for consumed() < produced && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s: %d records consumed of %d; tokens issued per key: %v", name, consumed(), produced, o.Issued(t, c))
	}
	phase("first key", 10*time.Second)
	k2 := o.Rotate(t, c)
	phase("second key", 10*time.Second)
	k3 := o.Rotate(t, c)
	phase("third key", 10*time.Second)
	cancel()
	<-pollDone

	issued := o.Issued(t, c)
	total := 0
	for _, n := range issued {
		total += n
	}
	if issued[k2] == 0 || issued[k3] == 0 || total < 4 {
		t.Fatalf("tokens issued per key %v; want new tokens signed by both rotated keys %s and %s, 4 or more in all", issued, k2, k3)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != produced {
		t.Fatalf("consumed %d distinct records of %d", len(seen), produced)
	}
	if a, r, l := m.assigned.Load(), m.revoked.Load(), m.lost.Load(); a != 1 || r != 0 || l != 0 {
		t.Fatalf("group callbacks: assigned %d, revoked %d, lost %d; want 1, 0, 0 (no rebalance)", a, r, l)
	}
}

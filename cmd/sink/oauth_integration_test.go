//go:build integration

package main

// The whole sink against the local stack's OAUTHBEARER listener: tokens from
// the stack's token issuer (client credentials), validated by Kafka's own
// JWT validator. Rows exact on both ClickHouse servers while tokens expire
// and are replaced, and the signing key is rotated; each failure one line
// with its class, from check and from run.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"sink/internal/testenv"
)

// oauthYAML is a config for topic → db.table over the OAUTHBEARER listener
// as client c (its secret from the environment), into ClickHouse at chAddr.
func oauthYAML(o testenv.OAuthKafka, c testenv.OAuthClient, chAddr, topic, db, table, extra string) string {
	return fmt.Sprintf(`
name: %s
kafka:
  brokers: [%q]
  topics: [%q]
  fetch_max_wait: 100ms
  request_timeout: 10s
  sasl:
    mechanism: OAUTHBEARER
    oauth: {token_endpoint: %q, client_id: %q, scope: kafka}
clickhouse: {addrs: [%q], database: %s}
batch: {max_latency: 400ms}
routes: [{topic: %q, table: %q}]
shutdown_timeout: 20s
%s`, "oauth-"+topic, o.Brokers[0], topic, o.TokenEndpoint, c.ID, chAddr, db, topic, table, extra)
}

// TestOAuthEndToEnd: check gets a token and reaches the topic; run
// consumes for about 25 seconds with tokens that live 8, while the issuer
// rotates its signing key to the one it published ahead, and every record
// becomes one row; the member was assigned once and never revoked, the log
// never shows the secret.
func TestOAuthEndToEnd(t *testing.T) {
	testenv.EachServer(t, testOAuthEndToEnd)
}

func testOAuthEndToEnd(t *testing.T, server testenv.Server) {
	o := testenv.KafkaOAuth(t)
	c := o.NewClient(t, testenv.OAuthClientSpec{Lifetime: 8 * time.Second, OwnKeys: true})
	db := server.NewDatabase(t)
	topic := testenv.NewTopic(t, 3)
	ch := server.Conn(t)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, name String) ENGINE = MergeTree ORDER BY id")
	t.Setenv("SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET", c.Secret)
	path := writeConfig(t, oauthYAML(o, c, server.Addr, topic, db, "events", "http: {listen: \"\"}\nlog: {level: debug, format: json}\n"))

	code, checkOut, checkErr := sinkCmd(t, "check", "--config", path)
	if code != 0 || !strings.Contains(checkOut, "check: ok") {
		t.Fatalf("check: exit %d\nstdout:\n%s\nstderr:\n%s", code, checkOut, checkErr)
	}
	for _, want := range []string{
		fmt.Sprintf(`security: kafka TLS off, SASL OAUTHBEARER, client %q at %s, client secret ******, scope "kafka"`, c.ID, o.TokenEndpoint),
		fmt.Sprintf(`kafka: SASL OAUTHBEARER: token from %s for client %q, expires in `, o.TokenEndpoint, c.ID),
		"kafka: topic " + topic + ": 3 partitions",
	} {
		if !strings.Contains(checkOut, want) {
			t.Errorf("check output lacks %q:\n%s", want, checkOut)
		}
	}

	const per = 1500
	id := 0
	produce := func() {
		produceJSON(t, topic, per, func(int) string { id++; return fmt.Sprintf(`{"id":%d,"name":"n%d"}`, id, id) })
	}
	produce()
	r := startSink(t, path)
	waitRows(t, r, ch, db+".events", per)
	rotated := o.Rotate(t, c)
	for round := 2; round <= 4; round++ {
		time.Sleep(6 * time.Second) // most of a token's life
		produce()
		waitRows(t, r, ch, db+".events", uint64(round*per))
	}
	logs := r.stderr.String()
	if code := r.stop(t); code != 0 {
		t.Fatalf("sink run exited %d after SIGTERM; log:\n%s", code, r.stderr.String())
	}

	var rows, ids uint64
	if err := ch.QueryRow(context.Background(), "SELECT count(), uniqExact(id) FROM "+db+".events").Scan(&rows, &ids); err != nil {
		t.Fatal(err)
	}
	if rows != 4*per || ids != 4*per {
		t.Fatalf("%d rows, %d ids; want %d of each", rows, ids, 4*per)
	}
	issued := o.Issued(t, c)
	total := 0
	for _, n := range issued {
		total += n
	}
	if issued[rotated] == 0 || total < 3 {
		t.Fatalf("tokens issued per key %v; want 3 or more, some signed by the rotated key %s", issued, rotated)
	}
	if n := strings.Count(logs, `"message":"partitions assigned"`); n != 1 || strings.Contains(logs, "partitions revoked") || strings.Contains(logs, "partitions lost") {
		t.Fatalf("%d assignments, revoked or lost partitions while running (want one assignment, no rebalance); log:\n%s", n, logs)
	}
	for name, out := range map[string]string{"run log": r.stderr.String() + r.stdout.String(), "check": checkOut + checkErr} {
		if strings.Contains(out, c.Secret) {
			t.Errorf("%s contains the client secret", name)
		}
	}
	t.Logf("%d rows through OAUTHBEARER into %s.events; tokens issued per key: %v", rows, db, issued)
}

// TestOAuthRefused: a token the brokers reject, a secret the endpoint
// refuses, an endpoint that fails or does not answer: check and run each
// exit 1 with one line on stderr naming the class, and check says it got
// no token.
func TestOAuthRefused(t *testing.T) {
	o := testenv.KafkaOAuth(t)
	server := testenv.Servers(t)[0]
	db := server.NewDatabase(t)
	topic := testenv.NewTopic(t, 1)
	testenv.Exec(t, server.Conn(t), "CREATE TABLE "+db+".events (id UInt64) ENGINE = MergeTree ORDER BY id")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/token"
	_ = l.Close()

	f := func(c testenv.OAuthClient, secret, endpoint, checkLine, want string) {
		t.Helper()
		t.Setenv("SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET", secret)
		t.Setenv("SINK_KAFKA__SASL__OAUTH__TOKEN_ENDPOINT", endpoint)
		path := writeConfig(t, oauthYAML(o, c, server.Addr, topic, db, "events", "http: {listen: \"\"}\n"))
		for _, cmd := range []string{"check", "run"} {
			code, out, errOut := sinkCmd(t, cmd, "--config", path)
			if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, want) {
				t.Fatalf("sink %s: exit %d, stderr %q; want exit 1 and one line containing %q", cmd, code, errOut, want)
			}
			if cmd == "check" && !strings.Contains(out, checkLine) {
				t.Fatalf("sink check output lacks %q:\n%s", checkLine, out)
			}
			if strings.Contains(out+errOut, secret) {
				t.Fatalf("sink %s shows the client secret", cmd)
			}
			t.Logf("sink %s: %s", cmd, strings.TrimSpace(errOut))
		}
	}
	good := o.NewClient(t, testenv.OAuthClientSpec{})
	other := o.NewClient(t, testenv.OAuthClientSpec{Audience: []string{"another-cluster"}})
	down := o.NewClient(t, testenv.OAuthClientSpec{FailStatus: 503})
	f(other, other.Secret, o.TokenEndpoint, "kafka: SASL OAUTHBEARER: token from ", "kafka: broker rejected the token: brokers "+o.Brokers[0]+" refused the OAUTHBEARER token")
	f(good, "not-the-secret", o.TokenEndpoint, "kafka: SASL OAUTHBEARER: no token (token endpoint refused)", "kafka: kafka.sasl.oauth: token endpoint refused: ")
	f(down, down.Secret, o.TokenEndpoint, "kafka: SASL OAUTHBEARER: no token (token endpoint failed)", "kafka: kafka.sasl.oauth: token endpoint failed: ")
	f(good, good.Secret, closed, "kafka: SASL OAUTHBEARER: no token (token endpoint unreachable)", "kafka: kafka.sasl.oauth: token endpoint unreachable: "+closed)
}

// TestOAuthUnannouncedKey: the issuer signs with a key it publishes only
// then, right before the sink starts and twice while it runs; the broker
// refuses the first token signed by it until it has fetched the JWKS
// again, and the sink's connections retry. Whether or not
// the group rebalances over it, every record is in the table: each id
// once, the table read with FINAL (a replay after a lost assignment is the
// at-least-once case).
func TestOAuthUnannouncedKey(t *testing.T) {
	o := testenv.KafkaOAuth(t)
	server := testenv.Servers(t)[0]
	c := o.NewClient(t, testenv.OAuthClientSpec{Lifetime: 6 * time.Second, OwnKeys: true})
	db := server.NewDatabase(t)
	topic := testenv.NewTopic(t, 3)
	ch := server.Conn(t)
	testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64, name String) ENGINE = ReplacingMergeTree ORDER BY id")
	t.Setenv("SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET", c.Secret)
	path := writeConfig(t, oauthYAML(o, c, server.Addr, topic, db, "events", "http: {listen: \"\"}\n"))

	const per = 1000
	id := 0
	produce := func() {
		produceJSON(t, topic, per, func(int) string { id++; return fmt.Sprintf(`{"id":%d,"name":"n%d"}`, id, id) })
	}
	produce()
	// The sink starts right after the issuer began signing with a key the
	// broker has not fetched: its first connection is refused once.
	keys := []string{o.RotateUnannounced(t, c)}
	r := startSink(t, path)
	waitIDs := func(want int) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			var ids uint64
			if err := ch.QueryRow(context.Background(), "SELECT uniqExact(id) FROM "+db+".events").Scan(&ids); err != nil {
				t.Fatal(err)
			}
			if ids == uint64(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d ids after 90s; log:\n%s", ids, want, r.stderr.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitIDs(per)
	for round := 2; round <= 3; round++ {
		keys = append(keys, o.RotateUnannounced(t, c))
		time.Sleep(5 * time.Second) // most of a token's life: the next ones are signed by the new key
		produce()
		waitIDs(round * per)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("sink run exited %d after SIGTERM; log:\n%s", code, r.stderr.String())
	}
	var rows, ids uint64
	if err := ch.QueryRow(context.Background(), "SELECT count(), uniqExact(id) FROM "+db+".events FINAL").Scan(&rows, &ids); err != nil {
		t.Fatal(err)
	}
	issued := o.Issued(t, c)
	if rows != 3*per || ids != 3*per || issued[keys[0]] == 0 || issued[keys[2]] == 0 {
		t.Fatalf("%d rows, %d ids with FINAL (want %d of each); tokens issued per key %v, rotated to %v", rows, ids, 3*per, issued, keys)
	}
	logs := r.stderr.String()
	t.Logf("%d rows; tokens per key %v; %d assignments, %d lines saying the broker rejected a token",
		rows, issued, strings.Count(logs, `"message":"partitions assigned"`), strings.Count(logs, `"auth_error":"broker rejected the token"`))
}

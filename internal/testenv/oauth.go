package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The local stack's OAUTHBEARER listener (testdata/kafka/server.properties:
// SASL_PLAINTEXT, tokens validated by Kafka's own JWT validator against the
// JWKS of the stack's token issuer, tools/tokenissuer) and the environment
// variables that point elsewhere.
const (
	DefaultKafkaOAuth  = "127.0.0.1:9095"
	DefaultTokenIssuer = "http://127.0.0.1:9096"
	// OAuthAudience is the audience the listener expects (and the
	// issuer's default).
	OAuthAudience = "sink-stack-kafka"

	// EnvKafkaOAuth is the OAUTHBEARER listener's host:port instead of
	// DefaultKafkaOAuth; EnvTokenIssuer the issuer's base URL instead of
	// DefaultTokenIssuer.
	EnvKafkaOAuth  = "SINK_TEST_KAFKA_OAUTH"
	EnvTokenIssuer = "SINK_TEST_TOKEN_ISSUER"
)

// OAuthKafka is how to reach the OAUTHBEARER listener and its issuer.
type OAuthKafka struct {
	Brokers []string
	// Issuer is the issuer's base URL; TokenEndpoint its token URL.
	Issuer, TokenEndpoint string
}

// OAuthClient is a client registered at the issuer.
type OAuthClient struct {
	ID, Secret string
}

// OAuthClientSpec is what a registered client's tokens carry: the audience
// (nil: OAuthAudience), the lifetime (0: the issuer's hour), and an HTTP
// status every token request of it gets instead (0: none). OwnKeys gives
// the client signing keys of its own, which Rotate and RotateUnannounced
// rotate without changing the keys other tests' tokens are signed with.
type OAuthClientSpec struct {
	Audience   []string
	Lifetime   time.Duration
	FailStatus int
	OwnKeys    bool
}

// KafkaOAuth returns the OAUTHBEARER listener and its issuer after checking
// that the issuer serves its JWKS and a token of its default client is
// accepted by the listener. It skips the test (fails it under
// SINK_REQUIRE_STACK=1) otherwise, e.g. on a stack started before the
// listener existed.
func KafkaOAuth(t testing.TB) OAuthKafka {
	t.Helper()
	Kafka(t) // the PLAINTEXT side produces the records
	o := OAuthKafka{Brokers: []string{envOr(EnvKafkaOAuth, DefaultKafkaOAuth)}, Issuer: strings.TrimSuffix(envOr(EnvTokenIssuer, DefaultTokenIssuer), "/")}
	o.TokenEndpoint = o.Issuer + "/token"
	err := probe("kafka-oauth "+o.Brokers[0]+" "+o.Issuer, func() error {
		resp, err := http.Get(o.Issuer + "/jwks")
		if err != nil {
			return fmt.Errorf("token issuer: %w", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("token issuer: GET /jwks: %s", resp.Status)
		}
		return dial(o.Brokers[0])
	})
	if err != nil {
		unavailable(t, "Kafka's OAUTHBEARER listener and its token issuer", o.Brokers[0]+", "+o.Issuer,
			fmt.Errorf("%w; a stack started before the listener existed needs its Kafka restarted (`make stack-down stack-up` in the checkout that started it)", err))
	}
	return o
}

// NewClient registers a client of its own for the test (a unique id, so
// that tests running at once do not share a token cache) with spec.
func (o OAuthKafka) NewClient(t testing.TB, spec OAuthClientSpec) OAuthClient {
	t.Helper()
	c := OAuthClient{ID: UniqueName(t, "oauth"), Secret: "secret-" + UniqueName(t, "s")}
	o.SetClient(t, c, spec)
	return c
}

// SetClient registers c, or changes what its tokens carry.
func (o OAuthKafka) SetClient(t testing.TB, c OAuthClient, spec OAuthClientSpec) {
	t.Helper()
	body := map[string]any{"id": c.ID, "secret": c.Secret, "audience": spec.Audience, "fail_status": spec.FailStatus, "own_keys": spec.OwnKeys}
	if spec.Lifetime > 0 {
		body["lifetime"] = spec.Lifetime.String()
	}
	o.control(t, http.MethodPost, "/control/clients", body, nil)
}

// Rotate makes c (a client with OwnKeys) sign with the key the issuer
// published as its next one, once the brokers' JWKS refresh has fetched it
// (the issuer waits for that), and returns its id.
func (o OAuthKafka) Rotate(t testing.TB, c OAuthClient) string {
	t.Helper()
	var out struct{ Kid string }
	o.control(t, http.MethodPost, "/control/rotate?client="+c.ID, nil, &out)
	return out.Kid
}

// RotateUnannounced makes c (a client with OwnKeys) sign with a key the
// issuer publishes only now and returns its id: a broker refuses the first
// token signed by it, then fetches the JWKS again. The rotation waits for
// the moment just after the broker's periodic JWKS fetch (every 5 s): the
// broker's JWKS client (jose4j) skips a fetch within 300 ms of the last
// one, and Kafka asks again for an unknown key only a minute later, so an
// unknown key met right after a periodic fetch stays unknown until the
// next one.
func (o OAuthKafka) RotateUnannounced(t testing.TB, c OAuthClient) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var keys struct {
			Ago int64 `json:"jwks_served_ms_ago"`
		}
		o.control(t, http.MethodGet, "/control/keys", nil, &keys)
		if keys.Ago >= 400 && keys.Ago <= 1500 {
			break
		}
	}
	var out struct{ Kid string }
	o.control(t, http.MethodPost, "/control/rotate?unannounced=true&client="+c.ID, nil, &out)
	return out.Kid
}

// Issued returns the number of tokens issued to c, per signing key id.
func (o OAuthKafka) Issued(t testing.TB, c OAuthClient) map[string]int {
	t.Helper()
	var out struct{ Issued map[string]int }
	o.control(t, http.MethodGet, "/control/issued/"+c.ID, nil, &out)
	return out.Issued
}

func (o OAuthKafka) control(t testing.TB, method, path string, body, out any) {
	t.Helper()
	var rd bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&rd).Encode(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, o.Issuer+path, &rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("testenv: token issuer %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testenv: token issuer %s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("testenv: token issuer %s %s: %v", method, path, err)
		}
	}
}

package check

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sink/config"
	"sink/internal/kafkaauth"
)

// TestSASLSummary: each mechanism says where its secret comes from, never
// the secret.
func TestSASLSummary(t *testing.T) {
	f := func(s config.SASL, want string) {
		t.Helper()
		if got := saslSummary(s); got != want {
			t.Fatalf("got  %q\nwant %q", got, want)
		}
	}
	f(config.SASL{}, "SASL off")
	f(config.SASL{Mechanism: config.SASLScramSHA512, Username: "u", Password: "hunter2"}, `SASL SCRAM-SHA-512 as "u", password ******`)
	f(config.SASL{Mechanism: config.SASLOAuthBearer, OAuth: config.OAuth{TokenEndpoint: "https://idp/token", ClientID: "sink", ClientSecret: "hunter2"}},
		`SASL OAUTHBEARER, client "sink" at https://idp/token, client secret ******`)
	f(config.SASL{Mechanism: config.SASLOAuthBearer, OAuth: config.OAuth{TokenEndpoint: "https://idp/token", ClientID: "sink", ClientSecretFile: "/run/secrets/cs",
		Scope: "kafka", Extensions: map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-1"}}},
		`SASL OAUTHBEARER, client "sink" at https://idp/token, client secret from /run/secrets/cs, scope "kafka", extensions identityPoolId, logicalCluster`)
	f(config.SASL{Mechanism: config.SASLAWSMSKIAM}, "SASL AWS_MSK_IAM, credentials from the AWS SDK's default chain")
	f(config.SASL{Mechanism: config.SASLAWSMSKIAM, AWS: config.AWS{Profile: "msk", RoleARN: "arn:aws:iam::123456789012:role/w"}},
		`SASL AWS_MSK_IAM, credentials from the AWS SDK's default chain, profile "msk", assuming arn:aws:iam::123456789012:role/w`)
}

// TestAuthLine: check says whether it got a token and, when not, the class
// of the failure, before it asks any broker.
func TestAuthLine(t *testing.T) {
	status, body := http.StatusOK, `{"access_token":"tok","token_type":"Bearer","expires_in":300}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	run := func(id string) (string, error) {
		cfg := &config.Config{}
		cfg.Kafka.RequestTimeout = 5 * time.Second
		cfg.Kafka.SASL = config.SASL{Mechanism: config.SASLOAuthBearer, OAuth: config.OAuth{TokenEndpoint: srv.URL + "/token", ClientID: id, ClientSecret: "hunter2"}}
		var out bytes.Buffer
		err := (&checker{cfg: cfg, out: &out}).auth(context.Background())
		return out.String(), err
	}
	out, err := run("ok-client")
	if err != nil || !strings.HasPrefix(out, `kafka: SASL OAUTHBEARER: token from `+srv.URL+`/token for client "ok-client", expires in `) || !strings.Contains(out, "m") {
		t.Fatalf("got %q, %v", out, err)
	}
	status, body = http.StatusUnauthorized, `{"error":"invalid_client"}`
	out, err = run("refused-client")
	if out != "kafka: SASL OAUTHBEARER: no token (token endpoint refused)\n" || kafkaauth.Classify(err) != kafkaauth.EndpointRefused ||
		!strings.HasPrefix(err.Error(), "kafka: kafka.sasl.oauth: token endpoint refused: ") || strings.Contains(err.Error()+out, "hunter2") {
		t.Fatalf("got %q, %v", out, err)
	}
}

package kafkaauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/oauth2"

	"sink/config"
)

func TestClassify(t *testing.T) {
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code, Status: fmt.Sprint(code)} }
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errors.New("connection refused"))}
	saslFailed := fmt.Errorf("%w: Authentication failed: invalid_token", kerr.SaslAuthenticationFailed)
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{nil, None},
		{errors.New("something else"), None},
		{context.Canceled, None},
		{kerr.UnknownTopicOrPartition, None},
		{kerr.UnsupportedSaslMechanism, None},
		{&Error{Class: NoCredentials}, NoCredentials},
		{fmt.Errorf("unable to initialize sasl: %w", &Error{Class: EndpointRefused}), EndpointRefused},
		{saslFailed, Rejected},
		{fmt.Errorf("broker 1: %w", saslFailed), Rejected},
		{&oauth2.RetrieveError{Response: resp(401), ErrorCode: "invalid_client"}, EndpointRefused},
		{&oauth2.RetrieveError{Response: resp(400)}, EndpointRefused},
		{&oauth2.RetrieveError{Response: resp(200), ErrorCode: "access_denied"}, EndpointRefused},
		{&oauth2.RetrieveError{Response: resp(500), ErrorCode: "server_error"}, EndpointFailed},
		{&oauth2.RetrieveError{Response: resp(503)}, EndpointFailed},
		{&oauth2.RetrieveError{Response: resp(302)}, BadTokenResponse},
		{&url.Error{Op: "Post", URL: "https://idp/token", Err: dial}, EndpointUnreachable},
		{&url.Error{Op: "Post", URL: "https://idp/token", Err: context.DeadlineExceeded}, EndpointUnreachable},
		{&net.DNSError{Err: "no such host", Name: "idp"}, EndpointUnreachable},
		{dial, EndpointUnreachable},
		{errors.New("oauth2: server response missing access_token"), BadTokenResponse},
		{errors.New("oauth2: cannot parse json: invalid character '<'"), BadTokenResponse},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestExplain: the line ConnError prints for each managed failure names
// the class, the brokers and what to check; other errors are left alone.
func TestExplain(t *testing.T) {
	k := config.Kafka{Brokers: []string{"b1:9095", "b2:9095"}}
	k.SASL.Mechanism = config.SASLOAuthBearer
	k.SASL.OAuth = config.OAuth{TokenEndpoint: "https://idp/token", ClientID: "sink"}
	rejected := fmt.Errorf("%w: Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER", kerr.SaslAuthenticationFailed)
	f := func(k config.Kafka, err error, want string) {
		t.Helper()
		got := Explain(k, err)
		switch {
		case want == "" && got != nil:
			t.Fatalf("Explain(%v) = %v, want nil", err, got)
		case want != "" && (got == nil || got.Error() != want):
			t.Fatalf("Explain(%v) =\n%v\nwant\n%s", err, got, want)
		}
	}
	f(k, rejected, `kafka: broker rejected the token: brokers b1:9095,b2:9095 refused the OAUTHBEARER token of client "sink" from https://idp/token: `+
		`Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER (check the audience, issuer and signing keys the brokers expect)`)
	f(k, &Error{Class: EndpointRefused, Section: "kafka.sasl.oauth", Detail: "x"}, "kafka: kafka.sasl.oauth: token endpoint refused: x")
	f(k, errors.New("dial tcp: connection refused"), "")
	aws := k
	aws.SASL.Mechanism = config.SASLAWSMSKIAM
	f(aws, rejected, "kafka: broker rejected the token: brokers b1:9095,b2:9095 refused the AWS_MSK_IAM signature: "+
		"Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER (does the IAM policy allow kafka-cluster:Connect on this cluster?)")
	scram := k
	scram.SASL.Mechanism = config.SASLScramSHA256
	f(scram, rejected, "") // ConnError's own message, naming the user
	if msg := Explain(k, fmt.Errorf("%w: line one\nline two", kerr.SaslAuthenticationFailed)).Error(); strings.Contains(msg, "\n") {
		t.Fatalf("two lines: %q", msg)
	}
}

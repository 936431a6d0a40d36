package kafkaauth

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/oauth2"

	"sink/config"
)

// Class is what went wrong on the way to an authenticated connection, in
// the words an operator acts on.
type Class string

// The classes; None is an error that is not about authentication.
const (
	None Class = ""
	// EndpointRefused: the token endpoint answered with a client error
	// (4xx, or an OAuth error object): wrong client id or secret, a scope
	// the client may not ask for, a disabled client. Retrying the same
	// request does not help.
	EndpointRefused Class = "token endpoint refused"
	// EndpointFailed: the token endpoint answered with a server error
	// (5xx): the provider is in trouble; it may pass.
	EndpointFailed Class = "token endpoint failed"
	// EndpointUnreachable: no answer at all: DNS, a refused connection, a
	// TLS handshake, a timeout.
	EndpointUnreachable Class = "token endpoint unreachable"
	// BadTokenResponse: an answer that is not a token response (no
	// access_token, not JSON, a body cut short).
	BadTokenResponse Class = "token endpoint gave no token"
	// NoCredentials: the AWS SDK's chain found no credentials, or could not
	// refresh them (an STS call refused, an expired profile).
	NoCredentials Class = "no AWS credentials"
	// Rejected: the brokers refused what the mechanism sent: a token with
	// the wrong audience, issuer or signature, an expired one, an IAM
	// principal without kafka-cluster:Connect.
	Rejected Class = "broker rejected the token"
)

// Classify sorts err into a Class: an *Error carries its own; a refused
// SASL authentication is Rejected; the errors of golang.org/x/oauth2 and
// net/http are sorted by what the endpoint answered, or that it did not.
// Anything else is None.
func Classify(err error) Class {
	var (
		ae  *Error
		re  *oauth2.RetrieveError
		ue  *url.Error
		ne  net.Error
		ope *net.OpError
	)
	switch {
	case err == nil:
		return None
	case errors.As(err, &ae):
		return ae.Class
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return Rejected
	case errors.As(err, &re):
		return retrieveClass(re)
	case errors.As(err, &ue), errors.As(err, &ope), errors.As(err, &ne):
		return EndpointUnreachable
	case strings.HasPrefix(err.Error(), "oauth2: "):
		// golang.org/x/oauth2's own complaints about a 2xx answer:
		// "server response missing access_token", "cannot parse json".
		return BadTokenResponse
	}
	return None
}

func retrieveClass(re *oauth2.RetrieveError) Class {
	code := 0
	if re.Response != nil {
		code = re.Response.StatusCode
	}
	switch {
	case code >= 500:
		return EndpointFailed
	case re.ErrorCode != "", code >= 400:
		return EndpointRefused
	}
	return BadTokenResponse
}

// Error is a failure to get what a managed mechanism sends the brokers: an
// OAuth token or AWS credentials. Its text is one line: the config section,
// the class, then what happened, never a secret.
type Error struct {
	Class   Class
	Section string // kafka.sasl.oauth or kafka.sasl.aws
	Detail  string
	Err     error
}

func (e *Error) Error() string { return e.Section + ": " + string(e.Class) + ": " + e.Detail }
func (e *Error) Unwrap() error { return e.Err }

// Explain turns an error of a connection to k's brokers that is about a
// managed mechanism into one line that says which of the classes it is,
// or returns nil: a token or credentials that could not be had (the *Error
// itself, prefixed "kafka: "), or the brokers rejecting them.
func Explain(k config.Kafka, err error) error {
	var ae *Error
	if errors.As(err, &ae) {
		return fmt.Errorf("kafka: %w", ae)
	}
	if Classify(err) != Rejected {
		return nil
	}
	addrs := strings.Join(k.Brokers, ",")
	var detail string
	switch k.SASL.Mechanism {
	case config.SASLOAuthBearer:
		o := k.SASL.OAuth
		detail = fmt.Sprintf("brokers %s refused the OAUTHBEARER token of client %q from %s: %s (check the audience, issuer and signing keys the brokers expect)",
			addrs, o.ClientID, o.TokenEndpoint, brokerMessage(err))
	case config.SASLAWSMSKIAM:
		detail = fmt.Sprintf("brokers %s refused the AWS_MSK_IAM signature: %s (does the IAM policy allow kafka-cluster:Connect on this cluster?)",
			addrs, brokerMessage(err))
	default:
		return nil
	}
	return &Error{Class: Rejected, Section: "kafka", Detail: detail, Err: err}
}

// brokerMessage is the broker's own explanation from a franz-go error
// ("CODE: description: broker message"), or the whole error, on one line.
func brokerMessage(err error) string {
	msg := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if _, rest, ok := strings.Cut(msg, ke.Description+": "); ok && rest != "" {
			msg = rest
		}
	}
	return oneLine(msg, 300)
}

// oneLine folds s onto one line and cuts it to n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

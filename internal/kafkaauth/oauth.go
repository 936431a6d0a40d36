package kafkaauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"sink/config"
	"sink/internal/backoff"
)

// refreshFactor is the part of a token's lifetime after which a new one is
// fetched (Kafka's Java client refreshes at 0.8 too,
// sasl.login.refresh.window.factor), as long as that leaves refreshBuffer
// of its life; a token too short for both is replaced at half its life.
// The brokers ask for re-authentication when the token they were given
// expires (franz-go re-authenticates at 95-98% of that, and at least a
// second, or its round trip, early), so by then the cached token is past
// this point and the new session gets a fresh one; and no connection is
// given a token about to expire, whose session would need re-authenticating
// at once.
const (
	refreshFactor = 0.8
	refreshBuffer = 30 * time.Second
)

// unknownLifetime is assumed for a token whose lifetime neither the
// response (expires_in) nor the token (a JWT's exp) tells.
const unknownLifetime = 5 * time.Minute

// retry paces the token requests after a failure: at most one request per
// wait, however many connections ask meanwhile (they get the last error,
// or the last token while it is still valid).
var retry = backoff.Policy{Initial: time.Second, Max: time.Minute, Jitter: backoff.EqualJitter}

// token is a fetched access token and when to replace it.
type token struct {
	value     string
	expiry    time.Time
	refreshAt time.Time
}

// tokens caches the access token of one client at one provider. Every
// connection of every client of the process with the same settings asks
// it (see sources); the mutex makes the first one fetch and the others
// wait for that token instead of fetching their own.
type tokens struct {
	endpoint, clientID string
	extensions         map[string]string
	secret             string // replaced by the mask in any error text
	fetch              func(ctx context.Context) (*oauth2.Token, error)
	timeout            time.Duration
	now                func() time.Time

	mu       sync.Mutex
	tok      token
	err      error     // the last failure, answered until retryAt
	retryAt  time.Time // no request before this after a failure
	failures int
}

// newTokens builds the cache for o, with requests bounded by timeout.
func newTokens(o config.OAuth, timeout time.Duration) (*tokens, error) {
	secret, err := o.ClientSecretValue()
	if err != nil {
		return nil, fmt.Errorf("kafka.sasl.oauth.%w", err)
	}
	cc := &clientcredentials.Config{
		ClientID:     o.ClientID,
		ClientSecret: secret,
		TokenURL:     o.TokenEndpoint,
		Scopes:       strings.Fields(o.Scope),
		// HTTP Basic, as Kafka's Java client sends them; RFC 6749 makes
		// every provider accept it. Auto-detection would send a refused
		// secret a second time in the body.
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	hc := &http.Client{Timeout: timeout}
	return &tokens{
		endpoint:   o.TokenEndpoint,
		clientID:   o.ClientID,
		extensions: o.Extensions,
		secret:     secret,
		fetch: func(ctx context.Context) (*oauth2.Token, error) {
			return cc.Token(context.WithValue(ctx, oauth2.HTTPClient, hc))
		},
		timeout: timeout,
		now:     time.Now,
	}, nil
}

// auth is the franz-go callback: the current token and the extensions.
func (t *tokens) auth(ctx context.Context) (oauth.Auth, error) {
	v, err := t.get(ctx)
	if err != nil {
		return oauth.Auth{}, err
	}
	return oauth.Auth{Token: v.value, Extensions: t.extensions}, nil
}

// get returns a token that is valid now: the cached one until its refresh
// point, else a new one. When the provider fails, a cached token that has
// not expired yet is still returned (the brokers accept it until then),
// and no new request is made before the backoff's wait has passed.
func (t *tokens) get(ctx context.Context) (token, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.tok.value != "" && now.Before(t.tok.refreshAt) {
		return t.tok, nil
	}
	if now.Before(t.retryAt) {
		return t.fallback(now)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	ot, err := t.fetch(ctx)
	if err != nil {
		t.err = t.explain(err)
		t.retryAt = now.Add(retry.Wait(t.failures))
		t.failures++
		return t.fallback(now)
	}
	t.tok = newToken(ot, t.now())
	t.err, t.retryAt, t.failures = nil, time.Time{}, 0
	return t.tok, nil
}

// fallback is the answer while the provider fails: the cached token while
// it is valid, else the last error.
func (t *tokens) fallback(now time.Time) (token, error) {
	if t.tok.value != "" && now.Before(t.tok.expiry) {
		return t.tok, nil
	}
	return token{}, t.err
}

// newToken takes the expiry from the response's expires_in, else from the
// token itself when it is a JWT, else assumes unknownLifetime.
func newToken(ot *oauth2.Token, now time.Time) token {
	exp := ot.Expiry
	if exp.IsZero() {
		if jwtExp, ok := jwtExpiry(ot.AccessToken); ok {
			exp = jwtExp
		} else {
			exp = now.Add(unknownLifetime)
		}
	}
	return token{value: ot.AccessToken, expiry: exp, refreshAt: now.Add(refreshAfter(max(exp.Sub(now), 0)))}
}

// refreshAfter is how long after it was fetched a token of lifetime life
// is replaced: at 80% of its life, or earlier to keep refreshBuffer of it,
// but never before half of it.
func refreshAfter(life time.Duration) time.Duration {
	at := min(time.Duration(refreshFactor*float64(life)), life-refreshBuffer)
	return max(at, life/2)
}

// explain makes an *Error of a failed token request: the class, and what
// the endpoint said (its error and error_description, or the status and
// the start of the body), with the secret masked should the endpoint
// echo it.
func (t *tokens) explain(err error) *Error {
	class := Classify(err)
	if class == None {
		class = BadTokenResponse
	}
	detail := fmt.Sprintf("%s for client %q: %s", t.endpoint, t.clientID, endpointAnswer(err))
	if t.secret != "" {
		detail = strings.ReplaceAll(detail, t.secret, "******")
	}
	return &Error{Class: class, Section: "kafka.sasl.oauth", Detail: detail, Err: err}
}

// endpointAnswer is what the token endpoint answered, on one line.
func endpointAnswer(err error) string {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return oneLine(err.Error(), 300)
	}
	status := "no status"
	if re.Response != nil {
		status = re.Response.Status
	}
	switch {
	case re.ErrorCode != "" && re.ErrorDescription != "":
		return fmt.Sprintf("HTTP %s: %s: %s", status, re.ErrorCode, oneLine(re.ErrorDescription, 300))
	case re.ErrorCode != "":
		return fmt.Sprintf("HTTP %s: %s", status, re.ErrorCode)
	}
	return fmt.Sprintf("HTTP %s: %s", status, oneLine(string(re.Body), 200))
}

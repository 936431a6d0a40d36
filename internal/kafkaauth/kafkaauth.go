// Package kafkaauth makes the SASL mechanisms of managed Kafka services for
// franz-go: OAUTHBEARER with tokens from an OpenID Connect provider's
// client-credentials grant (golang.org/x/oauth2), and AWS_MSK_IAM with
// credentials from the AWS SDK's default chain (aws-sdk-go-v2), signed by
// franz-go. It fetches and refreshes what the mechanisms send, and
// classifies, in one tested function (Classify), what goes wrong on the
// way: the token endpoint refusing, failing, unreachable or answering
// without a token, the AWS chain without credentials, the brokers
// rejecting what they were sent.
//
// A token is fetched before it expires (at 80% of its lifetime, keeping 30 s
// of it when it lives long enough, never before half of it; when a
// connection asks for one, which franz-go does when it authenticates and
// when the brokers ask it to re-authenticate), so sessions are renewed in
// place and the consumer group is never left. After a failure the endpoint
// is asked again only by a growing backoff, whatever the number of
// connections asking; meanwhile they get the cached token while it is
// valid, else the last error.
//
// Concurrency: franz-go calls a Mechanism from every broker connection at
// once. The state behind it (the token cache, the AWS SDK's credentials
// cache) is guarded by a mutex and shared by every client of the process
// made with the same settings, so the probes and the consumer fetch one
// token, not one each.
package kafkaauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	kaws "github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"sink/config"
)

// Managed reports whether mechanism is one this package makes.
func Managed(mechanism string) bool {
	return mechanism == config.SASLOAuthBearer || mechanism == config.SASLAWSMSKIAM
}

// Mechanism returns the franz-go mechanism for k.SASL (OAUTHBEARER or
// AWS_MSK_IAM). It fails when a secret file cannot be read or the AWS SDK's
// configuration cannot be loaded (a profile that does not exist); getting
// a token or credentials happens when a connection asks.
func Mechanism(k config.Kafka) (sasl.Mechanism, error) {
	switch k.SASL.Mechanism {
	case config.SASLOAuthBearer:
		t, err := oauthSource(k)
		if err != nil {
			return nil, err
		}
		return oauth.Oauth(t.auth), nil
	case config.SASLAWSMSKIAM:
		c, err := awsSource(k)
		if err != nil {
			return nil, err
		}
		return kaws.ManagedStreamingIAM(c.auth), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: %q is not a managed mechanism", k.SASL.Mechanism)
}

// Result is what Probe obtained, for `sink check`.
type Result struct {
	Mechanism string
	// What says what was obtained and from where, e.g. "token from
	// https://idp/token for client \"sink\", expires in 4m59s".
	What string
}

// Probe gets a token (OAUTHBEARER) or credentials (AWS_MSK_IAM) now, the
// way a connection would, and says what it got; the error is an *Error
// with the class of the failure.
func Probe(ctx context.Context, k config.Kafka) (Result, error) {
	r := Result{Mechanism: k.SASL.Mechanism}
	switch k.SASL.Mechanism {
	case config.SASLOAuthBearer:
		t, err := oauthSource(k)
		if err != nil {
			return r, err
		}
		tok, err := t.get(ctx)
		if err != nil {
			return r, err
		}
		r.What = fmt.Sprintf("token from %s for client %q, expires in %s", t.endpoint, t.clientID, time.Until(tok.expiry).Round(time.Second))
	case config.SASLAWSMSKIAM:
		c, err := awsSource(k)
		if err != nil {
			return r, err
		}
		creds, err := c.retrieve(ctx)
		if err != nil {
			return r, err
		}
		r.What = awsWhat(creds.Source, creds.AccessKeyID, c.region, creds.CanExpire, creds.Expires)
	default:
		return r, fmt.Errorf("kafka.sasl.mechanism: %q is not a managed mechanism", k.SASL.Mechanism)
	}
	return r, nil
}

// awsWhat describes credentials without their secret: the provider that
// gave them, the access key's last four characters, the region, when they
// expire.
func awsWhat(source, key, region string, canExpire bool, expires time.Time) string {
	if len(key) > 4 {
		key = "…" + key[len(key)-4:]
	}
	s := fmt.Sprintf("credentials from %s (access key %s), region %q", source, key, region)
	if canExpire {
		s += fmt.Sprintf(", expire in %s", time.Until(expires).Round(time.Second))
	}
	return s
}

// sources holds the token caches and AWS credentials of the process, one
// per distinct settings.
var sources struct {
	sync.Mutex
	oauth map[string]*tokens
	aws   map[string]*awsCreds
}

// oauthSource returns the process's token cache for k's OAuth settings.
func oauthSource(k config.Kafka) (*tokens, error) {
	o := k.SASL.OAuth
	secret, err := o.ClientSecretValue()
	if err != nil {
		return nil, fmt.Errorf("kafka.sasl.oauth.%w", err)
	}
	parts := []string{o.TokenEndpoint, o.ClientID, digest(secret), o.Scope, k.RequestTimeout.String()}
	for _, n := range slices.Sorted(maps.Keys(o.Extensions)) {
		parts = append(parts, n+"="+o.Extensions[n])
	}
	key := strings.Join(parts, "\x00")
	sources.Lock()
	defer sources.Unlock()
	if t, ok := sources.oauth[key]; ok {
		return t, nil
	}
	t, err := newTokens(o, k.RequestTimeout)
	if err != nil {
		return nil, err
	}
	if sources.oauth == nil {
		sources.oauth = map[string]*tokens{}
	}
	sources.oauth[key] = t
	return t, nil
}

// awsSource returns the process's AWS credentials for k's AWS settings.
func awsSource(k config.Kafka) (*awsCreds, error) {
	a := k.SASL.AWS
	name := k.ClientID
	if len(name) > 64 { // STS's limit on a role session name
		name = name[:64]
	}
	key := strings.Join([]string{a.Region, a.Profile, a.RoleARN, a.RoleSessionName, name}, "\x00")
	sources.Lock()
	defer sources.Unlock()
	if c, ok := sources.aws[key]; ok {
		return c, nil
	}
	c, err := newAWSCreds(a, name, k.RequestTimeout)
	if err != nil {
		return nil, err
	}
	if sources.aws == nil {
		sources.aws = map[string]*awsCreds{}
	}
	sources.aws[key] = c
	return c, nil
}

// digest keeps a secret out of the map keys' text.
func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return string(h[:])
}

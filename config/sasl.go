package config

import (
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// OAuth is kafka.sasl.oauth, for mechanism OAUTHBEARER: the sink gets its
// token from an OpenID Connect provider with the client-credentials grant
// (RFC 6749 section 4.4), as Kafka's Java client does with
// OAuthBearerLoginCallbackHandler, and hands it to the brokers.
type OAuth struct {
	// TokenEndpoint is the provider's token URL (https; http only to a
	// loopback host, since the client secret travels in the request).
	TokenEndpoint string `koanf:"token_endpoint"`
	ClientID      string `koanf:"client_id"`
	// ClientSecret comes from the environment
	// (SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET) or from ClientSecretFile,
	// never from the config file.
	ClientSecret     Secret `koanf:"client_secret"`
	ClientSecretFile string `koanf:"client_secret_file"`
	// Scope is sent as the request's scope parameter when not empty
	// (space-separated scopes).
	Scope string `koanf:"scope"`
	// Extensions are SASL extensions sent beside the token (KIP-342), e.g.
	// Confluent Cloud's logicalCluster and identityPoolId.
	Extensions map[string]string `koanf:"extensions"`
}

// AWS is kafka.sasl.aws, for mechanism AWS_MSK_IAM: credentials come from
// the AWS SDK's default chain (environment, shared config and credentials
// files, web identity, container and instance roles).
type AWS struct {
	// Region is the AWS region when the brokers' host names carry none
	// (MSK's do); "" takes AWS_REGION or the profile's region.
	Region string `koanf:"region"`
	// Profile is the shared config profile; "" is AWS_PROFILE or default.
	Profile string `koanf:"profile"`
	// RoleARN, when set, is assumed (STS AssumeRole) with the chain's
	// credentials, under RoleSessionName ("" = sink-<connector name>).
	RoleARN         string `koanf:"role_arn"`
	RoleSessionName string `koanf:"role_session_name"`
}

// ClientSecretValue returns the OAuth client secret:
// kafka.sasl.oauth.client_secret, or the content of client_secret_file,
// read now.
func (o OAuth) ClientSecretValue() (string, error) {
	return secretValue(o.ClientSecret, o.ClientSecretFile, "client_secret_file")
}

var (
	// Kafka's own rules for extension names and values
	// (OAuthBearerClientInitialResponse); "auth" is the token's name.
	extensionKeyRE   = regexp.MustCompile(`^[A-Za-z]+$`)
	extensionValueRE = regexp.MustCompile(`^[\x21-\x7E \t\r\n]+$`)
	// RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
	scopeTokenRE = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]+$`)
	// A region as franz-go and the SDK accept it: us-east-1, us-gov-west-1.
	awsRegionRE = regexp.MustCompile(`^[a-z]+(-[a-z0-9]+)+-\d+$`)
	// arn:PARTITION:iam::ACCOUNT:role/PATH/NAME
	roleARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)
)

// sasl reports the problems of kafka.sasl: the keys its mechanism needs,
// and any key that belongs to another mechanism (which would be ignored).
func (p *problems) sasl(k Kafka) {
	s := k.SASL
	switch s.Mechanism {
	case "":
		p.unusedSASL(s, "kafka.sasl.mechanism is empty, so SASL is off (set it to "+strings.Join(saslMechanisms, ", ")+")", "")
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		p.saslPassword(s)
		p.unusedSASL(s, "kafka.sasl.mechanism is "+s.Mechanism, "password")
	case SASLOAuthBearer:
		p.oauth(s.OAuth)
		p.unusedSASL(s, "kafka.sasl.mechanism is OAUTHBEARER, which authenticates with kafka.sasl.oauth", "oauth")
	case SASLAWSMSKIAM:
		p.awsIAM(k)
		p.unusedSASL(s, "kafka.sasl.mechanism is AWS_MSK_IAM, which authenticates with kafka.sasl.aws", "aws")
	default:
		p.add("kafka.sasl.mechanism: %q is not one of %s (or empty for no SASL)", s.Mechanism, strings.Join(saslMechanisms, ", "))
	}
}

// unusedSASL reports every key of kafka.sasl that is set but belongs to a
// family ("password", "oauth", "aws") other than used.
func (p *problems) unusedSASL(s SASL, why, used string) {
	for _, kv := range saslKeys(s) {
		if kv.family != used {
			p.add("kafka.sasl.%s: set, but %s", kv.key, why)
		}
	}
}

type saslKey struct{ family, key string }

// saslKeys lists the keys of s that are set, in the order of example.yaml.
func saslKeys(s SASL) []saslKey {
	var out []saslKey
	add := func(family, key, v string) {
		if v != "" {
			out = append(out, saslKey{family, key})
		}
	}
	add("password", "username", s.Username)
	add("password", "password", string(s.Password))
	add("password", "password_file", s.PasswordFile)
	o := s.OAuth
	add("oauth", "oauth.token_endpoint", o.TokenEndpoint)
	add("oauth", "oauth.client_id", o.ClientID)
	add("oauth", "oauth.client_secret", string(o.ClientSecret))
	add("oauth", "oauth.client_secret_file", o.ClientSecretFile)
	add("oauth", "oauth.scope", o.Scope)
	if len(o.Extensions) > 0 {
		out = append(out, saslKey{"oauth", "oauth.extensions"})
	}
	a := s.AWS
	add("aws", "aws.region", a.Region)
	add("aws", "aws.profile", a.Profile)
	add("aws", "aws.role_arn", a.RoleARN)
	add("aws", "aws.role_session_name", a.RoleSessionName)
	return out
}

// saslPassword checks the keys of PLAIN and SCRAM.
func (p *problems) saslPassword(s SASL) {
	if s.Username == "" {
		p.add("kafka.sasl.username: required with kafka.sasl.mechanism %s", s.Mechanism)
	}
	if s.Password == "" && s.PasswordFile == "" {
		p.add("kafka.sasl.password: required with kafka.sasl.mechanism %s: set %sKAFKA__SASL__PASSWORD or kafka.sasl.password_file", s.Mechanism, EnvPrefix)
	}
	p.password("kafka.sasl", s.Password, s.PasswordFile)
}

// oauth checks kafka.sasl.oauth for OAUTHBEARER.
func (p *problems) oauth(o OAuth) {
	const key = "kafka.sasl.oauth"
	p.tokenEndpoint(o.TokenEndpoint)
	if o.ClientID == "" {
		p.add("%s.client_id: required with kafka.sasl.mechanism OAUTHBEARER", key)
	}
	switch {
	case o.ClientSecret == "" && o.ClientSecretFile == "":
		p.add("%s.client_secret: required with kafka.sasl.mechanism OAUTHBEARER: set %sKAFKA__SASL__OAUTH__CLIENT_SECRET or %s.client_secret_file", key, EnvPrefix, key)
	case o.ClientSecret != "" && o.ClientSecretFile != "":
		p.add("%s.client_secret_file: set together with %s.client_secret; set only one", key, key)
	case o.ClientSecretFile != "":
		if _, err := o.ClientSecretValue(); err != nil {
			p.add("%s.%v", key, err)
		}
	}
	for _, s := range strings.Fields(o.Scope) {
		if !scopeTokenRE.MatchString(s) {
			p.add("%s.scope: %q is not a scope (RFC 6749: printable ASCII without spaces, '\"' or '\\'; several are separated by spaces)", key, s)
		}
	}
	p.extensions(o.Extensions)
}

// extensions checks kafka.sasl.oauth.extensions against Kafka's rules.
func (p *problems) extensions(ext map[string]string) {
	const key = "kafka.sasl.oauth.extensions"
	names := make([]string, 0, len(ext))
	for n := range ext {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch {
		case n == "auth":
			p.add("%s.auth: the name Kafka gives the token itself; choose another extension name", key)
		case !extensionKeyRE.MatchString(n):
			p.add("%s.%s: an extension name is letters only (Kafka's rule)", key, n)
		case !extensionValueRE.MatchString(ext[n]):
			p.add("%s.%s: the value must be printable ASCII, not empty (Kafka's rule)", key, n)
		}
	}
}

// tokenEndpoint checks the token URL: absolute https, or http to loopback
// (a test provider on the same host), no credentials in it.
func (p *problems) tokenEndpoint(v string) {
	const key = "kafka.sasl.oauth.token_endpoint"
	if v == "" {
		p.add("%s: required with kafka.sasl.mechanism OAUTHBEARER (the identity provider's token URL, e.g. https://keycloak.example.com/realms/kafka/protocol/openid-connect/token)", key)
		return
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		p.add("%s: %q is not an http(s) URL with a host", key, v)
	case u.User != nil:
		p.add("%s: the URL carries credentials; the client secret goes in kafka.sasl.oauth.client_secret", key)
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		p.add("%s: %s would send the client secret unencrypted; use https (http is accepted only for a loopback host)", key, u.Redacted())
	}
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// awsIAM checks kafka.sasl.aws for AWS_MSK_IAM.
func (p *problems) awsIAM(k Kafka) {
	const key = "kafka.sasl.aws"
	a := k.SASL.AWS
	if !k.TLS.Enabled {
		p.add("kafka.tls.enabled: AWS_MSK_IAM needs TLS (MSK's IAM listeners, ports 9098 and 9198, speak only TLS); set kafka.tls.enabled: true")
	}
	if a.Region != "" && !awsRegionRE.MatchString(a.Region) {
		p.add("%s.region: %q is not an AWS region (e.g. us-east-1)", key, a.Region)
	}
	if a.Profile != "" && strings.ContainsAny(a.Profile, " \t\r\n[]") {
		p.add("%s.profile: %q is not a profile name", key, a.Profile)
	}
	if a.RoleARN != "" && !roleARNRE.MatchString(a.RoleARN) {
		p.add("%s.role_arn: %q is not an IAM role ARN (arn:aws:iam::123456789012:role/NAME)", key, a.RoleARN)
	}
	if a.RoleSessionName != "" && a.RoleARN == "" {
		p.add("%s.role_session_name: set, but no %s.role_arn to assume", key, key)
	}
}

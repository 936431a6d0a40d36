package connectimport

import (
	"fmt"
	"strings"
)

// The consumer.override.* keys of Kafka's SASL client settings, and the
// JAAS configuration (sasl.jaas.config) of each login module the sink has a
// counterpart for: PLAIN and SCRAM (username; the password is never
// written), OAUTHBEARER with Kafka's client-credentials login
// (clientId, scope, extensions; the secret is never written) and MSK's
// IAMLoginModule (profile, role, STS region).

// Login modules and callback handlers, as Connect configs name them.
const (
	oauthLoginModule   = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	iamLoginModule     = "software.amazon.msk.auth.iam.IAMLoginModule"
	iamCallbackHandler = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
)

// oauthLoginHandlers are Kafka's client-credentials login callback
// handlers (the secured. one is the class before Kafka 3.4 moved it).
var oauthLoginHandlers = []string{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
	"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
}

const (
	refreshed      = "the sink replaces a token at 80% of its lifetime, as Kafka's default does, keeping at least 30 s of it when the token lives long enough"
	secretWithheld = "the secret is never written to the YAML: set SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET or kafka.sasl.oauth.client_secret_file"
	passwordHint   = "the password is never written to the YAML: set the variable or kafka.sasl.password_file"
)

// saslRules are the SASL client settings of a consumer override, by their
// name after consumer.override. (overrideRules takes them in).
var saslRules = map[string]overrideRule{
	"sasl.mechanism":                                      (*conv).saslMechanism,
	"sasl.jaas.config":                                    (*conv).jaasConfig,
	"sasl.oauthbearer.token.endpoint.url":                 (*conv).tokenEndpoint,
	"sasl.login.callback.handler.class":                   (*conv).loginHandler,
	"sasl.client.callback.handler.class":                  (*conv).clientHandler,
	"sasl.oauthbearer.client.credentials.client.id":       carryTo("kafka.sasl.oauth.client_id", ""),
	"sasl.oauthbearer.client.credentials.client.secret":   notWritten("kafka.sasl.oauth.client_secret", secretWithheld),
	"sasl.oauthbearer.scope":                              carryTo("kafka.sasl.oauth.scope", ""),
	"sasl.oauthbearer.scope.claim.name":                   notNeededFor("a client-side check of the token; the brokers validate it"),
	"sasl.oauthbearer.sub.claim.name":                     notNeededFor("a client-side check of the token; the brokers validate it"),
	"sasl.oauthbearer.clock.skew.seconds":                 notNeededFor("a client-side check of the token; the brokers validate it"),
	"sasl.oauthbearer.expected.audience":                  notNeededFor("a client-side check of the token; the brokers validate it"),
	"sasl.oauthbearer.expected.issuer":                    notNeededFor("a client-side check of the token; the brokers validate it"),
	"sasl.login.refresh.window.factor":                    notNeededFor(refreshed),
	"sasl.login.refresh.window.jitter":                    notNeededFor(refreshed),
	"sasl.login.refresh.min.period.seconds":               notNeededFor(refreshed),
	"sasl.login.refresh.buffer.seconds":                   notNeededFor(refreshed),
	"sasl.login.retry.backoff.ms":                         notNeededFor("the sink backs off from a failing token endpoint by itself (1 s growing to 1 min)"),
	"sasl.login.retry.backoff.max.ms":                     notNeededFor("the sink backs off from a failing token endpoint by itself (1 s growing to 1 min)"),
	"sasl.login.connect.timeout.ms":                       notNeededFor("kafka.request_timeout bounds a token request"),
	"sasl.login.read.timeout.ms":                          notNeededFor("kafka.request_timeout bounds a token request"),
	"sasl.oauthbearer.header.urlencode":                   notNeededFor("the sink sends the client id and secret URL-encoded in HTTP Basic, as RFC 6749 asks"),
	"sasl.oauthbearer.jwks.endpoint.url":                  notNeededFor("a broker setting: the brokers validate tokens against it"),
	"sasl.oauthbearer.jwks.endpoint.refresh.ms":           notNeededFor("a broker setting"),
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     notNeededFor("a broker setting"),
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": notNeededFor("a broker setting"),
}

// carryTo carries the value to key to.
func carryTo(to, why string) overrideRule {
	return func(v *conv, key, val string) {
		v.doc.set(to, val)
		v.carry(key, to, why)
	}
}

// notWritten carries a secret by name only: the YAML does not hold it.
func notWritten(to, why string) overrideRule {
	return func(v *conv, key, _ string) { v.carry(key, to, why) }
}

func (v *conv) saslMechanism(key, val string) {
	switch m := strings.ToUpper(val); m {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM":
		v.doc.set("kafka.sasl.mechanism", m)
		v.carry(key, "kafka.sasl.mechanism", "")
	default:
		v.unsupported(key, "the sink supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER and AWS_MSK_IAM")
	}
}

func (v *conv) tokenEndpoint(key, val string) {
	if strings.HasPrefix(strings.ToLower(val), "file:") {
		v.unsupported(key, "a token read from a file; the sink gets its tokens from an OpenID Connect token endpoint (client credentials): set kafka.sasl.oauth.token_endpoint")
		return
	}
	v.doc.set("kafka.sasl.oauth.token_endpoint", val)
	v.carry(key, "kafka.sasl.oauth.token_endpoint", "")
}

func (v *conv) loginHandler(key, val string) {
	for _, h := range oauthLoginHandlers {
		if val == h {
			v.notNeeded(key, "the sink gets OAUTHBEARER tokens itself, with the client-credentials grant at kafka.sasl.oauth.token_endpoint")
			return
		}
	}
	v.unsupported(key, "a custom login callback handler; the sink's OAUTHBEARER gets tokens with the client-credentials grant only (kafka.sasl.oauth)")
}

func (v *conv) clientHandler(key, val string) {
	if val == iamCallbackHandler {
		v.notNeeded(key, "the sink signs AWS_MSK_IAM with franz-go and the AWS SDK's credentials")
		return
	}
	v.unsupported(key, "a custom client callback handler has no counterpart in the sink")
}

// jaasConfig maps sasl.jaas.config by its login module.
func (v *conv) jaasConfig(key, val string) {
	module, opts, err := parseJAAS(val)
	switch {
	case err != nil:
		v.unsupported(key, fmt.Sprintf("not a JAAS configuration the import can read (%v)", err))
	case module == oauthLoginModule:
		v.oauthJAAS(key, opts)
	case module == iamLoginModule:
		v.iamJAAS(key, opts)
	case opts["username"] != "":
		v.doc.set("kafka.sasl.username", opts["username"])
		v.carry(key, "kafka.sasl.username, SINK_KAFKA__SASL__PASSWORD", passwordHint)
	default:
		v.unsupported(key, fmt.Sprintf("login module %s: no username=\"…\" in it, and not Kafka's OAuthBearerLoginModule or MSK's IAMLoginModule", module))
	}
}

// oauthJAAS: OAuthBearerLoginModule's options of the client-credentials
// login (KIP-768).
func (v *conv) oauthJAAS(key string, opts map[string]string) {
	var to, unknown []string
	for _, name := range sortedKeys(opts) {
		val := opts[name]
		switch ext, isExt := strings.CutPrefix(name, "extension_"); {
		case name == "clientId":
			v.doc.set("kafka.sasl.oauth.client_id", val)
			to = append(to, "kafka.sasl.oauth.client_id")
		case name == "clientSecret":
			to = append(to, "SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET")
		case name == "scope":
			v.doc.set("kafka.sasl.oauth.scope", val)
			to = append(to, "kafka.sasl.oauth.scope")
		case isExt:
			v.doc.set("kafka.sasl.oauth.extensions."+ext, val)
			to = append(to, "kafka.sasl.oauth.extensions."+ext)
		default:
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		v.unsupported(key, "OAuthBearerLoginModule options "+strings.Join(unknown, ", ")+" have no counterpart (unsecuredLoginStringClaim_* make unsigned test tokens; the sink gets real ones from kafka.sasl.oauth.token_endpoint)")
		return
	}
	v.carry(key, strings.Join(to, ", "), secretWithheld)
}

// iamJAAS: MSK's IAMLoginModule options.
func (v *conv) iamJAAS(key string, opts map[string]string) {
	var to, unknown []string
	for _, name := range sortedKeys(opts) {
		switch name {
		case "awsProfileName":
			v.doc.set("kafka.sasl.aws.profile", opts[name])
			to = append(to, "kafka.sasl.aws.profile")
		case "awsRoleArn":
			v.doc.set("kafka.sasl.aws.role_arn", opts[name])
			to = append(to, "kafka.sasl.aws.role_arn")
		case "awsRoleSessionName":
			v.doc.set("kafka.sasl.aws.role_session_name", opts[name])
			to = append(to, "kafka.sasl.aws.role_session_name")
		case "awsStsRegion":
			v.doc.set("kafka.sasl.aws.region", opts[name])
			to = append(to, "kafka.sasl.aws.region")
		case "awsDebugCreds", "awsMaxRetries", "awsMaxBackOffTimeMs":
			// Logging and retries of the Java library; the SDK has its own.
		default:
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		v.unsupported(key, "IAMLoginModule options "+strings.Join(unknown, ", ")+" have no counterpart: give the credentials to the AWS SDK's chain instead (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile in kafka.sasl.aws.profile, or a role the pod's identity may assume in kafka.sasl.aws.role_arn)")
		return
	}
	if len(to) == 0 {
		v.notNeeded(key, "credentials from the AWS SDK's default chain (environment, shared profile, web identity, container or instance role)")
		return
	}
	v.carry(key, strings.Join(to, ", "), "credentials from the AWS SDK's default chain")
}

// parseJAAS reads a JAAS configuration as Kafka's sasl.jaas.config holds
// it: one login module, its control flag, then options NAME=VALUE (VALUE
// in double quotes, where a backslash escapes the next character, or bare
// up to the next blank), and a closing semicolon.
func parseJAAS(s string) (module string, opts map[string]string, err error) {
	rest := strings.TrimSpace(s)
	if !strings.HasSuffix(rest, ";") {
		return "", nil, fmt.Errorf("no ';' at the end")
	}
	rest = strings.TrimSpace(strings.TrimSuffix(rest, ";"))
	module, rest = jaasWord(rest)
	flag, rest := jaasWord(rest)
	switch strings.ToLower(flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, fmt.Errorf("want a login module class and a control flag (required, requisite, sufficient or optional), got %q %q", module, flag)
	}
	opts = map[string]string{}
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || strings.ContainsAny(rest[:eq], " \t\r\n\";") {
			return "", nil, fmt.Errorf("%q is not NAME=VALUE", oneWord(rest))
		}
		name := rest[:eq]
		var val string
		if val, rest, err = jaasValue(rest[eq+1:]); err != nil {
			return "", nil, fmt.Errorf("option %s: %w", name, err)
		}
		opts[name] = val
	}
	return module, opts, nil
}

const blanks = " \t\r\n"

// jaasWord splits off the first blank-separated word of s.
func jaasWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, blanks)
	if i := strings.IndexAny(s, blanks); i >= 0 {
		return s[:i], strings.TrimLeft(s[i:], blanks)
	}
	return s, ""
}

func oneWord(s string) string { w, _ := jaasWord(s); return w }

// jaasValue reads an option's value off s: quoted, or bare up to a blank.
func jaasValue(s string) (val, rest string, err error) {
	if s == "" || strings.ContainsAny(s[:1], blanks) {
		return "", "", fmt.Errorf("no value")
	}
	if s[0] != '"' {
		val, rest = jaasWord(s)
		if strings.Contains(val, ";") {
			return "", "", fmt.Errorf("a second login module (';' inside the configuration) is not supported")
		}
		return val, rest, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), strings.TrimLeft(s[i+1:], blanks), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated quoted value")
}

package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Secret is a password. It prints as "******" (or "" when empty) through
// every fmt verb, JSON, YAML and text marshaling, so that a Config, or a
// struct holding one, can be logged or printed without leaking it. Code
// that needs the value calls Reveal, which is easy to find in review.
type Secret string

// Reveal returns the password itself, for handing to a client library.
func (s Secret) Reveal() string { return string(s) }

// String returns the masked form.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redactedPassword
}

// GoString masks %#v too.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// Format masks every verb, including the ones fmt does not route through
// String (%d, %x on a string type, ...).
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = f.Write([]byte(s.GoString()))
	case verb == 'q':
		_, _ = f.Write([]byte(strconv.Quote(s.String())))
	default:
		_, _ = f.Write([]byte(s.String()))
	}
}

// MarshalText masks JSON, YAML and log encoders (zerolog's Interface).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// TLS configures a TLS client: to the Kafka brokers (kafka.tls) or to
// ClickHouse's secure native port (clickhouse.tls, usually 9440).
type TLS struct {
	Enabled bool `koanf:"enabled"`
	// CAFile is a PEM bundle of the CAs that sign the servers'
	// certificates; empty means the system's roots.
	CAFile string `koanf:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that require one (mutual TLS). Both or neither.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ServerName is the name the servers' certificates must carry, when
	// it is not the host in the address (e.g. brokers reached by IP).
	ServerName string `koanf:"server_name"`
	// InsecureSkipVerify accepts any certificate. Only ever true when
	// written so; it is for tests, and exclusive with ca_file.
	InsecureSkipVerify bool `koanf:"insecure_skip_verify"`
	// Stores are JKS or PKCS12 trust and key stores, instead of the PEM
	// files (keystore.go).
	Stores `koanf:",squash"`
}

// SASL configures Kafka authentication. Mechanism "" turns it off.
type SASL struct {
	Mechanism string `koanf:"mechanism"`
	Username  string `koanf:"username"`
	// Password comes from the environment (SINK_KAFKA__SASL__PASSWORD);
	// a password written in the config file is refused. PasswordFile is
	// the alternative (a mounted Kubernetes Secret): its content, without
	// a trailing newline, is the password.
	Password     Secret `koanf:"password"`
	PasswordFile string `koanf:"password_file"`
	// OAuth is for OAUTHBEARER, AWS for AWS_MSK_IAM (sasl.go).
	OAuth OAuth `koanf:"oauth"`
	AWS   AWS   `koanf:"aws"`
}

// SASL mechanisms, as Kafka names them.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLOAuthBearer = "OAUTHBEARER"
	SASLAWSMSKIAM   = "AWS_MSK_IAM"
)

var saslMechanisms = []string{SASLPlain, SASLScramSHA256, SASLScramSHA512, SASLOAuthBearer, SASLAWSMSKIAM}

// ClientConfig builds the crypto/tls client configuration, reading the
// files. It returns nil when TLS is off. Errors name the key relative to
// the TLS section ("ca_file: ..."), one per line; Validate reports the same
// problems with the full key.
func (t TLS) ClientConfig() (*tls.Config, error) {
	c, errs := t.load()
	return c, errors.Join(errs...)
}

func (t TLS) load() (*tls.Config, []error) {
	if !t.Enabled {
		return nil, t.offKeys()
	}
	c := &tls.Config{
		// TLS 1.0 and 1.1 are deprecated by RFC 8996; every Kafka and
		// ClickHouse release that speaks TLS speaks 1.2.
		MinVersion: tls.VersionTLS12,
		ServerName: t.ServerName,
		// #nosec G402 -- only when the user wrote insecure_skip_verify: true.
		InsecureSkipVerify: t.InsecureSkipVerify,
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if t.CAFile != "" {
		if t.InsecureSkipVerify {
			add("insecure_skip_verify: true ignores ca_file %s; set one of them", t.CAFile)
		}
		pool, err := t.caPool()
		if err != nil {
			errs = append(errs, err)
		}
		c.RootCAs = pool
	}
	cert, err := t.clientCert()
	switch {
	case err != nil:
		errs = append(errs, err)
	case cert != nil:
		c.Certificates = []tls.Certificate{*cert}
	}
	errs = append(errs, t.fromStores(c)...)
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// offKeys refuses the keys set in a TLS section that is off: settings
// without enabled would silently mean plaintext.
func (t TLS) offKeys() []error {
	var errs []error
	for _, kv := range [][2]string{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"server_name", t.ServerName},
		{"truststore_file", t.TruststoreFile}, {"keystore_file", t.KeystoreFile}} {
		if kv[1] != "" {
			errs = append(errs, fmt.Errorf("%s: set, but TLS is off (set enabled: true)", kv[0]))
		}
	}
	if t.InsecureSkipVerify {
		errs = append(errs, errors.New("insecure_skip_verify: set, but TLS is off (set enabled: true)"))
	}
	return errs
}

// caPool reads ca_file's PEM certificates (nil pool when it cannot be read).
func (t TLS) caPool() (*x509.CertPool, error) {
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return pool, fmt.Errorf("ca_file: %s holds no PEM certificate", t.CAFile)
	}
	return pool, nil
}

// clientCert reads the client certificate of cert_file and key_file; nil
// when neither is set.
func (t TLS) clientCert() (*tls.Certificate, error) {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		return nil, errors.New("key_file: required with cert_file")
	case t.CertFile == "" && t.KeyFile != "":
		return nil, errors.New("cert_file: required with key_file")
	case t.CertFile == "":
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		// crypto/tls names neither file; the key it means is the
		// certificate unless the key is the unreadable one.
		return nil, fmt.Errorf("cert_file, key_file: %s, %s: %v", t.CertFile, t.KeyFile, err)
	}
	return &cert, nil
}

// PasswordValue returns the SASL password: kafka.sasl.password, or the
// content of kafka.sasl.password_file, read now.
func (s SASL) PasswordValue() (string, error) {
	return passwordValue(s.Password, s.PasswordFile)
}

// PasswordValue returns the ClickHouse password: clickhouse.password, or
// the content of clickhouse.password_file, read now.
func (c ClickHouse) PasswordValue() (string, error) {
	return passwordValue(c.Password, c.PasswordFile)
}

func passwordValue(pw Secret, file string) (string, error) {
	return secretValue(pw, file, "password_file")
}

// secretValue is pw, or the content of file when it is set; errors name
// the file's key.
func secretValue(pw Secret, file, key string) (string, error) {
	if file == "" {
		return pw.Reveal(), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	// `echo secret > file` and editors add a newline; Kubernetes Secrets
	// do not. A password never ends in a newline on purpose.
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", key, file)
	}
	return s, nil
}

// tlsSection reports the problems of a TLS section under key.
func (p *problems) tlsSection(key string, t TLS) {
	_, errs := t.load()
	for _, err := range errs {
		p.add("%s.%v", key, err)
	}
}

// password checks a password/password_file pair under key (clickhouse or
// kafka.sasl).
func (p *problems) password(key string, pw Secret, file string) {
	if pw != "" && file != "" {
		p.add("%s.password_file: set together with %s.password; set only one", key, key)
		return
	}
	if file != "" {
		if _, err := passwordValue("", file); err != nil {
			p.add("%s.%v", key, err)
		}
	}
}

func (c *Config) validateSecurity(p *problems) {
	k := &c.Kafka
	p.tlsSection("kafka.tls", k.TLS)
	p.sasl(*k)

	ch := &c.ClickHouse
	p.password("clickhouse", ch.Password, ch.PasswordFile)
	p.tlsSection("clickhouse.tls", ch.TLS)
}

// passwordKeys are the keys that hold passwords, which the config file may
// not set: a file is copied into images, ConfigMaps and repositories, and
// read by everyone who may read the deployment.
var passwordKeys = append([]string{"clickhouse.password", "kafka.sasl.password", "kafka.sasl.oauth.client_secret", "schema_registry.password", adminTokenKey},
	tlsPasswordKeys()...)

// tlsPasswordKeys are the store passwords of every TLS section.
func tlsPasswordKeys() []string {
	var out []string
	for _, sec := range []string{"kafka.tls", "clickhouse.tls", "schema_registry.tls"} {
		for _, k := range storeKeys {
			out = append(out, sec+"."+k)
		}
	}
	return out
}

// adminTokenKey is the key of the admin endpoints' bearer token; it has no
// _file variant, only the environment (AdminTokenEnv).
const adminTokenKey = "http.admin_token"

// filePasswords reports the passwords written in the YAML document. The
// message names the key and never the value.
func filePasswords(doc map[string]any) []error {
	var errs []error
	for _, key := range passwordKeys {
		var v any = doc
		for _, part := range strings.Split(key, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[part]
		}
		if s, ok := v.(string); ok && s != "" {
			env := EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "__"))
			if key == adminTokenKey {
				errs = append(errs, fmt.Errorf("%s: a token may not be written in the config file; set %s", key, env))
				continue
			}
			errs = append(errs, fmt.Errorf("%s: a password may not be written in the config file; set %s or %s_file", key, env, key))
		}
	}
	return errs
}

// plaintextWarnings lists the credentials the config would send without
// TLS to a host that is not loopback (Warnings: sink check prints them,
// sink run logs them at start): a SASL exchange with Kafka (PLAIN sends
// the password itself; SCRAM an exchange a password can be guessed
// against offline), HTTP basic auth to an http:// registry URL, and the
// ClickHouse password (the native protocol and HTTP both carry it as it
// is). On loopback nothing crosses a network.
func (c *Config) plaintextWarnings() []string {
	var w []string
	k := c.Kafka
	if s := k.SASL; s.Mechanism != "" && !k.TLS.Enabled {
		if hosts := remote(k.Brokers); len(hosts) > 0 {
			who, what := saslInClear(s)
			w = append(w, fmt.Sprintf("kafka.sasl (%s as %q) %s: kafka.tls is off and brokers %s are not loopback; set kafka.tls.enabled and use the brokers' TLS listener",
				s.Mechanism, who, what, strings.Join(hosts, ", ")))
		}
	}
	if r := c.SchemaRegistry; r.Username != "" {
		if urls := plainURLs(r.URLs); len(urls) > 0 {
			w = append(w, fmt.Sprintf("schema_registry.username %q sends its password in the clear (HTTP basic auth) to %s; use https:// URLs",
				r.Username, strings.Join(urls, ", ")))
		}
	}
	ch := c.ClickHouse
	if (ch.Password != "" || ch.PasswordFile != "") && !ch.TLS.Enabled {
		if hosts := remote(ch.Addrs); len(hosts) > 0 {
			w = append(w, fmt.Sprintf("clickhouse.password is sent in the clear to %s: clickhouse.tls is off; set clickhouse.tls.enabled and the secure port (9440 native, 8443 http)",
				strings.Join(hosts, ", ")))
		}
	}
	return w
}

// saslInClear names who logs in with s and what a SASL exchange without
// TLS gives away.
func saslInClear(s SASL) (who, what string) {
	switch s.Mechanism {
	case SASLPlain:
		return s.Username, "sends its password in the clear"
	case SASLOAuthBearer:
		return s.OAuth.ClientID, "sends its bearer token in the clear (whoever sees it can use it until it expires, and reads every record)"
	}
	return s.Username, "runs in the clear (SCRAM does not send the password, but whoever sees the exchange can guess it offline, and reads every record)"
}

// remote is the addresses (host:port) of addrs whose host is not loopback.
func remote(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if !LoopbackListen(a) {
			out = append(out, a)
		}
	}
	return out
}

// plainURLs is the http:// URLs of urls whose host is not loopback.
func plainURLs(urls []string) []string {
	var out []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "http" || LoopbackListen(net.JoinHostPort(u.Hostname(), "0")) {
			continue
		}
		out = append(out, redactURL(raw))
	}
	return out
}

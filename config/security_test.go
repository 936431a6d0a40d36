package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"sink/internal/testenv"
)

// testPKI is a throwaway CA and a certificate it signed (testenv.NewPKI),
// and a file that is not PEM.
type testPKI struct {
	ca, cert, key, junk string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	p := testenv.NewPKI(t)
	return testPKI{ca: p.CAFile, cert: p.CertFile, key: p.KeyFile, junk: writeFile(t, "junk.pem", "not a certificate\n")}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestValidateSecurity(t *testing.T) {
	pki := newTestPKI(t)
	pwFile := writeFile(t, "pw", "s3cret\n")
	emptyFile := writeFile(t, "empty", "\n")
	missing := filepath.Join(t.TempDir(), "missing")

	f := func(env []string, wantErr string) {
		t.Helper()
		_, err := Parse([]byte(base), env)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("env %q: unexpected error: %v", env, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), "config: "+wantErr) {
			t.Fatalf("env %q: error:\n%v\nwant it to contain:\nconfig: %s", env, err, wantErr)
		}
	}
	env := func(kv ...string) []string { return kv }
	sasl := func(mech string, kv ...string) []string {
		return append([]string{"SINK_KAFKA__SASL__MECHANISM=" + mech}, kv...)
	}

	// kafka.tls
	f(env("SINK_KAFKA__TLS__ENABLED=true"), "")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__CA_FILE="+pki.ca, "SINK_KAFKA__TLS__CERT_FILE="+pki.cert,
		"SINK_KAFKA__TLS__KEY_FILE="+pki.key, "SINK_KAFKA__TLS__SERVER_NAME=kafka.example"), "")
	f(env("SINK_KAFKA__TLS__CA_FILE="+pki.ca), "kafka.tls.ca_file: set, but TLS is off (set enabled: true)")
	f(env("SINK_KAFKA__TLS__SERVER_NAME=x"), "kafka.tls.server_name: set, but TLS is off")
	f(env("SINK_KAFKA__TLS__INSECURE_SKIP_VERIFY=true"), "kafka.tls.insecure_skip_verify: set, but TLS is off")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__CA_FILE="+missing), "kafka.tls.ca_file: open "+missing+": no such file or directory")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__CA_FILE="+pki.junk), "kafka.tls.ca_file: "+pki.junk+" holds no PEM certificate")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__CERT_FILE="+pki.cert), "kafka.tls.key_file: required with cert_file")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__KEY_FILE="+pki.key), "kafka.tls.cert_file: required with key_file")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__CERT_FILE="+pki.ca, "SINK_KAFKA__TLS__KEY_FILE="+pki.key),
		"kafka.tls.cert_file, key_file: "+pki.ca+", "+pki.key+": tls: private key does not match public key")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__CERT_FILE="+pki.cert, "SINK_KAFKA__TLS__KEY_FILE="+pki.junk),
		"kafka.tls.cert_file, key_file: "+pki.cert+", "+pki.junk+": tls: failed to find any PEM data in key input")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__INSECURE_SKIP_VERIFY=true"), "")
	f(env("SINK_KAFKA__TLS__ENABLED=true", "SINK_KAFKA__TLS__INSECURE_SKIP_VERIFY=true", "SINK_KAFKA__TLS__CA_FILE="+pki.ca),
		"kafka.tls.insecure_skip_verify: true ignores ca_file "+pki.ca+"; set one of them")

	// kafka.sasl
	f(sasl("PLAIN", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD=p"), "")
	f(sasl("scram-sha-256", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD=p"), "")
	f(sasl("SCRAM-SHA-512", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD_FILE="+pwFile), "")
	f(sasl("SCRAM", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD=p"),
		`kafka.sasl.mechanism: "SCRAM" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM (or empty for no SASL)`)
	f(sasl("GSSAPI"), `kafka.sasl.mechanism: "GSSAPI" is not one of`)
	f(sasl("PLAIN", "SINK_KAFKA__SASL__PASSWORD=p"), "kafka.sasl.username: required with kafka.sasl.mechanism PLAIN")
	f(sasl("SCRAM-SHA-256", "SINK_KAFKA__SASL__USERNAME=u"),
		"kafka.sasl.password: required with kafka.sasl.mechanism SCRAM-SHA-256: set SINK_KAFKA__SASL__PASSWORD or kafka.sasl.password_file")
	f(sasl("PLAIN", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD=p", "SINK_KAFKA__SASL__PASSWORD_FILE="+pwFile),
		"kafka.sasl.password_file: set together with kafka.sasl.password; set only one")
	f(sasl("PLAIN", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD_FILE="+missing),
		"kafka.sasl.password_file: open "+missing+": no such file or directory")
	f(sasl("PLAIN", "SINK_KAFKA__SASL__USERNAME=u", "SINK_KAFKA__SASL__PASSWORD_FILE="+emptyFile),
		"kafka.sasl.password_file: "+emptyFile+" is empty")
	f(env("SINK_KAFKA__SASL__USERNAME=u"), "kafka.sasl.username: set, but kafka.sasl.mechanism is empty, so SASL is off (set it to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM)")
	f(env("SINK_KAFKA__SASL__PASSWORD=p"), "kafka.sasl.password: set, but kafka.sasl.mechanism is empty")
	f(env("SINK_KAFKA__SASL__PASSWORD_FILE="+pwFile), "kafka.sasl.password_file: set, but kafka.sasl.mechanism is empty")

	// clickhouse
	f(env("SINK_CLICKHOUSE__PASSWORD=p"), "")
	f(env("SINK_CLICKHOUSE__PASSWORD_FILE="+pwFile), "")
	f(env("SINK_CLICKHOUSE__PASSWORD=p", "SINK_CLICKHOUSE__PASSWORD_FILE="+pwFile),
		"clickhouse.password_file: set together with clickhouse.password; set only one")
	f(env("SINK_CLICKHOUSE__PASSWORD_FILE="+missing), "clickhouse.password_file: open "+missing+": no such file or directory")
	f(env("SINK_CLICKHOUSE__PASSWORD_FILE="+emptyFile), "clickhouse.password_file: "+emptyFile+" is empty")
	f(env("SINK_CLICKHOUSE__TLS__ENABLED=true", "SINK_CLICKHOUSE__TLS__CA_FILE="+pki.ca), "")
	f(env("SINK_CLICKHOUSE__TLS__CA_FILE="+pki.ca), "clickhouse.tls.ca_file: set, but TLS is off (set enabled: true)")
	f(env("SINK_CLICKHOUSE__TLS__ENABLED=true", "SINK_CLICKHOUSE__TLS__CA_FILE="+pki.junk), "clickhouse.tls.ca_file: "+pki.junk+" holds no PEM certificate")
	f(env("SINK_CLICKHOUSE__TLS__ENABLED=true", "SINK_CLICKHOUSE__TLS__INSECURE_SKIP_VERIFY=true", "SINK_CLICKHOUSE__TLS__CA_FILE="+pki.ca),
		"clickhouse.tls.insecure_skip_verify: true ignores ca_file")
}

// Passwords come from the environment or a file; one written in the config
// file is refused, and the refusal does not repeat it.
func TestPasswordInFileRefused(t *testing.T) {
	f := func(yaml string, env []string, wantErr string) {
		t.Helper()
		doc := base + yaml
		if strings.HasPrefix(yaml, "name:") {
			doc = yaml
		}
		_, err := Parse([]byte(doc), env)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("%s: unexpected error: %v", yaml, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: error %v; want %q", yaml, err, wantErr)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("the error repeats the password: %v", err)
		}
	}
	f("clickhouse: {password: hunter2}", nil,
		"config: clickhouse.password: a password may not be written in the config file; set SINK_CLICKHOUSE__PASSWORD or clickhouse.password_file")
	f("name: t\nkafka: {topics: [orders], sasl: {mechanism: PLAIN, username: u, password: hunter2}}\nroutes: [{topic: orders, table: o}]", nil,
		"config: kafka.sasl.password: a password may not be written in the config file; set SINK_KAFKA__SASL__PASSWORD or kafka.sasl.password_file")
	f("clickhouse: {password: hunter2}\nkafka_sasl: x", nil, `unknown key "kafka_sasl"`) // decoding problems come first
	f("clickhouse: {password_file: /dev/null, password: hunter2}", nil, "clickhouse.password: a password may not be written")
	// Empty is "no password", as example.yaml writes it.
	f(`clickhouse: {password: ""}`, nil, "")
	f(`clickhouse: {password: ""}`, []string{"SINK_CLICKHOUSE__PASSWORD=hunter2"}, "")
	// Reported with the other problems, each on its own line.
	_, err := Parse([]byte(base+"clickhouse: {password: hunter2, max_in_flight: 0}"), nil)
	if err == nil || len(strings.Split(err.Error(), "\n")) != 2 {
		t.Fatalf("want two problems, got %v", err)
	}
}

func TestPasswordValue(t *testing.T) {
	f := func(content, want string) {
		t.Helper()
		path := writeFile(t, "pw", content)
		got, err := ClickHouse{PasswordFile: path}.PasswordValue()
		if err != nil || got != want {
			t.Fatalf("file %q: got %q, %v; want %q", content, got, err, want)
		}
		got, err = SASL{PasswordFile: path}.PasswordValue()
		if err != nil || got != want {
			t.Fatalf("sasl file %q: got %q, %v; want %q", content, got, err, want)
		}
	}
	f("s3cret", "s3cret")
	f("s3cret\n", "s3cret")
	f("s3cret\r\n", "s3cret")
	f("s3cret\n\n", "s3cret\n") // only one newline is the editor's
	f(" spaced ", " spaced ")
	if got, err := (ClickHouse{Password: "direct"}).PasswordValue(); err != nil || got != "direct" {
		t.Fatalf("direct password: %q, %v", got, err)
	}
	if got, err := (SASL{}).PasswordValue(); err != nil || got != "" {
		t.Fatalf("no password: %q, %v", got, err)
	}
	if _, err := (SASL{PasswordFile: writeFile(t, "pw", "")}).PasswordValue(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty file: %v", err)
	}
}

func TestTLSClientConfig(t *testing.T) {
	pki := newTestPKI(t)

	c, err := TLS{}.ClientConfig()
	if c != nil || err != nil {
		t.Fatalf("TLS off: %v, %v; want nil, nil", c, err)
	}

	c, err = TLS{Enabled: true}.ClientConfig()
	if err != nil || c == nil {
		t.Fatal(err)
	}
	// System roots, verification on, no client certificate.
	if c.RootCAs != nil || c.InsecureSkipVerify || len(c.Certificates) != 0 || c.MinVersion != tls.VersionTLS12 {
		t.Fatalf("defaults: %+v", c)
	}

	c, err = TLS{Enabled: true, CAFile: pki.ca, CertFile: pki.cert, KeyFile: pki.key, ServerName: "kafka.example"}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.ServerName != "kafka.example" || c.RootCAs == nil || len(c.Certificates) != 1 || c.InsecureSkipVerify {
		t.Fatalf("full: %+v", c)
	}
	// The client certificate chains to the CA that was loaded.
	leaf, err := x509.ParseCertificate(c.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate does not verify against ca_file: %v", err)
	}

	c, err = TLS{Enabled: true, InsecureSkipVerify: true}.ClientConfig()
	if err != nil || !c.InsecureSkipVerify {
		t.Fatalf("skip verify: %+v, %v", c, err)
	}

	// Several problems at once, one per line, relative keys.
	_, err = TLS{Enabled: true, CAFile: pki.junk, CertFile: pki.cert}.ClientConfig()
	if err == nil || err.Error() != "ca_file: "+pki.junk+" holds no PEM certificate\nkey_file: required with cert_file" {
		t.Fatalf("got %v", err)
	}
}

// TestSecretNeverPrints: whatever prints a Config (or a part of it) shows
// the mask, never the password.
func TestSecretNeverPrints(t *testing.T) {
	const pw = "hunter2-very-secret"
	c, err := Parse([]byte(base), []string{
		"SINK_CLICKHOUSE__PASSWORD=" + pw,
		"SINK_KAFKA__SASL__MECHANISM=SCRAM-SHA-256", "SINK_KAFKA__SASL__USERNAME=sink", "SINK_KAFKA__SASL__PASSWORD=" + pw,
	})
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	ys, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"String":  c.String(),
		"%v":      fmt.Sprintf("%v", c),
		"%+v":     fmt.Sprintf("%+v", *c),
		"%#v":     fmt.Sprintf("%#v", *c),
		"%s":      fmt.Sprintf("%s", c.ClickHouse.Password),
		"%q":      fmt.Sprintf("%q", c.Kafka.SASL.Password),
		"%x":      fmt.Sprintf("%x", c.Kafka.SASL.Password),
		"%d":      fmt.Sprintf("%d", c.Kafka.SASL.Password),
		"json":    string(js),
		"yaml":    string(ys),
		"Println": fmt.Sprintln(c.ClickHouse, c.Kafka),
	}
	for name, out := range outputs {
		if strings.Contains(out, pw) || strings.Contains(out, fmt.Sprintf("%x", pw)) {
			t.Errorf("%s shows the password:\n%s", name, out)
		}
		if !strings.Contains(out, "******") && name != "%x" {
			t.Errorf("%s shows no mask:\n%s", name, out)
		}
	}
	if c.ClickHouse.Password.Reveal() != pw || c.Kafka.SASL.Password.Reveal() != pw {
		t.Fatal("Reveal must return the password")
	}
	if Secret("").String() != "" {
		t.Fatal("an empty password must print empty, so that 'no password' is visible")
	}
}

// TestPlaintextWarnings: credentials that would cross a network without
// TLS are a warning (sink check prints it, sink run logs it); over TLS, or
// to loopback hosts only, they are not.
func TestPlaintextWarnings(t *testing.T) {
	kafkaPW := "SINK_KAFKA__SASL__PASSWORD=kafka-secret"
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       []string // a part of each warning, in order
	}{
		{"none", "kafka: {brokers: [\"k1:9092\"], topics: [a]}", nil, nil},
		{"SASL PLAIN without TLS", "kafka: {brokers: [\"k1:9092\", \"k2:9092\"], topics: [a], sasl: {mechanism: PLAIN, username: u}}", []string{kafkaPW},
			[]string{`kafka.sasl (PLAIN as "u") sends its password in the clear: kafka.tls is off and brokers k1:9092, k2:9092 are not loopback`}},
		{"SCRAM without TLS", "kafka: {brokers: [\"k1:9092\"], topics: [a], sasl: {mechanism: SCRAM-SHA-512, username: u}}", []string{kafkaPW},
			[]string{`kafka.sasl (SCRAM-SHA-512 as "u") runs in the clear (SCRAM does not send the password`}},
		{"OAUTHBEARER without TLS", "kafka: {brokers: [\"k1:9092\"], topics: [a], sasl: {mechanism: OAUTHBEARER, oauth: {token_endpoint: \"https://idp/token\", client_id: c}}}",
			[]string{"SINK_KAFKA__SASL__OAUTH__CLIENT_SECRET=kafka-secret"},
			[]string{`kafka.sasl (OAUTHBEARER as "c") sends its bearer token in the clear (whoever sees it can use it until it expires`}},
		{"SASL over TLS", "kafka: {brokers: [\"k1:9094\"], topics: [a], tls: {enabled: true}, sasl: {mechanism: PLAIN, username: u}}", []string{kafkaPW}, nil},
		{"SASL to loopback", "kafka: {brokers: [\"127.0.0.1:9092\", \"localhost:9093\"], topics: [a], sasl: {mechanism: PLAIN, username: u}}", []string{kafkaPW}, nil},
		{"registry basic auth over http", "kafka: {brokers: [\"k1:9092\"], topics: [a]}\nschema_registry: {urls: [\"http://reg:8081\", \"https://reg2\", \"http://127.0.0.1:8081\"], username: u}",
			[]string{"SINK_SCHEMA_REGISTRY__PASSWORD=p"}, []string{`schema_registry.username "u" sends its password in the clear (HTTP basic auth) to http://reg:8081; use https:// URLs`}},
		{"registry over https", "kafka: {brokers: [\"k1:9092\"], topics: [a]}\nschema_registry: {urls: [\"https://reg:8081\"], username: u}", []string{"SINK_SCHEMA_REGISTRY__PASSWORD=p"}, nil},
		{"registry without auth", "kafka: {brokers: [\"k1:9092\"], topics: [a]}\nschema_registry: {urls: [\"http://reg:8081\"]}", nil, nil},
		{"ClickHouse password without TLS", "kafka: {brokers: [\"k1:9092\"], topics: [a]}\nclickhouse: {addrs: [\"ch:9000\"]}", []string{"SINK_CLICKHOUSE__PASSWORD=p"},
			[]string{"clickhouse.password is sent in the clear to ch:9000: clickhouse.tls is off"}},
		{"ClickHouse password over TLS", "kafka: {brokers: [\"k1:9092\"], topics: [a]}\nclickhouse: {addrs: [\"ch:9440\"], tls: {enabled: true}}", []string{"SINK_CLICKHOUSE__PASSWORD=p"}, nil},
		{"ClickHouse password to loopback", "kafka: {brokers: [\"k1:9092\"], topics: [a]}\nclickhouse: {addrs: [\"127.0.0.1:9000\"]}", []string{"SINK_CLICKHOUSE__PASSWORD=p"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte("name: x\n"+tc.yaml+"\nroutes: [{topic: a, table: t}]\n"), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Warnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q, want it to contain %q", got[i], w)
				}
				for _, secret := range []string{"kafka-secret", "=p"} {
					if strings.Contains(got[i], secret) {
						t.Errorf("warning %q shows a password", got[i])
					}
				}
			}
		})
	}
}

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// TestJavaStores: trust and key stores made by keytool, JKS and PKCS12,
// load into the TLS client configuration as the PEM files they hold do;
// the password comes from the environment or a file and a wrong one, a
// wrong type and a store beside its PEM counterpart are refused with the
// key named.
func TestJavaStores(t *testing.T) {
	pki := testenv.NewPKI(t)
	for _, tc := range []struct{ typ, keyPassword string }{{"JKS", ""}, {"JKS", "key-secret"}, {"PKCS12", ""}} {
		t.Run(tc.typ+"/"+tc.keyPassword, func(t *testing.T) {
			s := testenv.MakeJavaStores(t, tc.typ, pki.CAFile, pki.CertFile, pki.KeyFile, "store-secret", tc.keyPassword)
			pwFile := filepath.Join(t.TempDir(), "pw")
			if err := os.WriteFile(pwFile, []byte("store-secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			doc := "name: t\nkafka: {topics: [a], tls: {enabled: true, truststore_file: " + s.Truststore +
				", keystore_file: " + s.Keystore + ", keystore_password_file: " + pwFile + "}}\n"
			env := []string{"SINK_KAFKA__TLS__TRUSTSTORE_PASSWORD=store-secret"}
			if tc.keyPassword != "" {
				env = append(env, "SINK_KAFKA__TLS__KEY_PASSWORD="+tc.keyPassword)
			}
			c, err := Parse([]byte(doc), env)
			if err != nil {
				t.Fatal(err)
			}
			tc2, err := c.Kafka.TLS.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			want, _ := Parse([]byte("name: t\nkafka: {topics: [a], tls: {enabled: true, ca_file: "+pki.CAFile+", cert_file: "+pki.CertFile+", key_file: "+pki.KeyFile+"}}\n"), nil)
			pem, err := want.Kafka.TLS.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if !tc2.RootCAs.Equal(pem.RootCAs) {
				t.Error("the trust store's CAs are not the PEM CA file's")
			}
			if len(tc2.Certificates) != 1 || len(tc2.Certificates[0].Certificate) < 1 ||
				string(tc2.Certificates[0].Certificate[0]) != string(pem.Certificates[0].Certificate[0]) || tc2.Certificates[0].Leaf == nil {
				t.Error("the key store's certificate is not the PEM certificate")
			}
			if strings.Contains(c.String(), "store-secret") {
				t.Error("the printed config holds a store password")
			}

			bad := func(doc string, env []string, want string) {
				t.Helper()
				_, err := Parse([]byte(doc), env)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v; want %q", err, want)
				}
			}
			bad(doc, []string{"SINK_KAFKA__TLS__TRUSTSTORE_PASSWORD=wrong"}, "config: kafka.tls.truststore_file: "+s.Truststore+" ("+tc.typ+"): ")
			other := map[string]string{"JKS": "PKCS12", "PKCS12": "JKS"}[tc.typ]
			bad(strings.Replace(doc, "truststore_file:", "truststore_type: "+other+", truststore_file:", 1), env, "config: kafka.tls.truststore_file: "+s.Truststore+" ("+other+")")
			bad(strings.Replace(doc, "truststore_file:", "ca_file: "+pki.CAFile+", truststore_file:", 1), env, "kafka.tls.truststore_file: set together with ca_file; set only one")
			bad(doc+"clickhouse: {tls: {keystore_password: x}}\n", env, "clickhouse.tls.keystore_password: a password may not be written in the config file; set SINK_CLICKHOUSE__TLS__KEYSTORE_PASSWORD or clickhouse.tls.keystore_password_file")
			bad(strings.Replace(doc, "truststore_file:", "truststore_type: PEM, truststore_file:", 1), env, `kafka.tls.truststore_type: `+s.Truststore+`: "PEM" is not JKS or PKCS12`)
		})
	}
	// A PEM file is neither.
	_, err := Parse([]byte("name: t\nkafka: {topics: [a], tls: {enabled: true, truststore_file: "+pki.CAFile+"}}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "kafka.tls.truststore_type: "+pki.CAFile+": neither JKS nor PKCS12 (a PEM file goes in ca_file") {
		t.Errorf("a PEM trust store: %v", err)
	}
}

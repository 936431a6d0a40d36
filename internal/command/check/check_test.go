package check

import (
	"testing"

	"sink/config"
)

// The security lines say where a password comes from and how TLS is set
// up, never the password itself.
func TestSecuritySummaries(t *testing.T) {
	f := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	f(password("", ""), "no password")
	f(password("hunter2", ""), "password ******")
	f(password("", "/run/secrets/pw"), "password from /run/secrets/pw")
	f(tlsSummary(config.TLS{}), "TLS off")
	f(tlsSummary(config.TLS{Enabled: true}), "TLS (system CAs)")
	f(tlsSummary(config.TLS{Enabled: true, CAFile: "ca.pem", CertFile: "c.pem", ServerName: "kafka.example"}),
		"TLS (CA ca.pem, client certificate c.pem, server name kafka.example)")
	f(tlsSummary(config.TLS{Enabled: true, Stores: config.Stores{TruststoreFile: "t.jks", KeystoreFile: "k.p12"}}),
		"TLS (trust store t.jks, key store k.p12)")
	f(tlsSummary(config.TLS{Enabled: true, InsecureSkipVerify: true}),
		"TLS (system CAs, CERTIFICATES NOT VERIFIED (insecure_skip_verify))")
}

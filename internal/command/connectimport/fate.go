package connectimport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Kind is what became of one input key.
type Kind string

// The fates of a key.
const (
	// Carried: the key's meaning is in the output, at Fate.To.
	Carried Kind = "carried"
	// NotNeeded: the sink does the same without being told, or the key
	// belongs to Kafka Connect or to the official sink's machinery.
	NotNeeded Kind = "not needed"
	// Unsupported: the sink cannot do what the key asks; Fate.Why says
	// what to do instead. The output is written, but it does not do
	// everything the connector did.
	Unsupported Kind = "NOT SUPPORTED"
)

// Fate is what became of one input key.
type Fate struct {
	Key   string
	Value string // as given, except secrets (shown as "***")
	Kind  Kind
	To    string // the output key(s), for Carried
	Why   string
}

// secretKey reports whether a key holds a secret, whose value is neither
// printed nor written, not one character of it (the fate table shows
// "***"). Each key Kafka's clients define as type PASSWORD (ssl.key.password,
// ssl.keystore.password and .key, ssl.keystore.certificate.chain,
// ssl.truststore.password and .certificates, sasl.jaas.config,
// sasl.oauthbearer.client.credentials.client.secret,
// sasl.oauthbearer.assertion.private.key.passphrase), each Confluent's
// serializers do (basic.auth.user.info, schema.registry.basic.auth.user.info,
// bearer.auth.token, bearer.auth.client.secret, schema.registry.ssl.*),
// the ClickHouse sink's password, under any prefix a connector config puts
// before them (consumer.override., value.converter., ...), holds one of
// secretParts; so do the schema registry client's request.header.* (an
// Authorization header), the JDBC properties (a password may be one of
// them) and any key whose name says it holds a secret or a credential, or
// ends in token.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	for _, part := range secretParts {
		if strings.Contains(k, part) {
			return true
		}
	}
	// A token is the key's last word (bearer.auth.token), not a word on
	// the way (sasl.oauthbearer.token.endpoint.url is a URL).
	return strings.HasSuffix(k, "token")
}

// secretParts are the parts of a key's name that make it a secret
// (secretKey).
var secretParts = []string{
	"password", "passphrase", "secret", "credential",
	"jaas.config", "user.info", "keystore.key", "private.key",
	"certificate.chain", "truststore.certificates",
	"request.header.", "jdbcconnectionproperties",
}

// PrintFates writes the fate table, one key per line, in input key order.
func PrintFates(w io.Writer, fates []Fate) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tFATE\tTO / WHY")
	for _, f := range fates {
		detail := f.Why
		if f.Kind == Carried {
			detail = f.To
			if f.Why != "" {
				detail += " (" + f.Why + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Key, short(f.Value, 40), f.Kind, detail)
	}
	_ = tw.Flush()
}

// short cuts s to n runes with an ellipsis, and keeps it on one line.
func short(s string, n int) string {
	s = strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Unsupported returns the keys that are not supported.
func (r *Result) Unsupported() []Fate {
	var out []Fate
	for _, f := range r.Fates {
		if f.Kind == Unsupported {
			out = append(out, f)
		}
	}
	return out
}

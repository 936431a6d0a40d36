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

// secretKey reports whether a key holds a secret whose value is never
// printed.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	return strings.Contains(k, "password") || strings.Contains(k, "secret") ||
		strings.HasSuffix(k, "sasl.jaas.config") || strings.Contains(k, "basic.auth.user.info") ||
		strings.Contains(k, "credentials")
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

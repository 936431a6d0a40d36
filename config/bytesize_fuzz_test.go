package config

import (
	"strings"
	"testing"
)

// No byte size makes ParseByteSize panic; an error is one line; a size it
// accepts is not negative and prints (String) as text that parses back to
// the same size.
func FuzzParseByteSize(f *testing.F) {
	for _, c := range byteSizeCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseByteSize(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseByteSize(%q): error of several lines: %q", s, err)
			}
			return
		}
		if b < 0 {
			t.Fatalf("ParseByteSize(%q) = %d: negative", s, int64(b))
		}
		back, err := ParseByteSize(b.String())
		if err != nil || back != b {
			t.Fatalf("ParseByteSize(%q) = %d prints as %q, which parses as %d, %v", s, int64(b), b.String(), int64(back), err)
		}
	})
}

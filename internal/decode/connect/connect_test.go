package connect

import (
	"fmt"
	"strings"
	"testing"
)

// TestSchemaCacheBounded: the cache of compiled schemas stays within its
// bounds however many distinct schemas the records carry (the schemas of
// decode's TestConnectHostileSchemas, whose records a json plan appends).
func TestSchemaCacheBounded(t *testing.T) {
	var c connectSchemas
	doc := strings.Repeat("x", 64<<10) // 64 KiB of doc per schema: 4 MiB holds 63 of them
	for i := range 300 {
		field := fmt.Sprintf(`{"type":"string","optional":true,"doc":"%d%s","field":"v"}`, i, doc)
		schema := `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},` + field + `],"optional":false,"name":"t.Value"}`
		if s := c.get([]byte(schema), func(*connNode) []*connNode { return nil }); s.err != nil {
			t.Fatal(s.err)
		}
		if n, b := len(c.byText), c.bytes; n > maxConnSchemas || b > maxConnSchemaBytes {
			t.Fatalf("after %d schemas the cache holds %d schemas, %d bytes", i+1, n, b)
		}
	}
}

// TestAppendTimeOfDay: the text of a time of day, with the fraction's
// trailing zeros cut.
func TestAppendTimeOfDay(t *testing.T) {
	for ns, want := range map[int64]string{
		0:                "00:00:00",
		1:                "00:00:00.000000001",
		45296789000000:   "12:34:56.789",
		45296000000000:   "12:34:56",
		86399999999999:   "23:59:59.999999999",
		86400000000000:   "24:00:00",
		3600_100_000_000: "01:00:00.1",
	} {
		if got := string(appendTimeOfDay(nil, ns)); got != want {
			t.Errorf("appendTimeOfDay(%d) = %q, want %q", ns, got, want)
		}
	}
}

// FuzzZonedTimeOfDay: no text panics the ZonedTime reader, and what it
// accepts is a time of day, 0 to 24:00:00.
func FuzzZonedTimeOfDay(f *testing.F) {
	for _, s := range []string{"03:00:00Z", "07:44:15.5Z", "24:00:00Z", "01:30:00+02:00", "23:59:59.999999999-11", "12:00:00.Z", "1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if ns, ok := zonedTimeOfDay(b); ok && (ns < 0 || ns > 86400e9) {
			t.Fatalf("zonedTimeOfDay(%q) = %d, outside the day", b, ns)
		}
	})
}

package testenv

import (
	"os"
	"strings"
	"testing"
)

// DocSection returns the section of the Markdown file at path (relative to
// the test's package directory) that starts at the "## " heading, up to the
// next "## " heading: what a test reads a documented list or snippet from.
func DocSection(t testing.TB, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "## "+heading)
	if start < 0 {
		t.Fatalf("testenv: %s has no section %q", path, heading)
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	return section
}

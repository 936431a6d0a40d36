package testenv_test

import (
	"fmt"
	"strings"
	"testing"

	"sink/internal/testenv"
)

func TestUniqueName(t *testing.T) {
	a, b := testenv.UniqueName(t, "test"), testenv.UniqueName(t, "test")
	if a == b {
		t.Fatalf("two names are equal: %s", a)
	}
	if !strings.HasPrefix(a, "test_testuniquename_") {
		t.Fatalf("name %s does not start with the prefix and test name", a)
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			t.Fatalf("name %s has %q, not valid in a ClickHouse identifier", a, r)
		}
	}
}

// recorder stands in for a testing.TB to observe whether the accessors skip or
// fail. Its Fatal returns, so the accessor goes on; failed keeps the first
// failure, the one that would have ended the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Skip(args ...any) { r.skipped = fmt.Sprint(args...) }

func (r *recorder) Fatal(args ...any) {
	if r.failed == "" {
		r.failed = fmt.Sprint(args...)
	}
}

package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Tool returns the path of a command-line tool a test runs (promtool,
// helm): from PATH, or from the repository's .cache/tools/bin where
// scripts/stack.sh installs the ones Debian does not package. Without it
// the test is skipped, or fails under SINK_REQUIRE_STACK=1, saying how to
// install it.
func Tool(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	_, file, _, _ := runtime.Caller(0) // internal/testenv/tools.go
	local := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "tools", "bin", name)
	if fi, err := os.Stat(local); err == nil && !fi.IsDir() {
		return local
	}
	msg := name + " not found in PATH or .cache/tools/bin; `make stack-up` (scripts/stack.sh) installs it"
	if os.Getenv(EnvRequireStack) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

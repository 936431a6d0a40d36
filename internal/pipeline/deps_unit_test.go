package pipeline

import (
	"os/exec"
	"strings"
	"testing"
)

// adapters are the packages that implement the ports or build their
// inputs: the pipeline reaches them only through ports.go, so it never
// imports them, directly or not (main wires them in).
var adapters = []string{"sink/internal/writer", "sink/internal/consumer", "sink/internal/command/"}

// TestUnitImportsNoAdapter: go list -deps of the pipeline names no
// adapter package.
func TestUnitImportsNoAdapter(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "sink/internal/pipeline").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "sink/internal/pipeline" {
		t.Fatalf("go list -deps sink/internal/pipeline did not end with the package itself: %q", deps)
	}
	for _, d := range deps {
		for _, a := range adapters {
			if d == a || strings.HasSuffix(a, "/") && strings.HasPrefix(d, a) {
				t.Errorf("the pipeline depends on %s; it reaches adapters only through ports.go", d)
			}
		}
	}
}

package connectimport

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden converts realistic connector configs and compares the YAML
// (with its fate table) to testdata/*.golden.yaml.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	props, _ := filepath.Glob("testdata/*.properties")
	inputs = append(inputs, props...)
	if len(inputs) < 3 {
		t.Fatalf("want at least 3 inputs in testdata, found %d", len(inputs))
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(filepath.Base(in), data)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Convert(c, Options{Brokers: []string{"kafka-1:9092", "kafka-2:9092"}})
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(in, filepath.Ext(in)) + ".golden.yaml"
			if *update {
				if err := os.WriteFile(golden, r.YAML, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/command/connectimport -run Golden -update)", err)
			}
			if string(want) != string(r.YAML) {
				t.Errorf("%s differs from the output:\n%s", golden, r.YAML)
			}
		})
	}
}

package config

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"
)

// TestEveryKeyFromEnvironment: every key example.yaml sets (every key
// there is, but for the route options it leaves commented out, which go
// with its routes) can be set from the environment instead: the file's
// values given only as SINK_* variables make the same Config.
func TestEveryKeyFromEnvironment(t *testing.T) {
	b, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Parser().Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if sub, ok := v.(map[string]any); ok {
				// An empty mapping has nothing to set; its entries are
				// set one by one (SINK_CLICKHOUSE__SETTINGS__NAME=…).
				walk(key+".", sub)
				continue
			}
			env = append(env, EnvPrefix+strings.ToUpper(strings.ReplaceAll(key, ".", "__"))+"="+envValue(t, key, v))
		}
	}
	walk("", doc)
	fromFile, err := Load("example.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	fromEnv, err := Parse(nil, env)
	if err != nil {
		t.Fatalf("the example's keys from the environment: %v\n%s", err, strings.Join(env, "\n"))
	}
	if !reflect.DeepEqual(noCache(fromEnv), noCache(fromFile)) {
		t.Fatalf("from the environment:\n%s\nfrom the file:\n%s", fromEnv, fromFile)
	}
	if len(env) < 80 {
		t.Fatalf("only %d keys set; the walk missed most of example.yaml", len(env))
	}
}

// envValue is v as an environment variable gives it: lists of strings
// comma-separated, routes and shards as JSON, the rest as text.
func envValue(t *testing.T, key string, v any) string {
	t.Helper()
	if structuredKeys[key] {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, e := range list {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

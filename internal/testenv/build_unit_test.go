//go:build !integration

package testenv_test

import (
	"strings"
	"testing"

	"sink/internal/testenv"
)

// In a build without the integration tag every accessor that reaches for
// the stack fails the test, whatever SINK_REQUIRE_STACK says, with a message
// that says where such a test belongs; the closed ports make sure nothing
// is reached either way.
func TestStackAccessorsFailWithoutTheIntegrationTag(t *testing.T) {
	const closed = "127.0.0.1:1"
	t.Setenv(testenv.EnvKafka, closed)
	t.Setenv(testenv.EnvClickHouse, closed)
	t.Setenv(testenv.EnvClickHouse26, closed)
	t.Setenv(testenv.EnvRegistry, "http://"+closed)
	t.Setenv(testenv.EnvClusterSeed, closed)
	t.Setenv(testenv.EnvPostgres, closed)
	t.Setenv(testenv.EnvConnect, "http://"+closed)
	for _, require := range []string{"", "1"} {
		t.Setenv(testenv.EnvRequireStack, require)
		for name, call := range map[string]func(testing.TB){
			"Kafka":     func(tb testing.TB) { testenv.Kafka(tb) },
			"Server18":  func(tb testing.TB) { testenv.Server18(tb) },
			"Server26":  func(tb testing.TB) { testenv.Server26(tb) },
			"Servers":   func(tb testing.TB) { testenv.Servers(tb) },
			"Registry":  func(tb testing.TB) { testenv.Registry(tb) },
			"KafkaSASL": func(tb testing.TB) { testenv.KafkaSASL(tb) },
			"Postgres":  func(tb testing.TB) { testenv.Postgres(tb) },
			"Debezium":  func(tb testing.TB) { testenv.Debezium(tb, nil, testenv.DebeziumConfig{}) },
		} {
			r := &recorder{TB: t}
			call(r)
			if !strings.Contains(r.failed, "built without -tags integration") || !strings.Contains(r.failed, "_integration_test.go") {
				t.Errorf("%s with %s=%q in a unit build: failed %q; want the missing-tag message", name, testenv.EnvRequireStack, require, r.failed)
			}
		}
	}
}

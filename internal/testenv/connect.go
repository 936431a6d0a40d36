package testenv

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// FileSinkClass is Kafka Connect's own file sink connector (connect-file),
// the smallest real sink connector: `make cdc-up` puts it on the stack
// worker's plugin path (scripts/connect/file/pom.xml). Tests that compare
// the sink's REST API with a Connect worker's run it there.
const FileSinkClass = "org.apache.kafka.connect.file.FileStreamSinkConnector"

// ConnectFileSink returns the REST URL of the stack's Kafka Connect worker
// (SINK_TEST_CONNECT, else DefaultConnect) once it lists FileSinkClass. It
// skips the test (fails it under SINK_REQUIRE_STACK=1) when the worker
// does not answer or was started without the plugin, saying how to get it.
func ConnectFileSink(t testing.TB) string {
	t.Helper()
	requireIntegrationBuild(t)
	base := strings.TrimSuffix(envOr(EnvConnect, DefaultConnect), "/")
	err := probe("connect-file "+base, func() error {
		var plugins []struct {
			Class string `json:"class"`
		}
		if err := connectCall(base, http.MethodGet, "/connector-plugins", nil, &plugins); err != nil {
			return err
		}
		for _, p := range plugins {
			if p.Class == FileSinkClass {
				return nil
			}
		}
		return fmt.Errorf("the worker lists no %s plugin: it was started before the stack loaded connect-file; run `scripts/stack.sh cdc down` and `cdc up`", FileSinkClass)
	})
	if err != nil {
		unavailableMsg(t, fmt.Sprintf("integration: Kafka Connect with its file sink not available at %s; run `make cdc-up` (%v)", base, err))
	}
	return base
}

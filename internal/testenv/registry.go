package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// The local stack's schema registry (scripts/stack.sh): the base URL of its
// Confluent-compatible API, and the variable that overrides it.
const (
	DefaultRegistry = "http://127.0.0.1:8081/apis/ccompat/v7"
	EnvRegistry     = "SINK_TEST_REGISTRY"
)

// Registry returns the schema registry's base URL after checking that it
// answers GET /config, skipping the test otherwise (failing it under
// SINK_REQUIRE_STACK=1).
func Registry(t testing.TB) string {
	t.Helper()
	requireIntegrationBuild(t)
	url := DefaultRegistry
	if v := strings.TrimSpace(os.Getenv(EnvRegistry)); v != "" {
		url = strings.TrimSuffix(v, "/")
	}
	if err := probe("registry "+url, func() error { return probeRegistry(url) }); err != nil {
		unavailable(t, "schema registry", url, err)
	}
	return url
}

func probeRegistry(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/config", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/config: HTTP %d: %s", url, resp.StatusCode, body)
	}
	return nil
}

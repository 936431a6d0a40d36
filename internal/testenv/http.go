package testenv

import (
	"io"
	"net/http"
	"testing"
)

// HTTP sends a request without a body to url and returns the status and
// the body; any transport or read error fails the test.
func HTTP(t testing.TB, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

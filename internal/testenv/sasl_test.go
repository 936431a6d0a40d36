package testenv_test

import (
	"os"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// The constants here and the broker template must agree: PLAIN's users are
// listed in server.properties, and the listener is where KafkaSASL looks.
func TestSASLMatchesServerProperties(t *testing.T) {
	data, err := os.ReadFile("../../testdata/kafka/server.properties")
	if err != nil {
		t.Fatal(err)
	}
	props := string(data)
	for _, want := range []string{
		"SASL_SSL://" + testenv.DefaultKafkaSASL,
		`user_` + testenv.SASLUser + `="` + testenv.SASLPassword + `"`,
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_ssl.ssl.client.auth=required",
	} {
		if !strings.Contains(props, want) {
			t.Errorf("testdata/kafka/server.properties lacks %q", want)
		}
	}
}

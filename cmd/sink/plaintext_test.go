package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPlaintextCredentialsWarned: SASL PLAIN to brokers without TLS is a
// warning line of sink check, before it reaches any server, and a warning
// in sink run's log at start; neither shows the password.
func TestPlaintextCredentialsWarned(t *testing.T) {
	const secret = "kafka-secret-value"
	t.Setenv("SINK_KAFKA__SASL__PASSWORD", secret)
	path := writeConfig(t, "name: w\nkafka: {brokers: [\"kafka.invalid:9092\"], topics: [a], sasl: {mechanism: PLAIN, username: u}}\n"+
		"clickhouse: {addrs: [\"127.0.0.1:1\"], dial_timeout: 1s}\nroutes: [{topic: a, table: t}]\nhttp: {listen: \"\"}\n")
	const want = `kafka.sasl (PLAIN as "u") sends its password in the clear: kafka.tls is off and brokers kafka.invalid:9092 are not loopback`
	code, out, errOut := sinkCmd(t, "check", "--config", path)
	if code != 1 || !strings.Contains(out, "config: warning: "+want) || strings.Contains(out+errOut, secret) {
		t.Fatalf("check: exit %d, stdout %q", code, out)
	}
	code, _, errOut = sinkCmd(t, "run", "--config", path)
	n := 0
	for _, line := range strings.Split(errOut, "\n") {
		var l struct{ Level, Message string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "warn" && strings.HasPrefix(l.Message, want) {
			n++
		}
	}
	if code != 1 || n != 1 || strings.Contains(errOut, secret) {
		t.Fatalf("run: exit %d, %d warnings in %q", code, n, errOut)
	}
}

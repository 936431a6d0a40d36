package consumer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/kafkaauth"
)

// TestAuthFailureLoggedOncePerCause: franz-go logs a failed SASL
// authentication on every connection attempt of every broker; the sink's
// log gets one line per cause (with its class), a new line when the cause
// changes, and lines of other errors as they come.
func TestAuthFailureLoggedOncePerCause(t *testing.T) {
	var buf bytes.Buffer
	k := newKzerolog(zerolog.New(&buf).Level(zerolog.InfoLevel))
	refused := fmt.Errorf("unable to initialize sasl: %w", &kafkaauth.Error{Class: kafkaauth.EndpointRefused, Section: "kafka.sasl.oauth", Detail: "HTTP 401"})
	rejected := fmt.Errorf("%w: invalid_token", kerr.SaslAuthenticationFailed)
	for broker := range 30 {
		k.Log(kgo.LogLevelError, "unable to initialize sasl", "broker", broker%3, "err", refused)
	}
	for range 30 {
		k.Log(kgo.LogLevelError, "unable to initialize sasl", "broker", 1, "err", rejected)
	}
	for range 3 {
		k.Log(kgo.LogLevelWarn, "unable to open connection to broker", "addr", "b:9092", "err", errors.New("dial tcp: connection refused"))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5 (one per auth cause, three others):\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], `"auth_error":"token endpoint refused"`) || !strings.Contains(lines[1], `"auth_error":"broker rejected the token"`) ||
		!strings.Contains(lines[1], `"repeats_of_previous_cause":29`) || strings.Contains(lines[2], "auth_error") {
		t.Fatalf("lines:\n%s", buf.String())
	}

	// The same cause is logged again after authRepeat.
	a := &authLog{}
	now := time.Now()
	if rep, _ := a.repeat(kafkaauth.Rejected, rejected, now); rep {
		t.Fatal("first failure counted as a repeat")
	}
	if rep, _ := a.repeat(kafkaauth.Rejected, rejected, now.Add(authRepeat-time.Second)); !rep {
		t.Fatal("failure within authRepeat not counted as a repeat")
	}
	if rep, before := a.repeat(kafkaauth.Rejected, rejected, now.Add(authRepeat+time.Second)); rep || before != 1 {
		t.Fatalf("after authRepeat: repeat %v, %d before; want a new line after 1 repeat", rep, before)
	}
}

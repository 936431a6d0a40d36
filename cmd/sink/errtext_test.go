package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"sink/config"
)

// The daemon's logger cuts every error it logs (errtext): a 14 KB error
// makes a log line of about 1 KB, its start and end kept.
func TestLoggerCapsErrors(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		var out bytes.Buffer
		log := newLogger(config.Log{Level: "info", Format: format}, &out)
		cause := `decode topic "t" partition 0 offset 5: invalid JSON: ` + strings.Repeat("cannot parse array value: ", 540) + "the end"
		log.Warn().Err(errors.New(cause)).Msg("bad record sent to the dead-letter topic")
		line := out.String()
		if len(line) > 1400 || !strings.Contains(line, "offset 5: invalid JSON") || !strings.Contains(line, "the end") {
			t.Fatalf("%s: a %d-byte error made a %d-byte log line: %.300s", format, len(cause), len(line), line)
		}
	}
}

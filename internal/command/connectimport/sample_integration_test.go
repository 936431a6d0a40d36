//go:build integration

package connectimport

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sink/config"
	"sink/internal/testenv"
)

// TestImportChecksTheWorkersConverter: against the stack's Kafka, a
// connector without value.converter is checked with consumer.Sampler
// (KafkaRecords): a topic of Connect envelopes gives format connect-json,
// a topic of plain JSON json, and the note says what was read.
func TestImportChecksTheWorkersConverter(t *testing.T) {
	brokers := testenv.Kafka(t)
	envelopes, plain := testenv.NewTopic(t, 2), testenv.NewTopic(t, 1)
	testenv.Produce(t, envelopes, envelopeValue, envelopeValue, envelopeValue)
	testenv.Produce(t, plain, plainValue, plainValue)
	in, out := t.TempDir(), t.TempDir()
	for name, topic := range map[string]string{"wrapped": envelopes, "bare": plain} {
		body := `{"name":"` + name + `","config":{"connector.class":"` + SinkClass + `","topics":"` + topic + `","hostname":"ch","port":"8123"}}`
		if err := os.WriteFile(filepath.Join(in, name+".json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	im := Import{Options: Options{Brokers: brokers}, OutDir: out, Records: KafkaRecords, SampleSize: 20}
	if code := im.Run([]string{in}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	t.Logf("sink import:\n%s", stdout.String())
	for name, want := range map[string]string{"wrapped": "connect-json", "bare": "json"} {
		cfg, err := config.Load(filepath.Join(out, name+".yaml"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(cfg.Routes[0].Format); got != want {
			t.Errorf("%s: format %s, want %s", name, got, want)
		}
	}
	for _, want := range []string{
		"checked: of 3 records sampled from " + envelopes + ", all 3 are such envelopes, so routes[].format: connect-json",
		"checked: of 2 records sampled from " + plain + ", all 2 are plain JSON objects",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("no %q in the output", want)
		}
	}
}

package connectimport

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
)

const (
	envelopeValue = `{"schema":{"type":"struct","fields":[{"type":"int32","field":"id"}]},"payload":{"id":1}}`
	plainValue    = `{"id":1}`
)

func values(vs ...string) []*kgo.Record {
	out := make([]*kgo.Record, len(vs))
	for i, v := range vs {
		out[i] = &kgo.Record{}
		if v != "<null>" {
			out[i].Value = []byte(v)
		}
	}
	return out
}

// TestClassify: what each record of a sample is.
func TestClassify(t *testing.T) {
	got := classify("t", values(envelopeValue, `{"schema":null,"payload":{"id":1}}`, plainValue, `{"schema":{"type":"struct"},"payload":{},"x":1}`,
		`[1]`, `not json`, "\x00\x00\x00\x00\x01avro", "<null>"))
	want := Sample{Topic: "t", Envelopes: 2, Plain: 2, Other: 3, Tombstones: 1}
	if got != want {
		t.Errorf("classify = %+v, want %+v", got, want)
	}
}

// TestDefaultConverterChecked: a connector without value.converter gets
// the format its topics' sample shows, and a note saying what was found.
func TestDefaultConverterChecked(t *testing.T) {
	noConverter := base("value.converter", "<unset>", "value.converter.schemas.enable", "<unset>", "topics", "orders,refunds")
	for _, tc := range []struct {
		name    string
		samples []Sample
		format  string
		note    string
	}{
		{"not read", nil, "json", "not checked against the topics: the topics were not read (--sample 0)"},
		{"envelopes", []Sample{{Topic: "orders", Envelopes: 3}, {Topic: "refunds", Envelopes: 2, Tombstones: 1}}, "connect-json",
			"checked: of 5 records sampled from orders, refunds, all 5 are such envelopes, so routes[].format: connect-json"},
		{"plain", []Sample{{Topic: "orders", Plain: 4}, {Topic: "refunds"}}, "json",
			"checked: of 4 records sampled from orders, refunds, all 4 are plain JSON objects (the worker's converter has schemas.enable=false), so routes[].format: json"},
		{"mixed", []Sample{{Topic: "orders", Plain: 1, Envelopes: 2}, {Topic: "refunds"}}, "json",
			"checked: of 3 records sampled from orders, refunds, 2 are envelopes and 1 plain JSON objects; format json reads each record as what it is"},
		{"not JSON", []Sample{{Topic: "orders", Envelopes: 1, Other: 2}, {Topic: "refunds"}}, "json",
			"but of 3 records sampled from orders, refunds, 2 are not JSON objects (the worker's converter writes something else, e.g. Avro or strings): set routes[].format"},
		{"empty", []Sample{{Topic: "orders"}, {Topic: "refunds", Tombstones: 2}}, "json", "the sample held no record to check it by"},
		{"unreadable", []Sample{{Topic: "orders", Envelopes: 1}, {Topic: "refunds", Err: errors.New("UNKNOWN_TOPIC_OR_PARTITION")}}, "connect-json",
			"could not read refunds (UNKNOWN_TOPIC_OR_PARTITION)"},
	} {
		r, cfg := convert(t, noConverter, Options{Brokers: []string{"k:9092"}, Samples: tc.samples})
		for _, rt := range cfg.Routes {
			if string(rt.Format) != tc.format {
				t.Errorf("%s: route %s format %s, want %s", tc.name, rt.Topic, rt.Format, tc.format)
			}
		}
		if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, tc.note) || !strings.Contains(notes, "Connect's default: JsonConverter with schemas.enable=true") {
			t.Errorf("%s: notes\n%s\nwant one with %q", tc.name, notes, tc.note)
		}
		if strings.Join(r.SampleTopics, ",") != "orders,refunds" {
			t.Errorf("%s: SampleTopics %v", tc.name, r.SampleTopics)
		}
	}
	// What is not read, and why.
	for _, tc := range []struct {
		name string
		c    Connector
		o    Options
		note string
	}{
		{"no brokers", noConverter, Options{}, "not checked against the topics: no --brokers"},
		{"topics.regex", base("value.converter", "<unset>", "value.converter.schemas.enable", "<unset>", "topics", "<unset>", "topics.regex", "o.*"),
			Options{Brokers: []string{"k:9092"}}, "not checked against the topics: topics.regex names no topic to read"},
		{"Debezium", base("value.converter", "<unset>", "value.converter.schemas.enable", "<unset>", "debeziumCDCEnabled", "true"),
			Options{Brokers: []string{"k:9092"}}, "format debezium-json reads Debezium's events with or without the schema"},
		{"a converter named", base(), Options{Brokers: []string{"k:9092"}}, ""},
	} {
		r, _ := convert(t, tc.c, tc.o)
		if len(r.SampleTopics) != 0 {
			t.Errorf("%s: SampleTopics %v, want none", tc.name, r.SampleTopics)
		}
		if notes := strings.Join(r.Notes, "\n"); tc.note != "" && !strings.Contains(notes, tc.note) {
			t.Errorf("%s: notes\n%s\nwant one with %q", tc.name, notes, tc.note)
		}
	}
}

// TestImportSamplesTheTopics: Run reads each topic of a connector without
// value.converter with the YAML it wrote, and writes the format the
// records show; a connector that names its converter is not read.
func TestImportSamplesTheTopics(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{
		"default.json": `{"name":"d","config":{"connector.class":"` + SinkClass + `","topics":"ta,tb","hostname":"ch","port":"8123"}}`,
		"named.json":   `{"name":"n","config":{"connector.class":"` + SinkClass + `","topics":"tc","hostname":"ch","port":"8123","value.converter":"` + stringConverter + `"}}`,
	} {
		if err := os.WriteFile(filepath.Join(in, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var read []string
	records := func(_ context.Context, yaml []byte, topic string, n int) ([]*kgo.Record, error) {
		cfg, err := config.Parse(yaml, nil)
		if err != nil || cfg.Kafka.Brokers[0] != "k1:9092" || n != 5 {
			t.Errorf("read %s with brokers %v, n %d: %v", topic, cfg.Kafka.Brokers, n, err)
		}
		read = append(read, topic)
		return values(envelopeValue, envelopeValue), nil
	}
	var stdout, stderr bytes.Buffer
	im := Import{Options: Options{Brokers: []string{"k1:9092"}}, OutDir: out, Records: records, SampleSize: 5}
	if code := im.Run([]string{in}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if strings.Join(read, ",") != "ta,tb" {
		t.Errorf("read %v, want ta, tb", read)
	}
	cfg, err := config.Load(filepath.Join(out, "d.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Routes[0].Format != "connect-json" || cfg.Routes[1].Format != "connect-json" {
		t.Errorf("formats %s %s, want connect-json", cfg.Routes[0].Format, cfg.Routes[1].Format)
	}
	if !strings.Contains(stdout.String(), "note: value.converter is not in the connector config") ||
		!strings.Contains(stdout.String(), "checked: of 4 records sampled from ta, tb, all 4 are such envelopes") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	// --sample 0: nothing is read, the YAML says format json.
	read = nil
	im.SampleSize, im.Force = 0, true
	if code := im.Run([]string{in}, &stdout, &stderr); code != 0 || len(read) != 0 {
		t.Fatalf("--sample 0: exit %d, read %v", code, read)
	}
	if cfg, err = config.Load(filepath.Join(out, "d.yaml"), nil); err != nil || cfg.Routes[0].Format != "json" {
		t.Errorf("--sample 0: %v %v", cfg.Routes[0].Format, err)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sink/config"
)

// sink import on a directory writes one YAML per connector that the sink
// loads, prints each fate table, refuses to overwrite, and exits 1 when a
// key is not supported.
func TestImportDirectory(t *testing.T) {
	in := t.TempDir()
	out := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(in, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.json", `{"name":"conn-a","config":{"connector.class":"com.clickhouse.kafka.connect.ClickHouseSinkConnector","topics":"ta","hostname":"ch","port":"8123","password":"pw","value.converter":"org.apache.kafka.connect.json.JsonConverter","value.converter.schemas.enable":"false"}}`)
	write("b.properties", "name=conn-b\nconnector.class=com.clickhouse.kafka.connect.ClickHouseSinkConnector\ntopics=tb\nhostname=ch\nvalue.converter=org.apache.kafka.connect.storage.StringConverter\n")
	code, stdout, stderr := sinkCmd(t, "import", "--out", out, "--brokers", "k1:9092", "--native", "127.0.0.1:9000", in)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for name, group := range map[string]string{"conn-a": "connect-conn-a", "conn-b": "connect-conn-b"} {
		cfg, err := config.Load(filepath.Join(out, name+".yaml"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Kafka.Group != group || cfg.Kafka.Brokers[0] != "k1:9092" || cfg.ClickHouse.Protocol != "native" {
			t.Errorf("%s: group %q brokers %v protocol %s", name, cfg.Kafka.Group, cfg.Kafka.Brokers, cfg.ClickHouse.Protocol)
		}
		if !strings.Contains(stdout, `connector "`+name+`" -> `+filepath.Join(out, name+".yaml")+" (group "+group+")") {
			t.Errorf("no summary line for %s in %s", name, stdout)
		}
	}
	if !strings.Contains(stdout, "SINK_CLICKHOUSE__PASSWORD") || strings.Contains(stdout, "pw") && !strings.Contains(stdout, "***") {
		t.Errorf("password fate: %s", stdout)
	}
	code, _, stderr = sinkCmd(t, "import", "--out", out, in)
	if code != 1 || !strings.Contains(stderr, "exists (--force replaces it)") {
		t.Errorf("second import: exit %d, stderr %s", code, stderr)
	}
	write("c.json", `{"name":"conn-c","config":{"connector.class":"com.clickhouse.kafka.connect.ClickHouseSinkConnector","topics":"tc","hostname":"ch","dateTimeFormats":"a=yyyy"}}`)
	code, stdout, _ = sinkCmd(t, "import", "--stdout", filepath.Join(in, "c.json"))
	if code != 1 || !strings.HasPrefix(stdout, "# Imported by `sink import`") || !strings.Contains(stdout, "name: conn-c") {
		t.Errorf("unsupported key: exit %d, stdout %s", code, stdout)
	}
}

//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// TestCheckPrintsServerFeatures: `sink check` names the server's version and
// which of the features the sink cares about it has, and each routed table's
// deduplication window, on both servers and over both protocols where the
// server speaks them; on 18.16, protocol http is refused by check and run in
// one line.
func TestCheckPrintsServerFeatures(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.NewTopic(t, 1)
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		ch := s.Conn(t)
		db := s.NewDatabase(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64) ENGINE = MergeTree ORDER BY id")
		config := func(protocol, addr string) string {
			return writeConfig(t, fmt.Sprintf(`
name: checkfeatures
kafka: {brokers: [%q], topics: [%q]}
clickhouse: {protocol: %s, addrs: [%q], database: %s}
routes: [{topic: %q, table: events, format: json}]
http: {listen: ""}
`, brokers[0], topic, protocol, addr, db, topic))
		}
		modern := s.AtLeast(23, 2)
		yes := map[bool]string{true: "yes", false: "no"}[modern]
		// The stack's 26.9 turns async_insert on by default.
		async := map[bool]string{true: "yes, on for this user", false: "no"}[modern]
		window := "non_replicated_deduplication_window = 0 (server default): INSERT blocks are not deduplicated"
		if !modern {
			window = "INSERT blocks are not deduplicated (this server has no non_replicated_deduplication_window)"
		}
		want := func(protocol, addr string) []string {
			return []string{
				"clickhouse: " + addr + " (protocol " + protocol + ")",
				"clickhouse: server version " + s.Version,
				"clickhouse: insert deduplication tokens (setting insert_deduplication_token): " + yes,
				"clickhouse: async inserts (setting async_insert): " + async,
				"clickhouse: JSON type: " + yes,
				"clickhouse: ReplacingMergeTree is_deleted column (ClickHouse 23.2+): " + yes,
				"route: table " + db + ".events (MergeTree): " + window,
				"check: ok",
			}
		}
		f := func(protocol, addr string) {
			t.Helper()
			code, out, errOut := sinkCmd(t, "check", "--config", config(protocol, addr))
			if code != 0 {
				t.Fatalf("check over %s: exit %d\nstdout %s\nstderr %s", protocol, code, out, errOut)
			}
			t.Logf("sink check, protocol %s:\n%s", protocol, out)
			lines := strings.Split(out, "\n")
			for _, w := range want(protocol, addr) {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Fatalf("check over %s: no line %q in\n%s", protocol, w, out)
				}
			}
		}
		f("native", s.Addr)
		if modern {
			f("http", s.HTTPAddr)
			return
		}
		path := config("http", s.HTTPAddr)
		refusal := "clickhouse: protocol http needs ClickHouse 23.2 or newer; " + s.HTTPAddr + " runs " + s.Version + "; use protocol: native\n"
		for cmd, wantErr := range map[string]string{"check": "sink check: " + refusal, "run": "sink: " + refusal} {
			code, _, errOut := sinkCmd(t, cmd, "--config", path)
			if code != 1 || errOut != wantErr {
				t.Fatalf("sink %s over http on %s: exit %d, stderr %q; want %q", cmd, s.Version, code, errOut, wantErr)
			}
		}
	})
}

//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// sink report --config connects the way the connector does: through TLS
// (here to a TLS front of the server, trusted by the config's ca_file) as
// the config's user with the password from its password_file. A flag
// given on the command line wins over the config.
func TestReportWithConnectorConfigOverTLS(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		db := s.NewDatabase(t)
		ch := s.Conn(t)
		other := s.NewDatabase(t)
		testenv.Exec(t, ch, "CREATE TABLE "+db+".t (id UInt64) ENGINE = MergeTree ORDER BY id")
		testenv.InsertSeq(t, ch, db, "t", "id", 1)
		pki := testenv.NewPKI(t)
		proxy := testenv.CHTLSProxy(t, s, pki)
		path := writeConfig(t, fmt.Sprintf(`
name: report-tls
kafka: {topics: [x]}
clickhouse:
  addrs: [%q]
  database: %s
  username: %s
  password_file: %q
  tls: {enabled: true, ca_file: %q}
  dial_timeout: 3s
routes: [{topic: x, table: t}]
`, proxy, db, testenv.CHUser, writePasswordFile(t, testenv.CHPassword), pki.CAFile))

		// the bare table is in the config's database
		code, out, errOut := sinkCmd(t, "report", "--config", path, "--table", "t", "--since", "1h")
		if code != 0 || !strings.HasPrefix(out, "INSERTs into "+db+".t from ") {
			t.Fatalf("report --config over TLS: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		// --database and --clickhouse override the config: the plain port
		// does not speak TLS, so the TLS client fails there.
		code, _, errOut = sinkCmd(t, "report", "--config", path, "--table", "t", "--database", other)
		if code != 1 || !strings.Contains(errOut, "table "+other+".t does not exist") {
			t.Fatalf("report --config --database: exit %d, stderr %q; want the overridden database", code, errOut)
		}
		code, _, errOut = sinkCmd(t, "report", "--config", path, "--table", "t", "--clickhouse", s.Addr)
		if code != 1 || !strings.Contains(errOut, s.Addr) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Fatalf("report --config --clickhouse (plain port, TLS on): exit %d, stderr %q; want one line naming %s", code, errOut, s.Addr)
		}
	})
}

//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sink/internal/command/report"
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

// sink report --html writes the same report as the JSON output, as one
// page: its per-minute total is the JSON's, and it names the server. The
// table's name needs quoting in SQL and escaping in HTML: the INSERTs
// into it are found (query_log writes it in backquotes) and the page
// shows it as text.
func TestReportHTMLFile(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
		db := s.NewDatabase(t)
		ch := s.Conn(t)
		const table = "ev<b>&x"
		testenv.Exec(t, ch, "CREATE TABLE "+db+".`"+table+"` (id UInt64) ENGINE = MergeTree ORDER BY id")
		for _, n := range []int{3, 5, 7} {
			testenv.InsertSeq(t, ch, db, table, "id", n)
		}
		page := filepath.Join(t.TempDir(), "report.html")
		code, out, errOut := sinkCmd(t, "report", "--clickhouse", s.Addr, "--table", db+"."+table, "--since", "1h", "--format", "json", "--html", page)
		if code != 0 {
			t.Fatalf("report --html: exit %d\nstderr:\n%s", code, errOut)
		}
		var rep report.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("report --format json: %v\n%s", err, out)
		}
		if rep.Total.Inserts != 3 || rep.Total.Rows != 15 {
			t.Fatalf("the JSON report counts %d inserts, %d rows (matched by %s); want 3, 15", rep.Total.Inserts, rep.Total.Rows, rep.MatchedBy)
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		html := string(b)
		want := fmt.Sprintf(`<p id="total">total: %d inserts, %d rows, `, rep.Total.Inserts, rep.Total.Rows)
		if !strings.Contains(html, want) || !strings.Contains(html, `<span id="server">`+s.Addr+`</span>`) ||
			!strings.Contains(html, `<span id="table">`+db+`.ev&lt;b&gt;&amp;x</span>`) || strings.Contains(html, "<b>") {
			t.Fatalf("the HTML report lacks %q, the server %s or the escaped table:\n%s", want, s.Addr, html)
		}
	})
}

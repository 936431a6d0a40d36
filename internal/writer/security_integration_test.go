//go:build integration

package writer_test

// Open against the test ClickHouse with credentials and TLS, and INSERTs into
// tables whose names are built to break naive quoting.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/testenv"
	"sink/internal/writer"
)

// chConfig is a validated clickhouse section for addr, with env overrides.
func chConfig(t *testing.T, addr string, env ...string) config.ClickHouse {
	t.Helper()
	yaml := fmt.Sprintf("name: w\nkafka: {topics: [t]}\nroutes: [{topic: t, table: t}]\nclickhouse: {addrs: [%q], dial_timeout: 5s}\n", addr)
	cfg, err := config.Parse([]byte(yaml), env)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.ClickHouse
}

func TestOpenCredentialsAndTLS(t *testing.T) {
	testenv.EachServer(t, testOpenCredentialsAndTLS)
}

func testOpenCredentialsAndTLS(t *testing.T, s testenv.Server) {
	plain := s.Addr
	pki := testenv.NewPKI(t, "ch.sink.test")
	other := testenv.NewPKI(t)
	proxy := testenv.CHTLSProxy(t, s, pki)
	pwFile := filepath.Join(t.TempDir(), "ch-password")
	if err := os.WriteFile(pwFile, []byte(testenv.CHPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	user := "SINK_CLICKHOUSE__USERNAME=" + testenv.CHUser
	pw := "SINK_CLICKHOUSE__PASSWORD=" + testenv.CHPassword
	tlsOn := "SINK_CLICKHOUSE__TLS__ENABLED=true"
	ca := "SINK_CLICKHOUSE__TLS__CA_FILE=" + pki.CAFile

	ok := func(addr string, env ...string) {
		t.Helper()
		w, err := writer.Open(context.Background(), "sec", chConfig(t, addr, env...))
		if err != nil {
			t.Fatalf("%s %v: %v", addr, env, err)
		}
		defer w.Close()
		if v, err := w.ServerVersion(context.Background()); err != nil || v == "" {
			t.Fatalf("%s %v: server version %q, %v", addr, env, v, err)
		}
	}
	ok(plain)
	ok(plain, user, pw)
	ok(plain, user, "SINK_CLICKHOUSE__PASSWORD_FILE="+pwFile)
	ok(proxy, tlsOn, ca)
	ok(proxy, tlsOn, ca, user, pw)
	ok(proxy, tlsOn, ca, "SINK_CLICKHOUSE__TLS__SERVER_NAME=ch.sink.test")
	// Only when written explicitly: any certificate goes.
	ok(proxy, tlsOn, "SINK_CLICKHOUSE__TLS__INSECURE_SKIP_VERIFY=true")

	// Every refusal is one line that says what and where, without the password.
	fails := func(addr string, env []string, want string) {
		t.Helper()
		start := time.Now()
		w, err := writer.Open(context.Background(), "sec", chConfig(t, addr, env...))
		if err == nil {
			w.Close()
			t.Fatalf("%s %v: Open succeeded; want %q", addr, env, want)
		}
		msg := err.Error()
		if !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Fatalf("%s %v: error %q; want one line containing %q", addr, env, msg, want)
		}
		if strings.Contains(msg, "wrong-password") || strings.Contains(msg, testenv.CHPassword) {
			t.Fatalf("error shows the password: %q", msg)
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Fatalf("%s %v: took %v to fail", addr, env, took)
		}
	}
	// The server's own words, and code: 18.16 says which part was wrong,
	// newer servers do not.
	wrongPassword := "Wrong password for user sink_secure (code 193)"
	if s.AtLeast(19, 0) {
		wrongPassword = "sink_secure: Authentication failed: password is incorrect, or there is no user with such name (code 516)"
	}
	fails(plain, []string{user, "SINK_CLICKHOUSE__PASSWORD=wrong-password"},
		`clickhouse: authentication failed for user "sink_secure" at `+plain+": "+wrongPassword)
	fails(plain, []string{user},
		`clickhouse: authentication failed for user "sink_secure" at `+plain+": ")
	fails(plain, []string{"SINK_CLICKHOUSE__USERNAME=nobody", "SINK_CLICKHOUSE__PASSWORD=wrong-password"},
		`clickhouse: authentication failed for user "nobody" at `+plain+": ")
	fails(proxy, []string{tlsOn, ca, user, "SINK_CLICKHOUSE__PASSWORD=wrong-password"},
		`clickhouse: authentication failed for user "sink_secure" at `+proxy)
	fails(plain, []string{tlsOn, ca},
		"clickhouse "+plain+": TLS handshake failed: the server does not speak TLS on this port (the secure native port is tcp_port_secure, usually 9440)")
	fails(proxy, []string{tlsOn, "SINK_CLICKHOUSE__TLS__CA_FILE=" + other.CAFile},
		"clickhouse "+proxy+": TLS handshake failed: x509: certificate signed by unknown authority")
	// No ca_file: the system's roots, which do not know the test CA.
	fails(proxy, []string{tlsOn}, "x509: certificate signed by unknown authority")
	fails(proxy, []string{tlsOn, ca, "SINK_CLICKHOUSE__TLS__SERVER_NAME=ch.example.com"},
		"x509: certificate is valid for localhost, ch.sink.test, not ch.example.com")
	// A plaintext client at the TLS port does not hang.
	fails(proxy, nil, "clickhouse "+proxy+": ")
}

// block is a two-column chschema.Block.
type block struct {
	cols []chschema.ColumnSchema
	ids  []uint64
	strs []string
}

func (b block) Rows() int                        { return len(b.ids) }
func (b block) Columns() []chschema.ColumnSchema { return b.cols }
func (b block) ColumnData(i int) any {
	if i == 0 {
		return b.ids
	}
	return b.strs
}

// TestHostileIdentifiers: database-independent proof that names built to
// break quoting stay names. Table names may hold anything: chschema.QuoteIdent
// escapes what would end the identifier or confuse clickhouse-go's parsing
// of the INSERT, and the rows land in the table that has the name. Column
// names clickhouse-go cannot carry (backticks, backslashes, parentheses) are
// refused with a clean error before any INSERT is sent. Describe reads the
// names with bound parameters. Nothing else ever happens: the table
// "victim" that the names try to drop survives.
func TestHostileIdentifiers(t *testing.T) {
	testenv.EachServer(t, testHostileIdentifiers)
}

func testHostileIdentifiers(t *testing.T, s testenv.Server) {
	ch := s.Conn(t)
	db := s.NewDatabase(t)
	ctx := context.Background()
	w, err := writer.Open(ctx, "sec", chConfig(t, s.Addr, "SINK_CLICKHOUSE__DATABASE="+db))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	testenv.Exec(t, ch, "CREATE TABLE "+db+".victim (id UInt64) ENGINE = MergeTree ORDER BY id")
	create := func(table, columns string) {
		t.Helper()
		q := fmt.Sprintf("CREATE TABLE %s.%s (%s) ENGINE = MergeTree ORDER BY id", chschema.QuoteIdent(db), chschema.QuoteIdent(table), columns)
		if err := ch.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	count := func(table string) uint64 {
		t.Helper()
		var n uint64
		if err := ch.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s.%s", chschema.QuoteIdent(db), chschema.QuoteIdent(table))).Scan(&n); err != nil {
			t.Fatalf("count %q: %v", table, err)
		}
		return n
	}
	b := func(cols []chschema.ColumnSchema) block {
		return block{cols: cols, ids: []uint64{1, 2, 3}, strs: []string{"a", "b'c", "d`e"}}
	}

	// ok: the insert lands, in the table of that name, with the column of
	// that name filled.
	ok := func(table, column string) {
		t.Helper()
		create(table, "id UInt64, `"+strings.ReplaceAll(column, "`", "\\`")+"` String")
		schema, err := w.Describe(ctx, db, table)
		if err != nil {
			t.Fatalf("Describe(%q): %v", table, err)
		}
		if len(schema) != 2 || schema[1].Name != column {
			t.Fatalf("Describe(%q) = %+v; want columns id and %q", table, schema, column)
		}
		tb := chtable.NewTable(db, table, schema, schema)
		if err := w.InsertOnce(ctx, tb, b(schema), testenv.UniqueName(t, "q")); err != nil {
			t.Fatalf("insert into %q (column %q): %v", table, column, err)
		}
		if n := count(table); n != 3 {
			t.Fatalf("table %q has %d rows, want 3", table, n)
		}
	}
	ok("we`ird\"na'me", "co\"l'y")
	ok("x` (id) VALUES (1); DROP TABLE victim; --", "y', 'id")
	ok(`back\slash`, "; DROP TABLE victim")
	ok("x' OR '1'='1", "z\" OR \"1\"=\"1")
	ok("with space\tand tab", "also space, and comma")
	ok("t SETTINGS max_threads = 1", "VALUES")
	ok("t FORMAT CSV", "FORMAT")

	// refused: a column clickhouse-go cannot name is a clean, one-line
	// error from Describe, before any INSERT.
	refused := func(column string) {
		t.Helper()
		table := testenv.UniqueName(t, "refused")
		create(table, "id UInt64, `"+strings.ReplaceAll(strings.ReplaceAll(column, "\\", "\\\\"), "`", "\\`")+"` String")
		_, err := w.Describe(ctx, db, table)
		want := fmt.Sprintf("clickhouse: table %s.%s: column %q cannot be inserted into by clickhouse-go's batch INSERT", db, table, column)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Describe with column %q: %v; want %q", column, err, want)
		}
	}
	refused("co`l")
	refused("a(b)")
	refused(`back\slash`)
	refused("x SETTINGS a = 1")

	// A DEFAULT column with such a name is fine while no route fills it;
	// an INSERT that names it is refused by InsertOnce without reaching
	// the server.
	create("defaults", "id UInt64, s String, `d\\`x` String DEFAULT 'x'")
	schema, err := w.Describe(ctx, db, "defaults")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.InsertOnce(ctx, chtable.NewTable(db, "defaults", schema, schema[:2]), b(schema[:2]), testenv.UniqueName(t, "q")); err != nil {
		t.Fatalf("insert without the DEFAULT column: %v", err)
	}
	err = w.InsertOnce(ctx, chtable.NewTable(db, "defaults", schema, schema), b(schema), testenv.UniqueName(t, "q"))
	if err == nil || !strings.Contains(err.Error(), "column \"d`x\" cannot be inserted into") {
		t.Fatalf("insert naming the DEFAULT column: %v", err)
	}
	if n := count("defaults"); n != 3 {
		t.Fatalf("defaults has %d rows, want 3", n)
	}

	if n := count("victim"); n != 0 {
		t.Fatalf("victim has %d rows", n)
	}
}

package chschema

import (
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	f := func(in string, major, minor int, ok bool) {
		t.Helper()
		v, gotOK := ParseVersion(in)
		if gotOK != ok || v.Major != major || v.Minor != minor {
			t.Fatalf("ParseVersion(%q) = %+v, %v; want %d.%d, %v", in, v, gotOK, major, minor, ok)
		}
	}
	f("26.9.2.1", 26, 9, true)
	f("18.16.1", 18, 16, true)
	f(" 23.2\n", 23, 2, true)
	f("24.3.1.2672-lts", 24, 3, true)
	f("25.8-alpha", 25, 8, true)
	f("", 0, 0, false)
	f("dev", 0, 0, false)
	f("26", 0, 0, false)
	f("a.b.c", 0, 0, false)
	f("-1.2", 0, 0, false)

	at := func(v string, major, minor int, want bool) {
		t.Helper()
		p, _ := ParseVersion(v)
		if p.AtLeast(major, minor) != want {
			t.Fatalf("%s AtLeast(%d, %d) != %v", v, major, minor, want)
		}
	}
	at("23.2.1", 23, 2, true)
	at("23.1.9", 23, 2, false)
	at("22.12.1", 23, 2, false)
	at("24.1.1", 23, 2, true)
}

func TestServerInfoLines(t *testing.T) {
	v, _ := ParseVersion("24.3.1.1")
	got := ServerInfo{Version: v, DedupToken: true, AsyncInsert: true, IsDeleted: true}.Lines()
	want := []string{
		"server version 24.3.1.1",
		"insert deduplication tokens (setting insert_deduplication_token): yes",
		"async inserts (setting async_insert): yes, off for this user",
		"JSON type: no",
		"ReplacingMergeTree is_deleted column (ClickHouse 23.2+): yes",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDedupString(t *testing.T) {
	f := func(d TableDedup, want string) {
		t.Helper()
		d.Table, d.Engine = "db.t", "MergeTree"
		if got := d.String(); got != "table db.t (MergeTree): "+want {
			t.Fatalf("%+v: %q, want %q", d, got, want)
		}
	}
	const nr = "non_replicated_deduplication_window"
	f(TableDedup{}, "INSERT blocks are not deduplicated (not a MergeTree-family table)")
	f(TableDedup{Setting: nr}, "INSERT blocks are not deduplicated (this server has no non_replicated_deduplication_window)")
	f(TableDedup{Setting: nr, Value: "0"}, "non_replicated_deduplication_window = 0 (server default): INSERT blocks are not deduplicated")
	f(TableDedup{Setting: nr, Value: "100", FromTable: true}, "non_replicated_deduplication_window = 100 (table setting): a repeat of one of the last 100 INSERT blocks is dropped")
}

// QuoteIdent's output must survive clickhouse-go's regular-expression parse
// of the INSERT: no parenthesis, whitespace or control character may appear
// outside an escape, and every backtick inside is escaped.
func TestQuoteIdent(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := QuoteIdent(in); got != want {
			t.Fatalf("QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
	f("events", "`events`")
	f("a`b", "`a\\`b`")
	f("x` ; DROP TABLE t; --", "`x\\`\\x20;\\x20DROP\\x20TABLE\\x20t;\\x20--`")
	f(`back\slash`, "`back\\\\slash`")
	f("", "``")
	f("имя", "`имя`")
	f("plain_name1", "`plain_name1`")
	f("we`ird\"na'me", "`we\\`ird\"na'me`")
	f("t (id) VALUES (1)", "`t\\x20\\x28id\\x29\\x20VALUES\\x20\\x281\\x29`")
	f("t SETTINGS a = 1", "`t\\x20SETTINGS\\x20a\\x20=\\x201`")
	f("tab\there\nnl", "`tab\\x09here\\x0Anl`")
	f("del\x7f", "`del\\x7F`")
	f("кириллица", "`кириллица`")
}

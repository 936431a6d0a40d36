package writer

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
	at("18.16.1", minHTTP.Major, minHTTP.Minor, false)
	at("26.9.2.1", minHTTP.Major, minHTTP.Minor, true)
}

func TestEngineSetting(t *testing.T) {
	f := func(engineFull, name, want string, ok bool) {
		t.Helper()
		got, gotOK := EngineSetting(engineFull, name)
		if got != want || gotOK != ok {
			t.Fatalf("EngineSetting(%q, %q) = %q, %v; want %q, %v", engineFull, name, got, gotOK, want, ok)
		}
	}
	const w = "non_replicated_deduplication_window"
	f("MergeTree ORDER BY id SETTINGS index_granularity = 8192", w, "", false)
	f("MergeTree ORDER BY id SETTINGS non_replicated_deduplication_window = 100, index_granularity = 8192", w, "100", true)
	f("ReplacingMergeTree(v, d) ORDER BY a SETTINGS storage_policy = 'default', non_replicated_deduplication_window = 7", w, "7", true)
	f("MergeTree ORDER BY id SETTINGS storage_policy = 'a, non_replicated_deduplication_window = 5', index_granularity = 1", w, "", false)
	f("MergeTree ORDER BY id SETTINGS storage_policy = 'it\\'s, x', index_granularity = 1", "storage_policy", `it\'s, x`, true)
	f("MergeTree ORDER BY id SETTINGS storage_policy = 'SETTINGS x = 1', index_granularity = 2", "index_granularity", "2", true)
	f("MergeTree PARTITION BY MY_SETTINGS ORDER BY id", w, "", false)
	f("MergeTree ORDER BY id", w, "", false)
	f("Log", w, "", false)
	f("", w, "", false)
	f("MergeTree ORDER BY id SETTINGS", w, "", false)
	f("MergeTree ORDER BY id SETTINGS x_non_replicated_deduplication_window = 3", w, "", false)
}

func TestTableDedup(t *testing.T) {
	defaults := map[string]string{"non_replicated_deduplication_window": "0", "replicated_deduplication_window": "1000"}
	f := func(engine, engineFull string, defaults map[string]string, want TableDedup) {
		t.Helper()
		want.Table, want.Engine = "db.t", engine
		if got := tableDedup("db.t", engine, engineFull, defaults); got != want {
			t.Fatalf("tableDedup(%q, %q) = %+v; want %+v", engine, engineFull, got, want)
		}
	}
	const nr, r = "non_replicated_deduplication_window", "replicated_deduplication_window"
	f("MergeTree", "MergeTree ORDER BY id", defaults, TableDedup{Setting: nr, Value: "0"})
	f("ReplacingMergeTree", "ReplacingMergeTree(v) ORDER BY id SETTINGS non_replicated_deduplication_window = 100", defaults,
		TableDedup{Setting: nr, Value: "100", FromTable: true})
	f("ReplicatedMergeTree", "ReplicatedMergeTree('/t', 'r') ORDER BY id", defaults, TableDedup{Setting: r, Value: "1000"})
	f("ReplicatedReplacingMergeTree", "ReplicatedReplacingMergeTree('/t', 'r', v) ORDER BY id SETTINGS replicated_deduplication_window = 5",
		defaults, TableDedup{Setting: r, Value: "5", FromTable: true})
	f("MergeTree", "MergeTree ORDER BY id", map[string]string{}, TableDedup{Setting: nr}) // 18.16: no such setting
	f("Distributed", "Distributed(c, db, t)", defaults, TableDedup{})
	f("Buffer", "Buffer(db, t, 16, 10, 100, 10000, 1000000, 10000000, 100000000)", defaults, TableDedup{})
}

// FuzzEngineSetting: any engine_full text, however garbled, is scanned
// without a panic, and a value found is one of the text's own bytes.
func FuzzEngineSetting(f *testing.F) {
	f.Add("MergeTree ORDER BY id SETTINGS non_replicated_deduplication_window = 100, index_granularity = 8192", "non_replicated_deduplication_window")
	f.Add("MergeTree SETTINGS a = 'x\\', y', b = 2", "b")
	f.Add("SETTINGS'", "a")
	f.Fuzz(func(t *testing.T, engineFull, name string) {
		v, ok := EngineSetting(engineFull, name)
		if ok && !strings.Contains(engineFull, v) {
			t.Fatalf("value %q is not in %q", v, engineFull)
		}
		if _, ok := ParseVersion(engineFull); ok {
			return
		}
	})
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

func TestForgetsSooner(t *testing.T) {
	none := TableDedup{Engine: "Log"}
	zero := TableDedup{Setting: "non_replicated_deduplication_window", Value: "0"}
	missing := TableDedup{Setting: "non_replicated_deduplication_window"}
	small := TableDedup{Setting: "non_replicated_deduplication_window", Value: "100"}
	big := TableDedup{Setting: "replicated_deduplication_window", Value: "1000"}
	for _, tc := range []struct {
		a, b TableDedup
		want bool
	}{
		{small, big, true},
		{big, small, false},
		{small, small, false},
		{none, small, true},
		{zero, big, true},
		{missing, small, true},
		{small, zero, false},
		{none, zero, false}, // both deduplicate nothing: neither is worse
	} {
		if got := forgetsSooner(tc.a, tc.b); got != tc.want {
			t.Errorf("forgetsSooner(%+v, %+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

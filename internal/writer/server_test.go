package writer

import (
	"strings"
	"testing"

	"sink/internal/chschema"
)

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
	f := func(engine, engineFull string, defaults map[string]string, want chschema.TableDedup) {
		t.Helper()
		want.Table, want.Engine = "db.t", engine
		if got := tableDedup("db.t", engine, engineFull, defaults); got != want {
			t.Fatalf("tableDedup(%q, %q) = %+v; want %+v", engine, engineFull, got, want)
		}
	}
	const nr, r = "non_replicated_deduplication_window", "replicated_deduplication_window"
	f("MergeTree", "MergeTree ORDER BY id", defaults, chschema.TableDedup{Setting: nr, Value: "0"})
	f("ReplacingMergeTree", "ReplacingMergeTree(v) ORDER BY id SETTINGS non_replicated_deduplication_window = 100", defaults,
		chschema.TableDedup{Setting: nr, Value: "100", FromTable: true})
	f("ReplicatedMergeTree", "ReplicatedMergeTree('/t', 'r') ORDER BY id", defaults, chschema.TableDedup{Setting: r, Value: "1000"})
	f("ReplicatedReplacingMergeTree", "ReplicatedReplacingMergeTree('/t', 'r', v) ORDER BY id SETTINGS replicated_deduplication_window = 5",
		defaults, chschema.TableDedup{Setting: r, Value: "5", FromTable: true})
	f("MergeTree", "MergeTree ORDER BY id", map[string]string{}, chschema.TableDedup{Setting: nr}) // 18.16: no such setting
	f("Distributed", "Distributed(c, db, t)", defaults, chschema.TableDedup{})
	f("Buffer", "Buffer(db, t, 16, 10, 100, 10000, 1000000, 10000000, 100000000)", defaults, chschema.TableDedup{})
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
		if _, ok := chschema.ParseVersion(engineFull); ok {
			return
		}
	})
}

// minHTTP is 23.2: 18.16 is older, 26.9 new enough.
func TestMinHTTP(t *testing.T) {
	for v, want := range map[string]bool{"18.16.1": false, "23.1.9": false, "23.2.1": true, "26.9.2.1": true} {
		if p, _ := chschema.ParseVersion(v); p.AtLeast(minHTTP.Major, minHTTP.Minor) != want {
			t.Fatalf("%s AtLeast(minHTTP %s) != %v", v, minHTTP, want)
		}
	}
}

package eos

import (
	"strings"
	"testing"

	"sink/internal/chschema"
)

func TestRequire(t *testing.T) {
	cols := func(names ...string) []chschema.ColumnSchema {
		var out []chschema.ColumnSchema
		for _, n := range names {
			out = append(out, chschema.ColumnSchema{Name: n, Type: "String"})
		}
		return out
	}
	full := Target{Database: "db", Name: "t", Insert: cols("v", "_topic", "_partition", "_offset")}
	ok26 := chschema.ServerInfo{Version: chschema.Version{Text: "26.9.2.1", Major: 26, Minor: 9}, DedupToken: true}
	mt := func(v string) chschema.TableDedup {
		return chschema.TableDedup{Table: "db.t", Engine: "MergeTree", Setting: "non_replicated_deduplication_window", Value: v}
	}
	// f checks Require's line (or nil when want is "").
	f := func(info chschema.ServerInfo, tables []Target, windows []chschema.TableDedup, want string) {
		t.Helper()
		err := Require(info, tables, windows)
		if want == "" {
			if err != nil {
				t.Fatalf("unexpected: %v", err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("got %v, want one line containing %q", err, want)
		}
	}
	f(ok26, []Target{full}, []chschema.TableDedup{mt("1000")}, "")
	f(chschema.ServerInfo{Version: chschema.Version{Text: "18.16.1"}}, []Target{full}, []chschema.TableDedup{mt("1000")},
		"needs insert_deduplication_token (ClickHouse 22.2 or newer); this server runs 18.16.1")
	f(ok26, []Target{full}, []chschema.TableDedup{mt("0")},
		"run: ALTER TABLE `db`.`t` MODIFY SETTING non_replicated_deduplication_window = 1000")
	f(ok26, []Target{full}, []chschema.TableDedup{{Table: "db.t", Engine: "ReplicatedMergeTree", Setting: "replicated_deduplication_window", Value: "0"}},
		"MODIFY SETTING replicated_deduplication_window = 1000")
	f(ok26, []Target{full}, []chschema.TableDedup{{Table: "db.t", Engine: "Memory"}}, "does not deduplicate INSERT blocks")
	f(ok26, []Target{{Database: "db", Name: "t", Insert: cols("v", "_offset")}}, []chschema.TableDedup{mt("1000")},
		"table db.t has no _topic, _partition column")
}

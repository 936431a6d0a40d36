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

// TestRequireNamesTheClusterServer: the refusals of a table read on one of
// a cluster's servers name the shard and replica; a Distributed table is
// told what exactly-once needs instead.
func TestRequireNamesTheClusterServer(t *testing.T) {
	cols := []chschema.ColumnSchema{{Name: "_topic"}, {Name: "_partition"}, {Name: "_offset"}}
	at := []Target{{Database: "db", Name: "ev_local", Insert: cols, Where: "shard 2 replica 10.0.0.7:9000"}}
	err := Require(chschema.ServerInfo{DedupToken: true}, at, []chschema.TableDedup{{Engine: "MergeTree", Setting: "non_replicated_deduplication_window", Value: "0"}})
	if err == nil || !strings.Contains(err.Error(), "table db.ev_local on shard 2 replica 10.0.0.7:9000 has non_replicated_deduplication_window = 0") ||
		!strings.Contains(err.Error(), "ALTER TABLE `db`.`ev_local` MODIFY SETTING") {
		t.Fatalf("window 0 on a shard: %v", err)
	}
	err = Require(chschema.ServerInfo{Version: chschema.Version{Text: "18.16.1", Major: 18, Minor: 16}}, at, nil)
	if err == nil || !strings.Contains(err.Error(), "shard 2 replica 10.0.0.7:9000 runs 18.16.1") {
		t.Fatalf("an old shard: %v", err)
	}
	dist := []Target{{Database: "db", Name: "ev", Insert: cols}}
	err = Require(chschema.ServerInfo{DedupToken: true}, dist, []chschema.TableDedup{{Engine: "Distributed"}})
	if err == nil || !strings.Contains(err.Error(), "exactly-once needs target: local with a sharding_key") {
		t.Fatalf("a Distributed table: %v", err)
	}
}

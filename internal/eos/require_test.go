package eos

import (
	"strings"
	"testing"

	"sink/internal/decode"
	"sink/internal/writer"
)

func TestRequire(t *testing.T) {
	cols := func(names ...string) []decode.ColumnSchema {
		var out []decode.ColumnSchema
		for _, n := range names {
			out = append(out, decode.ColumnSchema{Name: n, Type: "String"})
		}
		return out
	}
	full := writer.NewTable("db", "t", cols("v", "_topic", "_partition", "_offset"), cols("v", "_topic", "_partition", "_offset"))
	ok26 := writer.ServerInfo{Version: writer.Version{Text: "26.9.2.1", Major: 26, Minor: 9}, DedupToken: true}
	mt := func(v string) writer.TableDedup {
		return writer.TableDedup{Table: "db.t", Engine: "MergeTree", Setting: "non_replicated_deduplication_window", Value: v}
	}
	// f checks Require's line (or nil when want is "").
	f := func(info writer.ServerInfo, tables []*writer.Table, windows []writer.TableDedup, want string) {
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
	f(ok26, []*writer.Table{full}, []writer.TableDedup{mt("1000")}, "")
	f(writer.ServerInfo{Version: writer.Version{Text: "18.16.1"}}, []*writer.Table{full}, []writer.TableDedup{mt("1000")},
		"needs insert_deduplication_token (ClickHouse 22.2 or newer); this server runs 18.16.1")
	f(ok26, []*writer.Table{full}, []writer.TableDedup{mt("0")},
		"run: ALTER TABLE `db`.`t` MODIFY SETTING non_replicated_deduplication_window = 1000")
	f(ok26, []*writer.Table{full}, []writer.TableDedup{{Table: "db.t", Engine: "ReplicatedMergeTree", Setting: "replicated_deduplication_window", Value: "0"}},
		"MODIFY SETTING replicated_deduplication_window = 1000")
	f(ok26, []*writer.Table{full}, []writer.TableDedup{{Table: "db.t", Engine: "Memory"}}, "does not deduplicate INSERT blocks")
	f(ok26, []*writer.Table{writer.NewTable("db", "t", cols("v", "_offset"), cols("v", "_offset"))}, []writer.TableDedup{mt("1000")},
		"table db.t has no _topic, _partition column")
}

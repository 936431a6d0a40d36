package eos

import (
	"fmt"
	"strings"

	"sink/internal/chschema"
)

// SourceColumns are the columns that say which record a row came from; the
// table check and the rows-present count need all three.
var SourceColumns = []string{"_topic", "_partition", "_offset"}

// DefaultWindow is the window the refusal suggests: room for the batches of
// many members inserting while a replay waits.
const DefaultWindow = 1000

// Target is what Require checks of a table the sink inserts into: its name
// and the columns every INSERT names (a writer.Table's fields of the same
// names).
type Target struct {
	Database, Name string
	Insert         []chschema.ColumnSchema
	// Where names the server the table was read on when it is one of a
	// cluster's ("shard 2 replica 10.0.0.7:9000"); "" for the sink's own
	// server. Every table given to one Require call is on one server.
	Where string
}

// FullName is db.table as users write it.
func (t Target) FullName() string { return t.Database + "." + t.Name }

// named is FullName with the server it is on, when it is a cluster's.
func (t Target) named() string {
	if t.Where == "" {
		return t.FullName()
	}
	return t.FullName() + " on " + t.Where
}

// Require says, in one line, why exactly-once delivery cannot work with
// this server and these tables, or returns nil. windows are the tables'
// deduplication settings (writer.DedupWindows), in the order of tables.
func Require(info chschema.ServerInfo, tables []Target, windows []chschema.TableDedup) error {
	if !info.DedupToken {
		server := "this server"
		if len(tables) > 0 && tables[0].Where != "" {
			server = tables[0].Where
		}
		return fmt.Errorf("delivery exactly_once needs insert_deduplication_token (ClickHouse 22.2 or newer); %s runs %s", server, info.Version)
	}
	for i, t := range tables {
		var missing []string
		for _, c := range SourceColumns {
			if !inserts(t, c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("delivery exactly_once: table %s has no %s column (_topic String, _partition Int32, _offset Int64) (docs/guarantees.md#exactly-once-delivery-exactly_once)",
				t.named(), strings.Join(missing, ", "))
		}
		if i >= len(windows) {
			continue
		}
		d := windows[i]
		switch {
		case d.Setting == "":
			return fmt.Errorf("delivery exactly_once: table %s (%s) does not deduplicate INSERT blocks; use a MergeTree-family table%s", t.named(), d.Engine, distributedHint(d.Engine))
		case d.Value == "" || d.Value == "0":
			return fmt.Errorf("delivery exactly_once: table %s has %s = 0, so a replayed batch would be inserted again; run: ALTER TABLE %s MODIFY SETTING %s = %d",
				t.named(), d.Setting, quoted(t), d.Setting, DefaultWindow)
		}
	}
	return nil
}

// distributedHint is what Require adds for a Distributed route table that
// reached it: only a target: local route on a cluster has its local tables
// checked instead.
func distributedHint(engine string) string {
	if engine != "Distributed" {
		return ""
	}
	return " (a Distributed table deduplicates nothing itself: exactly-once needs target: local with a sharding_key on the cluster it spreads over, so that the sink writes, and checks, each shard's local table)"
}

// RequireViews says, in one line, why a materialized view downstream of a
// routed table would count a replayed batch twice, or returns nil: its
// target is a MergeTree-family table with a deduplication window of 0 (the
// INSERT's deduplicate_blocks_in_dependent_materialized_views = 1 only
// helps where the view's target remembers blocks), or dependentSetting,
// the error of trying that setting as the sink's user, is not nil. A
// target of another engine (Distributed, Null, …) is not refused: its
// deduplication happens elsewhere, and `sink check` says so.
func RequireViews(views []chschema.ViewDedup, dependentSetting error) error {
	for _, v := range views {
		d := v.Target
		if d.Setting != "" && (d.Value == "" || d.Value == "0") {
			return fmt.Errorf("delivery exactly_once: materialized view %s (on %s) writes into %s, which has %s = 0, so a replayed batch would reach it twice; run: ALTER TABLE %s MODIFY SETTING %s = %d",
				v.View, v.From, d.Table, d.Setting, v.Quoted, d.Setting, DefaultWindow)
		}
	}
	if len(views) > 0 && dependentSetting != nil {
		return fmt.Errorf("delivery exactly_once: materialized view %s needs deduplicate_blocks_in_dependent_materialized_views = 1, which this user may not set: %v (docs/guarantees.md#materialized-views)",
			views[0].View, dependentSetting)
	}
	return nil
}

func inserts(t Target, col string) bool {
	for _, c := range t.Insert {
		if c.Name == col {
			return true
		}
	}
	return false
}

func quoted(t Target) string {
	return chschema.QuoteIdent(t.Database) + "." + chschema.QuoteIdent(t.Name)
}

// Window is a table's deduplication window: the setting that sizes it
// (non_replicated_deduplication_window or replicated_deduplication_window)
// and its value, in INSERT blocks.
type Window struct {
	Setting string
	Size    int64
	// Unchecked names the replicas of a cluster's shards that could not be
	// reached to read the window (another replica of each of their shards
	// was): Size is the smallest of the replicas read.
	Unchecked []string
}

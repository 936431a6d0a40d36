package chschema

// TableDedup says whether ClickHouse deduplicates repeated INSERT blocks into
// a table, and by which setting.
type TableDedup struct {
	Table  string // db.table
	Engine string // as system.tables.engine names it
	// Setting is non_replicated_deduplication_window for a plain
	// MergeTree-family table, replicated_deduplication_window for a
	// Replicated* one, "" for other engines (no block deduplication).
	Setting string
	// Value is the setting's value: from the table's SETTINGS clause when
	// it sets it (FromTable), else the server's MergeTree default. "" when
	// the server has no such setting (non_replicated_deduplication_window
	// is missing on old servers).
	Value     string
	FromTable bool
}

// String describes the table's deduplication for `sink check`.
func (d TableDedup) String() string {
	head := "table " + d.Table + " (" + d.Engine + "): "
	switch {
	case d.Setting == "":
		return head + "INSERT blocks are not deduplicated (not a MergeTree-family table)"
	case d.Value == "":
		return head + "INSERT blocks are not deduplicated (this server has no " + d.Setting + ")"
	}
	from := "server default"
	if d.FromTable {
		from = "table setting"
	}
	head += d.Setting + " = " + d.Value + " (" + from + "): "
	if d.Value == "0" {
		return head + "INSERT blocks are not deduplicated"
	}
	return head + "a repeat of one of the last " + d.Value + " INSERT blocks is dropped"
}

// ViewDedup is a materialized view fed by a routed table, directly or
// through other views, and how the table it writes into deduplicates
// repeated INSERT blocks. A block ClickHouse drops as a repeat in the
// routed table still reaches the view unless the INSERT sets
// deduplicate_blocks_in_dependent_materialized_views = 1 and the view's
// target table has a deduplication window of its own.
type ViewDedup struct {
	View   string     // db.view
	From   string     // db.table whose INSERTs trigger it
	Target TableDedup // the table it writes into; Target.Table is db.table
	// Quoted is the target quoted for an ALTER TABLE (an implicit target
	// is named `.inner_id.<uuid>` or `.inner.<view>`).
	Quoted string
}

// String describes the view for `sink check`.
func (v ViewDedup) String() string {
	return "view " + v.View + " on " + v.From + " writes into " + v.Target.String()
}

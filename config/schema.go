package config

import (
	"path"
)

// RouteSchema is a route's schema evolution: what happens to record fields
// that no column of the table takes. They are always counted
// (sink_unmapped_fields_total) and logged once; with Evolve
// "add_columns" new top-level fields become columns of the table.
type RouteSchema struct {
	// Evolve is "" (off: count and log only) or "add_columns": a new
	// top-level field gets a column by ALTER TABLE … ADD COLUMN with a
	// type inferred from its values (json, json-schema) or taken from the
	// record's schema (avro, protobuf). Existing columns are never changed
	// or dropped. Not for the CDC formats (debezium-json, debezium-avro).
	Evolve string `koanf:"evolve"`
	// Nullable wraps the added scalar columns in Nullable(T), so a field
	// that is absent or null stays NULL instead of the type's default.
	Nullable bool `koanf:"nullable"`
	// Allow, when set, lists the field names that may become columns
	// (shell patterns: "attr_*"); Deny lists names that never do. Deny
	// wins.
	Allow []string `koanf:"allow"`
	Deny  []string `koanf:"deny"`
	// MaxNewColumnsPerHour caps the columns this process adds per route
	// in any hour; fields beyond it wait (and are counted) until the hour
	// has room.
	MaxNewColumnsPerHour int `koanf:"max_new_columns_per_hour"`

	// Create is "" / "never" (the table must exist) or "if_missing": when
	// the route's table does not exist at start, the sink creates it,
	// with a column per top-level field of a sample of the topic's records
	// (typed as evolution types a new field: from the registry schema for
	// avro and protobuf, from the values for json and json-schema), plus
	// the Kafka columns _topic, _partition, _offset and _timestamp with
	// the default engine. Allow, Deny and Nullable apply to these columns
	// as to evolved ones.
	Create string `koanf:"create"`
	// Engine of a created table: "ReplacingMergeTree" (the default: the
	// version column is _offset, and the Kafka columns are added), or
	// "MergeTree" (no Kafka columns). On a cluster, the Replicated
	// variant, with a Distributed table in front.
	Engine string `koanf:"engine"`
	// OrderBy is the created table's ORDER BY expression, required with
	// create: if_missing (the sorting key decides how the table is read
	// and, with ReplacingMergeTree, which rows collapse: it is never
	// guessed). PartitionBy is its PARTITION BY expression, "" for none.
	OrderBy     string `koanf:"order_by"`
	PartitionBy string `koanf:"partition_by"`
	// Settings are the created table's SETTINGS (index_granularity: 8192):
	// numbers, booleans or strings.
	Settings map[string]any `koanf:"settings"`
}

// Values of schema.create and schema.engine.
const (
	CreateIfMissing          = "if_missing"
	EngineReplacingMergeTree = "ReplacingMergeTree"
	EngineMergeTree          = "MergeTree"
)

// CreatesTable reports whether the route creates its table when missing.
func (s RouteSchema) CreatesTable() bool { return s.Create == CreateIfMissing }

// Replacing reports whether a created table is a ReplacingMergeTree
// (versioned by _offset, with the Kafka columns).
func (s RouteSchema) Replacing() bool { return s.Engine != EngineMergeTree }

// EvolveAddColumns is the schema.evolve value that adds columns.
const EvolveAddColumns = "add_columns"

// defaultMaxNewColumnsPerHour: a burst of new fields from one bad
// producer adds at most this many columns an hour.
const defaultMaxNewColumnsPerHour = 10

// AddsColumns reports whether the route adds columns for new fields.
func (s RouteSchema) AddsColumns() bool { return s.Evolve == EvolveAddColumns }

// Permits reports whether field may become a column: it matches Allow (or
// Allow is empty) and matches no Deny pattern. The patterns are valid
// (Validate checks them); a malformed one matches nothing.
func (s RouteSchema) Permits(field string) bool {
	for _, d := range s.Deny {
		if ok, _ := path.Match(d, field); ok {
			return false
		}
	}
	if len(s.Allow) == 0 {
		return true
	}
	for _, a := range s.Allow {
		if ok, _ := path.Match(a, field); ok {
			return true
		}
	}
	return false
}

// fillSchemaDefaults sets the per-route schema defaults.
func (r *Route) fillSchemaDefaults() {
	if r.Schema.CreatesTable() && r.Schema.Engine == "" {
		r.Schema.Engine = EngineReplacingMergeTree
	}
	if r.Schema.MaxNewColumnsPerHour == 0 {
		r.Schema.MaxNewColumnsPerHour = defaultMaxNewColumnsPerHour
	}
}

// validateSchema checks routes[i].schema.
func (p *problems) validateSchema(key string, r *Route) {
	s := r.Schema
	switch s.Evolve {
	case "", "none":
	case EvolveAddColumns:
		if r.Format.CDC() {
			p.add("%s.schema.evolve: add_columns does not work with format %s (its columns mirror the source database's table, whose changes need their own DDL; add the columns yourself)", key, r.Format)
		}
	default:
		p.add("%s.schema.evolve: %q is not one of none, %s", key, s.Evolve, EvolveAddColumns)
	}
	if s.MaxNewColumnsPerHour < 1 {
		p.add("%s.schema.max_new_columns_per_hour (%d) must be at least 1", key, s.MaxNewColumnsPerHour)
	}
	for _, l := range []struct {
		name string
		pats []string
	}{{"allow", s.Allow}, {"deny", s.Deny}} {
		name := l.name
		for _, pat := range l.pats {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				p.add("%s.schema.%s: %q is not a valid pattern (a field name, * and ? wildcards, [a-z] classes)", key, name, pat)
			}
		}
	}
}

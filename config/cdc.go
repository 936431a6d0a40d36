package config

// Route options for change data capture (format debezium-json) and for
// tables named after their topic, which is how one connector serves every
// table of a Debezium server.

import (
	"fmt"
	"regexp"
	"strings"

	"sink/internal/route"
)

// Mapping is the column mapping the route's decoder compiles: Columns, plus,
// for the CDC formats (debezium-json, debezium-avro), VersionColumn -> $version and DeletedColumn -> $deleted.
func (r Route) Mapping() map[string]string {
	if !r.Format.CDC() {
		return r.Columns
	}
	m := make(map[string]string, len(r.Columns)+2)
	for k, v := range r.Columns {
		m[k] = v
	}
	if r.VersionColumn != "" {
		m[r.VersionColumn] = route.VersionSource
	}
	if r.DeletedColumn != "" {
		m[r.DeletedColumn] = route.DeletedSource
	}
	return m
}

// TableFromTopic reports whether the route's table has placeholders, i.e.
// depends on the topic (see Route.Table).
func (r Route) TableFromTopic() bool { return route.IsTemplate(r.Table) }

// TableForTopic returns the table that the route sends topic's records to:
// TableFor, with the placeholders filled in from topic. It fails, naming the
// topic, when the name that comes out is not "table" or "db.table" (empty
// parts, more dots, control characters) or, for ${N}, when topic does not
// match the route's topic_regex.
func (c *Config) TableForTopic(r Route, topic string) (db, table string, err error) {
	if !r.TableFromTopic() {
		db, table = c.TableFor(r)
		return db, table, nil
	}
	re := r.re
	if re == nil && r.TopicRegex != "" {
		re, _ = regexp.Compile(anchor(r.TopicRegex))
	}
	name, err := route.ExpandTemplate(r.Table, topic, r.TopicRegex, re)
	if err != nil {
		return "", "", err
	}
	tmp := r
	tmp.Table = name
	db, table = c.TableFor(tmp)
	if !identRE.MatchString(db) || !identRE.MatchString(table) || strings.Count(name, ".") > 1 {
		return "", "", fmt.Errorf("table %q (from %q for topic %q) is not \"table\" or \"database.table\"", name, r.Table, topic)
	}
	return db, table, nil
}

// checkTableTemplate reports the placeholders of r.Table that can never be
// filled and returns r.Table with each placeholder replaced by "x", for the
// usual table-name checks.
func (p *problems) checkTableTemplate(key string, r *Route) string {
	problems, probe := route.CheckTemplate(r.Table, r.TopicRegex, r.re)
	for _, msg := range problems {
		p.add("%s.table: %s", key, msg)
	}
	return probe
}

// validateDebezium checks version_column and deleted_column: set only for
// the CDC formats (debezium-json, debezium-avro), distinct, and not also
// mapped in columns.
func (p *problems) validateDebezium(key string, r *Route) {
	if !r.Format.CDC() {
		if r.VersionColumn != "" {
			p.add("%s.version_column: only for formats %s and %s", key, route.Debezium, route.DebeziumAvro)
		}
		if r.DeletedColumn != "" {
			p.add("%s.deleted_column: only for formats %s and %s", key, route.Debezium, route.DebeziumAvro)
		}
		return
	}
	for _, c := range []struct{ key, col, src string }{
		{"version_column", r.VersionColumn, route.VersionSource},
		{"deleted_column", r.DeletedColumn, route.DeletedSource},
	} {
		if c.col == "" {
			p.add("%s.%s: required for format %s", key, c.key, r.Format)
			continue
		}
		if src, ok := r.Columns[c.col]; ok && src != c.src {
			p.add("%s.columns.%s: is the %s (it receives %s); remove it from columns or choose another %s", key, c.col, c.key, c.src, c.key)
		}
	}
	if r.VersionColumn != "" && r.VersionColumn == r.DeletedColumn {
		p.add("%s: version_column and deleted_column are both %q", key, r.VersionColumn)
	}
}

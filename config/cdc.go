package config

// Route options for change data capture (format debezium-json) and for
// tables named after their topic, which is how one connector serves every
// table of a Debezium server.

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// FormatDebezium is the route format of Debezium change events (Kafka
// Connect's JSON converter, with or without schemas).
const FormatDebezium = "debezium-json"

// Mapping is the column mapping the route's decoder compiles: Columns, plus,
// for debezium-json, VersionColumn -> $version and DeletedColumn -> $deleted.
func (r Route) Mapping() map[string]string {
	if r.Format != FormatDebezium {
		return r.Columns
	}
	m := make(map[string]string, len(r.Columns)+2)
	for k, v := range r.Columns {
		m[k] = v
	}
	if r.VersionColumn != "" {
		m[r.VersionColumn] = "$version"
	}
	if r.DeletedColumn != "" {
		m[r.DeletedColumn] = "$deleted"
	}
	return m
}

// TableFromTopic reports whether the route's table has placeholders, i.e.
// depends on the topic (see Route.Table).
func (r Route) TableFromTopic() bool { return strings.Contains(r.Table, "${") }

// placeholderRE finds the placeholders of Route.Table.
var placeholderRE = regexp.MustCompile(`\$\{([^}]*)\}`)

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
	var groups []string
	var failed error
	name := placeholderRE.ReplaceAllStringFunc(r.Table, func(ph string) string {
		switch key := ph[2 : len(ph)-1]; key {
		case "topic":
			return topic
		case "topic.last":
			return topic[strings.LastIndexByte(topic, '.')+1:]
		default:
			n, _ := strconv.Atoi(key)
			if groups == nil {
				re := r.re
				if re == nil {
					re, _ = regexp.Compile(anchor(r.TopicRegex))
				}
				if re != nil {
					groups = re.FindStringSubmatch(topic)
				}
			}
			if n < 1 || n >= len(groups) {
				failed = fmt.Errorf("%s does not match topic %q (topic_regex %q)", ph, topic, r.TopicRegex)
				return ""
			}
			return groups[n]
		}
	})
	if failed != nil {
		return "", "", failed
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
// filled (unknown names, a ${N} beyond topic_regex's groups or without
// topic_regex, an unterminated "${") and returns r.Table with each
// placeholder replaced by "x", for the usual table-name checks.
func (p *problems) checkTableTemplate(key string, r *Route) string {
	if !r.TableFromTopic() {
		return r.Table
	}
	groups := -1 // no topic_regex: no ${N}
	if r.re != nil {
		groups = r.re.NumSubexp()
	} else if r.TopicRegex != "" {
		groups = 0 // invalid regex, reported already
	}
	for _, m := range placeholderRE.FindAllStringSubmatch(r.Table, -1) {
		switch name := m[1]; {
		case name == "topic" || name == "topic.last":
		default:
			n, err := strconv.Atoi(name)
			switch {
			case err != nil || n < 1:
				p.add("%s.table: unknown placeholder %q (want ${topic}, ${topic.last}, or ${1}..${9} for topic_regex groups)", key, m[0])
			case groups < 0:
				p.add("%s.table: %s needs topic_regex with capture groups", key, m[0])
			case n > groups && r.re != nil:
				p.add("%s.table: %s, but topic_regex %q has %d capture groups", key, m[0], r.TopicRegex, groups)
			}
		}
	}
	out := placeholderRE.ReplaceAllString(r.Table, "x")
	if strings.Contains(out, "${") {
		p.add("%s.table: %q has an unterminated ${", key, r.Table)
	}
	return out
}

// debeziumSources are the column sources debezium-json adds.
var debeziumSources = []string{"$version", "$deleted", "$op", "$ts_ms"}

const sourceBlock = "$source."

// checkDebeziumSource validates a $ source of a debezium-json route (other
// than $header.NAME).
func checkDebeziumSource(src string) error {
	if slices.Contains(metaSources, src) || slices.Contains(debeziumSources, src) {
		return nil
	}
	if path, ok := strings.CutPrefix(src, sourceBlock); ok {
		for _, part := range strings.Split(path, ".") {
			if part == "" {
				return fmt.Errorf("%q needs a field of the source block, e.g. %stable", src, sourceBlock)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown source %q (want a path into the row image such as a.b, or one of %s, %s, %sNAME, %sPATH)",
		src, strings.Join(metaSources, ", "), strings.Join(debeziumSources, ", "), headerSource, sourceBlock)
}

// validateDebezium checks version_column and deleted_column: set only for
// debezium-json, distinct, and not also mapped in columns.
func (p *problems) validateDebezium(key string, r *Route) {
	if r.Format != FormatDebezium {
		if r.VersionColumn != "" {
			p.add("%s.version_column: only for format %s", key, FormatDebezium)
		}
		if r.DeletedColumn != "" {
			p.add("%s.deleted_column: only for format %s", key, FormatDebezium)
		}
		return
	}
	for _, c := range []struct{ key, col, src string }{
		{"version_column", r.VersionColumn, "$version"},
		{"deleted_column", r.DeletedColumn, "$deleted"},
	} {
		if c.col == "" {
			p.add("%s.%s: required for format %s", key, c.key, FormatDebezium)
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

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
// TableFor, with the placeholders filled in from topic. The database is
// the template's, never the topic's: the part before the template's first
// dot outside a placeholder (route.SplitTemplate), clickhouse.database when
// there is none, and, when that part has a placeholder, only one of the
// route's Databases. The table part, filled in, must be a table name: a
// dot that the topic's name brings (${topic} for prod.orders) is refused,
// not taken as a database. Any such failure is a *TopicTableError naming
// the topic.
func (c *Config) TableForTopic(r Route, topic string) (db, table string, err error) {
	if !r.TableFromTopic() {
		db, table = c.TableFor(r)
		return db, table, nil
	}
	re := r.re
	if re == nil && r.TopicRegex != "" {
		re, _ = regexp.Compile(anchor(r.TopicRegex))
	}
	dbT, tableT, hasDB := route.SplitTemplate(r.Table)
	if table, err = route.ExpandTemplate(tableT, topic, r.TopicRegex, re); err != nil {
		return "", "", &TopicTableError{Topic: topic, Err: err}
	}
	if !identRE.MatchString(table) {
		why := "empty, or a control character"
		if strings.Contains(table, ".") {
			why = "the topic's name puts a dot in it, and a topic never chooses the database; take the table from part of the name (${topic.last}, a topic_regex group) and write the database in the template"
		}
		return "", "", &TopicTableError{Topic: topic, Err: fmt.Errorf("table %q (from %q for topic %q) is not a table name: %s", table, r.Table, topic, why)}
	}
	db = c.ClickHouse.Database
	if hasDB {
		if db, err = c.databaseForTopic(r, dbT, topic, re); err != nil {
			return "", "", &TopicTableError{Topic: topic, Err: err}
		}
	}
	return db, table, nil
}

// databaseForTopic fills the database part dbT of r's table template for
// topic: literal, or one of r.Databases.
func (c *Config) databaseForTopic(r Route, dbT, topic string, re *regexp.Regexp) (string, error) {
	db, err := route.ExpandTemplate(dbT, topic, r.TopicRegex, re)
	switch {
	case err != nil:
		return "", err
	case route.IsTemplate(dbT) && !slices.Contains(r.Databases, db):
		return "", fmt.Errorf("database %q (from %q for topic %q) is not one of the route's databases %q", db, r.Table, topic, r.Databases)
	case !identRE.MatchString(db):
		return "", fmt.Errorf("database %q (from %q for topic %q) is not a database name", db, r.Table, topic)
	}
	return db, nil
}

// TopicTableError is a topic whose name gives no table by its route's
// template: a dot, a control character or nothing where the table's name
// goes, a database outside the route's databases, a ${N} whose group did
// not match. A topic's name is input, like a record, so the pipeline
// treats its records as bad records (dead-lettered with this cause under
// errors.tolerance: all) rather than stopping.
type TopicTableError struct {
	Topic string
	Err   error
}

func (e *TopicTableError) Error() string { return e.Err.Error() }
func (e *TopicTableError) Unwrap() error { return e.Err }

// checkTemplateDatabase checks r.Databases against r's table template: a
// database part with a placeholder needs the list (the topic must not
// choose the database), a literal one or none refuses it.
func (p *problems) checkTemplateDatabase(key string, r *Route) {
	dbT, _, _ := route.SplitTemplate(r.Table)
	templated := route.IsTemplate(dbT)
	switch {
	case templated && len(r.Databases) == 0:
		p.add("%s.table: %q takes its database from the topic's name (%q); write the database literally (\"analytics.${topic.last}\"), or list the databases it may write to in %s.databases (%s)", key, r.Table, dbT, key, templateDoc)
	case !templated && len(r.Databases) > 0:
		p.add("%s.databases: only for a table template whose database part has a placeholder, and %q has none (its database is %s)", key, r.Table, literalDB(dbT))
	}
	for _, db := range r.Databases {
		p.ident(key+".databases", db, "database")
	}
}

// literalDB names a template's literal database part for messages.
func literalDB(db string) string {
	if db == "" {
		return "clickhouse.database"
	}
	return strconv.Quote(db)
}

// templateDoc points messages about table templates at their documentation.
const templateDoc = "docs/routing.md#tables-named-after-topics"

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

// The values of Route.Truncate.
const (
	TruncateSkip  = "skip"
	TruncateApply = "apply"
)

var truncates = []string{TruncateSkip, TruncateApply}

// AppliesTruncate reports whether the route runs TRUNCATE TABLE for a
// TRUNCATE event of its topics.
func (r *Route) AppliesTruncate() bool { return r.Truncate == TruncateApply }

// validateTruncate checks truncate: a CDC route's option, and apply only
// where this configuration can make it safe. Whether each table has one
// single-partition topic is for sink check, which sees the topics.
func (c *Config) validateTruncate(p *problems) {
	for i, r := range c.Routes {
		key := fmt.Sprintf("routes[%d].truncate", i)
		if !r.Format.CDC() {
			if r.Truncate != "" {
				p.add("%s: only for formats %s and %s", key, route.Debezium, route.DebeziumAvro)
			}
			continue
		}
		if r.Truncate != "" { // "" is skip (Load fills it in)
			p.oneOf(key, r.Truncate, truncates)
		}
		if !r.AppliesTruncate() {
			continue
		}
		if c.ExactlyOnce() {
			// Recovery skips the records whose rows the table holds; a
			// TRUNCATE replayed after a crash would wipe rows inserted
			// after it, which recovery would then not insert again.
			p.add("%s: apply is not supported with delivery: exactly_once (%s)", key, cdcDoc)
		}
		if len(r.When) > 0 || c.Fanout == FanoutAll {
			p.add("%s: apply needs the table to take every record of its topic in order, which fan-out routing (when:, fanout: all) does not give", key)
		}
	}
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

// CheckTruncates refuses truncate: apply where a TRUNCATE event could wipe
// rows the sink has not seen yet: when a topic of such a route has more
// than one partition (a TRUNCATE in one partition says nothing of the
// records before it in another), or when the route's table is fed by more
// than one topic (by any route). partitions is each consumed topic's
// partition count. sink check calls it with the broker's topics.
func (c *Config) CheckTruncates(partitions map[string]int) error {
	topics := make([]string, 0, len(partitions))
	for t := range partitions {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	feeds := map[string][]string{} // table -> its topics
	apply := map[string]int{}      // table -> a route that applies truncates to it, +1
	for _, t := range topics {
		for _, i := range c.RoutesFor(t) {
			r := c.Routes[i]
			db, table, err := c.TableForTopic(r, t)
			if err != nil {
				continue // the route's own check reports it
			}
			name := db + "." + table
			if !slices.Contains(feeds[name], t) {
				feeds[name] = append(feeds[name], t)
			}
			if !r.AppliesTruncate() {
				continue
			}
			if n := partitions[t]; n > 1 {
				return fmt.Errorf("routes[%d].truncate: apply needs one partition per topic, and topic %s has %d (%s)", i, t, n, cdcDoc)
			}
			apply[name] = i + 1
		}
	}
	names := make([]string, 0, len(apply))
	for name := range apply {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if ts := feeds[name]; len(ts) > 1 {
			return fmt.Errorf("routes[%d].truncate: apply needs table %s fed by one topic, and it is fed by %s (%s)", apply[name]-1, name, strings.Join(ts, ", "), cdcDoc)
		}
	}
	return nil
}

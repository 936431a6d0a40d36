package config

import (
	"fmt"
	"strings"
	"time"
)

// The dead-letter table (errors.dlq_table, or a route's dlq_table): bad
// records become rows of a ClickHouse table the sink creates when it is
// missing, besides or instead of copies in errors.dlq_topic.

// HasDLQTable reports whether some bad record may go to a dead-letter table.
func (c *Config) HasDLQTable() bool {
	if c.Errors.DLQTable != "" {
		return true
	}
	for _, r := range c.Routes {
		if r.DLQTable != "" {
			return true
		}
	}
	return false
}

// DLQTableFor is the dead-letter table ("db", "table") of route i's bad
// records (i < 0: a record no route takes), ok false when they go to none.
func (c *Config) DLQTableFor(i int) (db, table string, ok bool) {
	name := c.Errors.DLQTable
	if i >= 0 && i < len(c.Routes) && c.Routes[i].DLQTable != "" {
		name = c.Routes[i].DLQTable
	}
	if name == "" {
		return "", "", false
	}
	if db, table, ok := strings.Cut(name, "."); ok {
		return db, table, true
	}
	return c.ClickHouse.Database, name, true
}

// DLQTables lists every dead-letter table of the config, once each, in
// the order first named (errors.dlq_table first), as "db.table".
func (c *Config) DLQTables() []string {
	var out []string
	add := func(i int) {
		if db, t, ok := c.DLQTableFor(i); ok {
			if n := db + "." + t; !contains(out, n) {
				out = append(out, n)
			}
		}
	}
	if c.Errors.DLQTable != "" {
		add(-1)
	}
	for i := range c.Routes {
		add(i)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validateDLQTable checks errors.dlq_table, its TTL and value bound, and
// every route's dlq_table.
func (c *Config) validateDLQTable(p *problems) {
	e := &c.Errors
	if e.Tolerance == "all" && e.DLQTopic == "" && e.DLQTable == "" && c.HasDLQTable() {
		for i, r := range c.Routes {
			if r.DLQTable == "" {
				p.add("routes[%d]: errors.tolerance is all but its bad records have nowhere to go: set its dlq_table, errors.dlq_table or errors.dlq_topic", i)
			}
		}
		if e.Unrouted == "dlq" {
			p.add("errors.unrouted: dlq, but records no route takes have nowhere to go: set errors.dlq_table or errors.dlq_topic")
		}
	}
	c.checkDLQTable(p, "errors.dlq_table", e.DLQTable)
	for i := range c.Routes {
		c.checkDLQTable(p, fmt.Sprintf("routes[%d].dlq_table", i), c.Routes[i].DLQTable)
	}
	if e.DLQTableTTL < 0 {
		p.add("errors.dlq_table_ttl: %s is negative (0 keeps rows until deleted)", e.DLQTableTTL)
	}
	if e.DLQTableTTL > 0 && e.DLQTableTTL%time.Second != 0 {
		p.add("errors.dlq_table_ttl: %s is not a whole number of seconds", e.DLQTableTTL)
	}
	if e.DLQValueMax <= 0 {
		p.add("errors.dlq_value_max: must be positive (the bytes of a bad record's value the table keeps)")
	} else if e.DLQValueMax > 64*MiB {
		p.add("errors.dlq_value_max: %d bytes is more than 64MiB; a bad record's value is kept to read it, not to reprocess huge ones", int64(e.DLQValueMax))
	}
}

// checkDLQTable checks one dead-letter table, name ("" when unset) at key:
// set only where bad records go to it, a valid name, not on a cluster
// under exactly-once, and not a route's own table.
func (c *Config) checkDLQTable(p *problems, key, name string) {
	if name == "" {
		return
	}
	if c.Errors.Tolerance != "all" {
		p.add("%s: set, but errors.tolerance is none, so no record is sent to it (set errors.tolerance: all)", key)
	}
	db, table, ok := strings.Cut(name, ".")
	switch {
	case !ok:
		p.ident(key, name, "table")
	case strings.Contains(table, "."):
		p.add("%s: %q must be \"table\" or \"database.table\"", key, name)
	default:
		p.ident(key, db, "database")
		p.ident(key, table, "table")
	}
	if c.ExactlyOnce() && c.ClickHouse.Clustered() {
		// The dead-letter table on a cluster is written through its
		// Distributed table, which spreads rows at random: a replayed
		// batch could land on another shard and be inserted twice.
		p.add("%s: not available with delivery: exactly_once on a cluster (the dead-letter table is written through a Distributed table that spreads rows at random, so a replayed batch could land on another shard and be inserted twice); use errors.dlq_topic", key)
	}
	dbn, tn := c.ClickHouse.Database, name
	if ok {
		dbn, tn = db, table
	}
	for i, r := range c.Routes {
		if r.TableFromTopic() {
			continue
		}
		if rdb, rt := c.TableFor(r); rdb == dbn && rt == tn {
			p.add("%s: %s.%s is routes[%d]'s table; dead letters need a table of their own", key, dbn, tn, i)
		}
	}
}

// DLQRoutes are routes that only name the dead-letter tables, with no
// topic and no target: a cluster writer given them with the routes
// (writer.OpenCluster) writes a dead-letter table as it is, where it would
// refuse a table no route names.
func (c *Config) DLQRoutes() []Route {
	var out []Route
	for _, t := range c.DLQTables() {
		out = append(out, Route{Table: t})
	}
	return out
}

package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDebeziumRouteDefaultsAndMapping(t *testing.T) {
	c, err := Parse([]byte(`
name: t
kafka: {topics: [a, b, c]}
routes:
  - {topic: a, table: a}
  - {topic: b, table: b, format: debezium-json, columns: {op: $op}}
  - {topic: c, table: c, format: debezium-json, version_column: ver, deleted_column: is_deleted}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := func(i int, version, deleted string, mapping map[string]string) {
		t.Helper()
		r := c.Routes[i]
		if r.VersionColumn != version || r.DeletedColumn != deleted {
			t.Errorf("routes[%d]: version_column %q deleted_column %q, want %q %q", i, r.VersionColumn, r.DeletedColumn, version, deleted)
		}
		if got := r.Mapping(); !reflect.DeepEqual(got, mapping) {
			t.Errorf("routes[%d].Mapping() = %v, want %v", i, got, mapping)
		}
	}
	f(0, "", "", nil)
	f(1, "_version", "_deleted", map[string]string{"op": "$op", "_version": "$version", "_deleted": "$deleted"})
	f(2, "ver", "is_deleted", map[string]string{"ver": "$version", "is_deleted": "$deleted"})
	if c.Routes[1].Columns["_version"] != "" {
		t.Fatal("Mapping modified the route's Columns")
	}
	// The defaults print and parse back.
	back, err := Parse([]byte(c.String()), nil)
	if err != nil {
		t.Fatalf("String() does not parse back: %v\n%s", err, c)
	}
	if !reflect.DeepEqual(noCache(back).Routes, noCache(c).Routes) {
		t.Fatalf("routes differ after a round trip:\n%+v\n%+v", back.Routes, c.Routes)
	}
}

func TestTableForTopic(t *testing.T) {
	var databases []string // the route's databases: for a database part with a placeholder
	f := func(topic, topicRegex, table, wantDB, wantTable, wantErr string) {
		t.Helper()
		c := &Config{ClickHouse: ClickHouse{Database: "cdc"}}
		r := Route{Topic: topic, TopicRegex: topicRegex, Table: table, Databases: databases}
		if topicRegex != "" {
			r.Topic = ""
		}
		db, tbl, err := c.TableForTopic(r, topic)
		if wantErr != "" {
			if err == nil || err.Error() != wantErr {
				t.Errorf("%s %q: error %v, want %q", topic, table, err, wantErr)
			}
			return
		}
		if err != nil || db != wantDB || tbl != wantTable {
			t.Errorf("%s %q = %q, %q, %v; want %q, %q", topic, table, db, tbl, err, wantDB, wantTable)
		}
	}
	f("srv.public.orders", `srv\..*`, "${topic.last}", "cdc", "orders", "")
	f("srv.public.orders", `srv\..*`, "raw.${topic.last}", "raw", "orders", "")
	f("srv.public.orders", `srv\..*`, "${topic.last}_cdc", "cdc", "orders_cdc", "")
	f("orders", `.*`, "${topic.last}", "cdc", "orders", "")
	f("orders", `.*`, "${topic}", "cdc", "orders", "")
	f("srv.public.orders", "", "plain", "cdc", "plain", "")
	f("srv.public.orders", "", "db.plain", "db", "plain", "")
	// A topic's dot never chooses the database: ${topic} of a dotted
	// topic is no table name, in any template.
	const notChosen = "the topic's name puts a dot in it, and a topic never chooses the database; take the table from part of the name (${topic.last}, a topic_regex group) and write the database in the template"
	f("srv.public.orders", `srv\..*`, "${topic}", "", "", `table "srv.public.orders" (from "${topic}" for topic "srv.public.orders") is not a table name: `+notChosen)
	f("prod.orders", `.*`, "${topic}", "", "", `table "prod.orders" (from "${topic}" for topic "prod.orders") is not a table name: `+notChosen)
	f("prod.orders", `.*`, "${topic}_x", "", "", `table "prod.orders_x" (from "${topic}_x" for topic "prod.orders") is not a table name: `+notChosen)
	f("prod.orders", `.*`, "raw.${topic}", "", "", `table "prod.orders" (from "raw.${topic}" for topic "prod.orders") is not a table name: `+notChosen)
	f("srv.public.", `srv\..*`, "${topic.last}", "", "", `table "" (from "${topic.last}" for topic "srv.public.") is not a table name: empty, or a control character`)
	f("srv.a\x01b", `srv\..*`, "${topic.last}", "", "", `table "a\x01b" (from "${topic.last}" for topic "srv.a\x01b") is not a table name: empty, or a control character`)
	f("other.x", `srv\.(\w+)`, "${1}", "", "", `${1} does not match topic "other.x" (topic_regex "srv\\.(\\w+)")`)
	f("srv.x", `srv\.(\w+)`, "${2}", "", "", `${2} does not match topic "srv.x" (topic_regex "srv\\.(\\w+)")`)
	// A database part with a placeholder: only one of the route's databases.
	f("srv.public.orders", `srv\.(\w+)\.(\w+)`, "${1}.${2}", "", "", `database "public" (from "${1}.${2}" for topic "srv.public.orders") is not one of the route's databases []`)
	databases = []string{"public", "pg_public"}
	f("srv.public.orders", `srv\.(\w+)\.(\w+)`, "${1}.${2}", "public", "orders", "")
	f("srv.public.orders", `srv\.(\w+)\.(\w+)`, "pg_${1}.${2}", "pg_public", "orders", "")
	f("srv.system.users", `srv\.(\w+)\.(\w+)`, "${1}.${2}", "", "", `database "system" (from "${1}.${2}" for topic "srv.system.users") is not one of the route's databases ["public" "pg_public"]`)
	f("srv.public.a.b", `srv\.(\w+)\.(.+)`, "${1}.${2}", "", "", `table "a.b" (from "${1}.${2}" for topic "srv.public.a.b") is not a table name: `+notChosen)

	// Every error is a TopicTableError naming the topic: its records are
	// bad records, not a reason to stop.
	_, _, err := (&Config{}).TableForTopic(Route{TopicRegex: ".*", Table: "${topic}"}, "prod.orders")
	var tte *TopicTableError
	if !errors.As(err, &tte) || tte.Topic != "prod.orders" {
		t.Errorf("error %#v, want a *TopicTableError for prod.orders", err)
	}
}

func TestTruncateOption(t *testing.T) {
	parse := func(extra, routes string) (*Config, error) {
		return Parse([]byte("name: t\nkafka: {topic_regex: 'pg\\..*'}\n"+extra+"routes:\n"+routes), nil)
	}
	c, err := parse("", "  - {topic: pg.a, table: a, format: debezium-json}\n  - {topic: pg.b, table: b, format: debezium-json, truncate: apply}\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Routes[0].Truncate != TruncateSkip || c.Routes[0].AppliesTruncate() || !c.Routes[1].AppliesTruncate() {
		t.Errorf("truncate: %q, %q; want the default skip, then apply", c.Routes[0].Truncate, c.Routes[1].Truncate)
	}
	for _, bad := range []struct{ extra, routes, want string }{
		{"", "  - {topic: pg.a, table: a, format: json, truncate: skip}\n", "routes[0].truncate: only for formats debezium-json and debezium-avro"},
		{"", "  - {topic: pg.a, table: a, format: debezium-json, truncate: yes}\n", `routes[0].truncate: "yes" is not one of skip, apply`},
		{"delivery: exactly_once\n", "  - {topic: pg.a, table: a, format: debezium-json, truncate: apply}\n", "routes[0].truncate: apply is not supported with delivery: exactly_once"},
		{"", "  - {topic: pg.a, table: a, format: debezium-json, truncate: apply, when: {key: x}}\n", "routes[0].truncate: apply needs the table to take every record of its topic"},
	} {
		_, err := parse(bad.extra, bad.routes)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want %q", bad.routes, err, bad.want)
		}
	}

	// Where the topics are known (sink check): one partition, one topic per table.
	c, err = parse("", "  - {topic_regex: 'pg\\.one\\..*', table: '${topic.last}', format: debezium-json, truncate: apply}\n"+
		"  - {topic: pg.other.b, table: b, format: debezium-json}\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		parts map[string]int
		want  string
	}{
		{map[string]int{"pg.one.a": 1, "pg.one.b": 1}, ""},
		{map[string]int{"pg.one.a": 1, "pg.other.b": 3}, ""}, // b has no apply route
		{map[string]int{"pg.one.a": 2}, "routes[0].truncate: apply needs one partition per topic, and topic pg.one.a has 2"},
		{map[string]int{"pg.one.b": 1, "pg.other.b": 1}, "routes[0].truncate: apply needs table default.b fed by one topic, and it is fed by pg.one.b, pg.other.b"},
	} {
		err := c.CheckTruncates(k.parts)
		if (k.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), k.want)) {
			t.Errorf("%v: err = %v, want %q", k.parts, err, k.want)
		}
	}
}

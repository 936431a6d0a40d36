package report

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Resolve: without --config every connection flag applies (with its
// default), the password comes from the environment or --password-file;
// with --config only the flags given override it, and the cluster comes
// from clickhouse.cluster, --cluster or clickhouse.shards' list.
func TestConnectionResolve(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pw := write("pw", "s3cret\n")
	named := write("named.yaml", "name: orders\nkafka: {topics: [a]}\nclickhouse: {addrs: [\"ch:9000\"], database: shop, username: sink, cluster: main}\nroutes: [{topic: a, table: t}]\nerrors: {tolerance: all, dlq_table: dead}\n")
	listed := write("listed.yaml", "name: orders\nkafka: {topics: [a]}\nclickhouse: {addrs: [\"ch:9000\"], shards: [[\"a:9000\"], [\"b:9000\"]]}\nroutes: [{topic: a, table: t}]\n")
	flags := Connection{Addr: "flag:9000", User: "flaguser", Database: "flagdb", Cluster: "flagcl", Connector: "flagconn"}
	type want struct {
		addr, user, db, password, cluster, connector string
		listed                                       bool
		dead                                         []Target
	}
	for _, c := range []struct {
		name    string
		conn    Connection
		given   []string
		environ []string
		want    want
	}{
		{"no config: the flags and the environment's password", flags, nil, []string{"SINK_CLICKHOUSE__PASSWORD=envpw"},
			want{addr: "flag:9000", user: "flaguser", db: "flagdb", password: "envpw"}},
		{"no config, --cluster and --connector given", flags, []string{"cluster", "connector"}, nil,
			want{addr: "flag:9000", user: "flaguser", db: "flagdb", cluster: "flagcl", connector: "flagconn"}},
		{"--password-file wins over the environment", with(flags, func(c *Connection) { c.PasswordFile = pw }), nil, []string{"SINK_CLICKHOUSE__PASSWORD=envpw"},
			want{addr: "flag:9000", user: "flaguser", db: "flagdb", password: "s3cret"}},
		{"config: flags not given leave it alone", with(flags, func(c *Connection) { c.ConfigPath = named }), nil, nil,
			want{addr: "ch:9000", user: "sink", db: "shop", cluster: "main", connector: "orders", dead: []Target{{Database: "shop", Table: "dead"}}}},
		{"config: the flags given win", with(flags, func(c *Connection) { c.ConfigPath = named }), []string{"clickhouse", "database", "cluster"}, nil,
			want{addr: "flag:9000", user: "sink", db: "flagdb", cluster: "flagcl", connector: "orders", dead: []Target{{Database: "shop", Table: "dead"}}}},
		{"config with clickhouse.shards: its list", with(flags, func(c *Connection) { c.ConfigPath = listed }), nil, nil,
			want{addr: "ch:9000", user: "default", db: "default", cluster: "clickhouse.shards", connector: "orders", listed: true}},
		{"config with clickhouse.shards and --cluster: system.clusters", with(flags, func(c *Connection) { c.ConfigPath = listed }), []string{"cluster"}, nil,
			want{addr: "ch:9000", user: "default", db: "default", cluster: "flagcl", connector: "orders"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.conn.Given = map[string]bool{}
			for _, g := range c.given {
				c.conn.Given[g] = true
			}
			src, err := c.conn.Resolve(c.environ)
			if err != nil {
				t.Fatal(err)
			}
			ch := src.ClickHouse
			got := want{addr: ch.Addrs[0], user: ch.Username, db: ch.Database, password: string(ch.Password),
				cluster: src.Cluster, connector: src.Connector, listed: src.Listed, dead: src.DeadLetters}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}

	if _, err := (Connection{PasswordFile: filepath.Join(dir, "missing")}).Resolve(nil); err == nil || err.Error()[:16] != "--password-file:" {
		t.Fatalf("a missing password file: %v; want an error naming --password-file", err)
	}
}

func with(c Connection, f func(*Connection)) Connection {
	f(&c)
	return c
}

package report

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"sink/config"
	"sink/internal/cluster"
	"sink/internal/writer"
)

// Connection is how `sink report` reaches ClickHouse, as asked on the
// command line: a connector's config (ConfigPath, may be "") and the flags
// that override it. Without a config every flag applies, with its
// default; with one, only the flags given (Given).
type Connection struct {
	ConfigPath                         string
	Addr, User, Database, PasswordFile string
	// Cluster names the cluster whose nodes are read (--cluster), when
	// given; Connector the connector of the per-server view.
	Cluster, Connector string
	// Given holds the names of the flags given on the command line.
	Given map[string]bool
}

// Source is where a report reads: the ClickHouse connection settings, the
// cluster (Cluster "" and Listed false: one server), the connector of the
// per-server view and the connector's dead-letter tables.
type Source struct {
	ClickHouse config.ClickHouse
	// Cluster is the cluster whose nodes are read; Listed when they are
	// clickhouse.shards' list rather than system.clusters'.
	Cluster     string
	Listed      bool
	Connector   string
	DeadLetters []Target
}

// Resolve reads the config (with the environment's overrides, environ)
// and applies the flags over it. Its errors name the config or the
// password file.
func (c Connection) Resolve(environ []string) (Source, error) {
	src := Source{ClickHouse: config.DefaultClickHouse()}
	src.ClickHouse.Password = config.Secret(lookup(environ, "SINK_CLICKHOUSE__PASSWORD"))
	if c.ConfigPath != "" {
		cfg, err := config.Load(c.ConfigPath, environ)
		if err != nil {
			return src, err
		}
		src.ClickHouse, src.Connector = cfg.ClickHouse, cfg.Name
		for _, d := range cfg.DLQTables() {
			db, table, _ := strings.Cut(d, ".")
			src.DeadLetters = append(src.DeadLetters, Target{Database: db, Table: table})
		}
	}
	if err := c.override(&src.ClickHouse); err != nil {
		return src, err
	}
	if c.Given["connector"] {
		src.Connector = c.Connector
	}
	src.Cluster = src.ClickHouse.Cluster
	if c.Given["cluster"] {
		src.Cluster = c.Cluster
	}
	// clickhouse.shards lists the nodes itself (and wins, as for run).
	src.Listed = !c.Given["cluster"] && len(src.ClickHouse.Shards) > 0
	if src.Cluster == "" && src.Listed {
		src.Cluster = "clickhouse.shards"
	}
	return src, nil
}

// override applies the connection flags that apply over ch.
func (c Connection) override(ch *config.ClickHouse) error {
	applies := func(flag string) bool { return c.ConfigPath == "" || c.Given[flag] }
	if applies("clickhouse") {
		ch.Addrs = []string{c.Addr}
	}
	if applies("user") {
		ch.Username = c.User
	}
	if applies("database") {
		ch.Database = c.Database
	}
	if c.PasswordFile != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return fmt.Errorf("--password-file: %w", err)
		}
		ch.Password, ch.PasswordFile = config.Secret(strings.TrimRight(string(b), "\r\n")), ""
	}
	return nil
}

// lookup is the value of key in environ ("KEY=value" entries), "" when
// it is not set.
func lookup(environ []string, key string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// From makes the report of o (from r.Options) from src's server or, on a
// cluster, from every node of it, and writes it to w (Run, RunCluster).
// It connects with the same constructor as `sink run`: TLS, the HTTP
// protocol and the password file work here as they do there.
func (r Request) From(ctx context.Context, src Source, o Options, w io.Writer) error {
	seed, err := writer.Open(ctx, "report", src.ClickHouse)
	if err != nil {
		return err
	}
	defer seed.Close()
	where := strings.Join(src.ClickHouse.Addrs, ",")
	if src.Cluster == "" {
		return r.Run(ctx, seed.Conn(), where, o, w)
	}
	topo, err := src.topology(ctx, seed, where)
	if err != nil {
		return err
	}
	nodes := src.openNodes(ctx, topo)
	defer func() {
		for _, n := range nodes {
			if n.close != nil {
				n.close()
			}
		}
	}()
	ns := make([]Node, len(nodes))
	for i, n := range nodes {
		ns[i] = n.Node
	}
	return r.RunCluster(ctx, seed.Conn(), where, src.Cluster, ns, o, w)
}

// topology is the cluster's shards and replicas: clickhouse.shards' list,
// or system.clusters of the seed server.
func (src Source) topology(ctx context.Context, seed *writer.Writer, where string) (*cluster.Topology, error) {
	if src.Listed {
		topo, err := cluster.FromShards(src.ClickHouse.Shards)
		if err != nil {
			return nil, fmt.Errorf("clickhouse.shards: %w", err)
		}
		return topo, nil
	}
	topo, err := cluster.Discover(ctx, seed.Conn(), src.Cluster)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", where, err)
	}
	return topo, nil
}

// openNode is a node of the cluster with the closing of its connection
// (nil when it could not be opened: Err says why).
type openNode struct {
	Node
	close func()
}

// openNodes opens a connection to every replica of every shard, with the
// seed's settings.
func (src Source) openNodes(ctx context.Context, topo *cluster.Topology) []openNode {
	var nodes []openNode
	for _, s := range topo.Shards {
		for _, r := range s.Replicas {
			n := openNode{Node: Node{Shard: s.Num, Replica: r.Num, Addr: r.Addr}}
			ch := src.ClickHouse
			ch.Addrs = []string{r.Addr}
			if nw, err := writer.Open(ctx, "report", ch); err != nil {
				n.Err = err
			} else {
				n.Conn, n.close = nw.Conn(), func() { nw.Close() }
			}
			nodes = append(nodes, n)
		}
	}
	return nodes
}

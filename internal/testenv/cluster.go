package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The local ClickHouse cluster (`make cluster-up`, scripts/stack.sh cluster up):
// ZooKeeper on 127.0.0.1:2181 and four ClickHouse 18.16 nodes, native ports
// 9201–9204, forming ClusterName (2 shards × 2 replicas) and ClusterNodesName
// (the same nodes, each its own shard).
const (
	// DefaultClusterSeed is the node whose system.clusters describes the cluster.
	DefaultClusterSeed = "127.0.0.1:9201"
	// ClusterName is the replicated cluster: shard 1 = ch1, ch2; shard 2 = ch3, ch4.
	ClusterName = "sink_cluster"
	// ClusterNodesName has one shard per node: ON CLUSTER DDL for tables that are
	// not replicated (a Distributed table's ALTER fails with Code 371 through
	// ClusterName) and reads of every node.
	ClusterNodesName = "sink_cluster_nodes"

	// EnvClusterSeed overrides DefaultClusterSeed (host:port of any node).
	EnvClusterSeed = "SINK_TEST_CLUSTER"
)

// ClusterNode is one replica of one shard.
type ClusterNode struct {
	// Shard and Replica are 1-based, as system.clusters numbers them.
	Shard, Replica int
	// Name is the node's {replica} macro ("ch1" … "ch4"): the replica name in
	// ReplicatedMergeTree('/clickhouse/tables/{shard}/…', '{replica}').
	Name string
	// Addr is the native host:port.
	Addr string
}

// Options returns fresh clickhouse-go v2 native options for the node (user
// default, no password).
func (n ClusterNode) Options() *clickhouse.Options { return chOptions(n.Addr) }

// Conn opens a native connection to the node, closed when the test ends.
func (n ClusterNode) Conn(t testing.TB) driver.Conn {
	t.Helper()
	return openConn(t, n.Options(), "cluster node "+n.Name)
}

// LocalCluster is the local ClickHouse cluster as its seed node's system.clusters
// describes it.
type LocalCluster struct {
	// Name is the replicated cluster (ClusterName), NodesName the one with a
	// shard per node (ClusterNodesName).
	Name, NodesName string
	// Shards[i] are the replicas of shard i+1, in replica order.
	Shards [][]ClusterNode
	// Version is the seed node's SELECT version().
	Version string
}

// Nodes returns every node, shard by shard.
func (c LocalCluster) Nodes() []ClusterNode {
	var out []ClusterNode
	for _, s := range c.Shards {
		out = append(out, s...)
	}
	return out
}

// Addrs returns every node's native host:port, shard by shard.
func (c LocalCluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.Addr)
	}
	return out
}

// Remote is the address list for remote('…', system.query_log) that reads
// every node (18.16 has no clusterAllReplicas; cluster() reads one replica per
// shard).
func (c LocalCluster) Remote() string { return strings.Join(c.Addrs(), ",") }

// Conn opens a native connection to the first node, closed when the test ends.
func (c LocalCluster) Conn(t testing.TB) driver.Conn {
	t.Helper()
	return c.Shards[0][0].Conn(t)
}

// NewDatabase creates a database with a unique name on every node (CREATE
// DATABASE … ON CLUSTER) and drops it, with everything in it, on every node when
// the test ends. Replicated tables dropped with it leave ZooKeeper too.
func (c LocalCluster) NewDatabase(t testing.TB) string {
	t.Helper()
	conn := c.Conn(t)
	name := UniqueName(t, "test")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+name+" ON CLUSTER "+c.NodesName); err != nil {
		t.Fatalf("testenv: create database %s on cluster %s: %v", name, c.NodesName, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" ON CLUSTER "+c.NodesName); err != nil {
			t.Logf("testenv: drop database %s on cluster %s: %v", name, c.NodesName, err)
		}
	})
	return name
}

// Cluster returns the local ClickHouse cluster, or skips the test (fails it
// under SINK_REQUIRE_STACK=1) when a node does not answer, does not reach
// ZooKeeper, or the seed does not define ClusterName. `make test` starts the
// cluster; by hand: `make cluster-up`.
func Cluster(t testing.TB) LocalCluster {
	t.Helper()
	requireIntegrationBuild(t)
	seed := envOr(EnvClusterSeed, DefaultClusterSeed)
	var c LocalCluster
	err := probe("clickhouse-cluster "+seed, func() error {
		var err error
		clusterTopology, err = discoverCluster(seed)
		return err
	})
	if err != nil {
		msg := fmt.Sprintf("integration: ClickHouse cluster %s not reachable at %s; run `make cluster-up` (%v)", ClusterName, seed, err)
		unavailableMsg(t, msg)
	}
	c = clusterTopology
	// Fresh slices: a test may reorder or trim its copy.
	shards := make([][]ClusterNode, len(c.Shards))
	for i, s := range c.Shards {
		shards[i] = append([]ClusterNode(nil), s...)
	}
	c.Shards = shards
	return c
}

// clusterTopology is set once by the probe in Cluster.
var clusterTopology LocalCluster

// discoverCluster reads ClusterName's shards and replicas from seed's
// system.clusters and checks that every node answers, names its replica and
// reaches ZooKeeper.
func discoverCluster(seed string) (LocalCluster, error) {
	c := LocalCluster{Name: ClusterName, NodesName: ClusterNodesName}
	err := withProbeConn(seed, func(ctx context.Context, conn driver.Conn) error {
		if err := conn.QueryRow(ctx, "SELECT version()").Scan(&c.Version); err != nil {
			return fmt.Errorf("SELECT version(): %w", err)
		}
		rows, err := conn.Query(ctx, "SELECT shard_num, replica_num, host_name, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", ClusterName)
		if err != nil {
			return fmt.Errorf("system.clusters: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var shard, replica uint32
			var host string
			var port uint16
			if err := rows.Scan(&shard, &replica, &host, &port); err != nil {
				return fmt.Errorf("system.clusters: %w", err)
			}
			for len(c.Shards) < int(shard) {
				c.Shards = append(c.Shards, nil)
			}
			c.Shards[shard-1] = append(c.Shards[shard-1], ClusterNode{
				Shard: int(shard), Replica: int(replica), Addr: fmt.Sprintf("%s:%d", host, port),
			})
		}
		return rows.Err()
	})
	if err != nil {
		return c, err
	}
	if len(c.Shards) == 0 {
		return c, fmt.Errorf("%s does not define cluster %s", seed, ClusterName)
	}
	for i := range c.Shards {
		for j := range c.Shards[i] {
			n := &c.Shards[i][j]
			name, err := probeClusterNode(n.Addr)
			if err != nil {
				return c, fmt.Errorf("node %s (shard %d replica %d): %w", n.Addr, n.Shard, n.Replica, err)
			}
			n.Name = name
		}
	}
	return c, nil
}

// probeClusterNode returns the node's {replica} macro once it answers and
// reaches ZooKeeper.
func probeClusterNode(addr string) (string, error) {
	var name string
	err := withProbeConn(addr, func(ctx context.Context, conn driver.Conn) error {
		if err := conn.QueryRow(ctx, "SELECT substitution FROM system.macros WHERE macro = 'replica'").Scan(&name); err != nil {
			return fmt.Errorf("{replica} macro: %w", err)
		}
		var zk uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'").Scan(&zk); err != nil {
			return fmt.Errorf("ZooKeeper: %w", err)
		}
		return nil
	})
	return name, err
}

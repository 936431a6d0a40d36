package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The local ClickHouse clusters:
//
//   - the 18.16 cluster (`make cluster-up`, scripts/stack.sh cluster up):
//     ZooKeeper on 127.0.0.1:2181 and four ClickHouse 18.16 nodes, native ports
//     9201–9204, forming ClusterName (2 shards × 2 replicas, ReplicatedMergeTree)
//     and ClusterNodesName (the same nodes, each its own shard);
//   - the 26.9 cluster (`make cluster26-up`, scripts/stack.sh cluster26 up): two
//     chdb servers, native ports 19201–19202, forming Cluster26Name (2 shards × 1
//     replica) and Cluster26WeightedName (the same, weights 1 and 3). No Keeper:
//     plain MergeTree, no replication, no ON CLUSTER DDL.
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

	// DefaultCluster26Seed is the 26.9 cluster's first node.
	DefaultCluster26Seed = "127.0.0.1:19201"
	// Cluster26Name is the 26.9 cluster: shard 1 = c26n1, shard 2 = c26n2.
	Cluster26Name = "sink26_cluster"
	// Cluster26WeightedName is the same two nodes with weights 1 and 3.
	Cluster26WeightedName = "sink26_weighted"
	// EnvCluster26Seed overrides DefaultCluster26Seed.
	EnvCluster26Seed = "SINK_TEST_CLUSTER26"

	// DedupWindow is the non_replicated_deduplication_window LocalCluster.Engine
	// gives a plain MergeTree local table, so that a block sent twice to a shard
	// is dropped the second time, as ReplicatedMergeTree drops it.
	DedupWindow = 1000
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

// LocalCluster is a local ClickHouse cluster as its seed node's system.clusters
// describes it.
type LocalCluster struct {
	// Label names the cluster's server in subtests, as Server.Label does:
	// "ch18" (the replicated 18.16 cluster) or "ch26" (the 26.9 cluster).
	Label string
	// Name is the cluster the tests write to (ClusterName, Cluster26Name),
	// NodesName the one with a shard per node (ClusterNodesName; on the 26.9
	// cluster, whose shards are single nodes, Name again).
	Name, NodesName string
	// WeightedName is a cluster of the same nodes with unequal weights (1, 3),
	// "" where the cluster has none (18.16).
	WeightedName string
	// Keeper is true where the nodes share a ZooKeeper: ReplicatedMergeTree,
	// SYSTEM SYNC REPLICA and ON CLUSTER DDL work. Without it (26.9, chdb)
	// every shard is one node with plain MergeTree tables.
	Keeper bool
	// Shards[i] are the replicas of shard i+1, in replica order.
	Shards [][]ClusterNode
	// Version is the seed node's SELECT version().
	Version string
}

// SubtestName is the subtest name of EachCluster: the label and the version
// ("ch26_26.9.2.1"), as Server.Name.
func (c LocalCluster) SubtestName() string { return c.Label + "_" + c.Version }

// Engine is the ENGINE clause of a local table db.table ordered by orderBy,
// with the table settings given ("parts_to_delay_insert = 20"):
// ReplicatedMergeTree on the cluster with Keeper (replicated within the
// shard), otherwise MergeTree with non_replicated_deduplication_window =
// DedupWindow, so that on both a block repeated on its shard is dropped.
func (c LocalCluster) Engine(db, table, orderBy string, settings ...string) string {
	if c.Keeper {
		e := fmt.Sprintf("ReplicatedMergeTree('/clickhouse/tables/{shard}/%s/%s', '{replica}') ORDER BY %s", db, table, orderBy)
		if len(settings) > 0 {
			e += " SETTINGS " + strings.Join(settings, ", ")
		}
		return e
	}
	settings = append([]string{fmt.Sprintf("non_replicated_deduplication_window = %d", DedupWindow)}, settings...)
	return fmt.Sprintf("MergeTree ORDER BY %s SETTINGS %s", orderBy, strings.Join(settings, ", "))
}

// SyncReplica makes the replica at conn fetch every part its shard has
// (SYSTEM SYNC REPLICA db.table) where tables replicate; without Keeper a
// shard is one node and there is nothing to wait for.
func (c LocalCluster) SyncReplica(t testing.TB, conn driver.Conn, table string) {
	t.Helper()
	if !c.Keeper {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+table); err != nil {
		t.Fatalf("SYSTEM SYNC REPLICA %s: %v", table, err)
	}
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

// ExecEachNode runs statements on every node of the cluster, in node order
// ({node} in a statement becomes the node's name): the DDL of tables that
// every node has, which works with and without ON CLUSTER.
func (c LocalCluster) ExecEachNode(t testing.TB, statements ...string) {
	t.Helper()
	for _, n := range c.Nodes() {
		conn := n.Conn(t)
		for _, q := range statements {
			Exec(t, conn, strings.ReplaceAll(q, "{node}", n.Name))
		}
	}
}

// Conn opens a native connection to the first node, closed when the test ends.
func (c LocalCluster) Conn(t testing.TB) driver.Conn {
	t.Helper()
	return c.Shards[0][0].Conn(t)
}

// NewDatabase creates a database with a unique name on every node, node by
// node, and drops it, with everything in it, on every node when the test
// ends (replicated tables dropped with it leave ZooKeeper too). Not ON
// CLUSTER: the 26.9 cluster has no distributed DDL, and on 18.16 a node
// whose DDL queue hangs (after a ZooKeeper outage) would stall every test,
// not only those of ON CLUSTER.
func (c LocalCluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := UniqueName(t, "test")
	for _, n := range c.Nodes() {
		conn := n.Conn(t)
		Exec(t, conn, "CREATE DATABASE "+name)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
				t.Logf("testenv: drop database %s on %s: %v", name, n.Name, err)
			}
		})
	}
	return name
}

// Cluster returns the local 18.16 ClickHouse cluster (replicated, with
// ZooKeeper), or skips the test (fails it under SINK_REQUIRE_STACK=1) when a
// node does not answer, does not reach ZooKeeper, or the seed does not define
// ClusterName. `make test` starts the cluster; by hand: `make cluster-up`.
func Cluster(t testing.TB) LocalCluster {
	t.Helper()
	return localCluster(t, cluster18Spec())
}

// Cluster26 returns the local 26.9 ClickHouse cluster (two shards of one
// node, no Keeper), for tests of features only a current server has (their
// names say so), or skips the test (fails it under SINK_REQUIRE_STACK=1) when a
// node does not answer or the seed does not define Cluster26Name. `make test`
// starts it; by hand: `make cluster26-up`.
func Cluster26(t testing.TB) LocalCluster {
	t.Helper()
	return localCluster(t, cluster26Spec())
}

// EachCluster runs fn as a subtest per local cluster, the 18.16 one and the
// 26.9 one, named by SubtestName (so `go test -run 'TestX/ch26'` picks one).
// A cluster that does not answer skips (fails under SINK_REQUIRE_STACK=1)
// its own subtest only. A test whose feature needs replication checks
// c.Keeper and skips without.
func EachCluster(t *testing.T, fn func(t *testing.T, c LocalCluster)) {
	t.Helper()
	requireIntegrationBuild(t)
	for _, spec := range []LocalCluster{cluster18Spec(), cluster26Spec()} {
		c, err := probeCluster(spec)
		name := spec.Label + "_cluster"
		if err == nil {
			name = c.SubtestName()
		}
		t.Run(name, func(t *testing.T) {
			if err != nil {
				unavailableMsg(t, err.Error())
			}
			fn(t, c)
		})
	}
}

func cluster18Spec() LocalCluster {
	return LocalCluster{Label: "ch18", Name: ClusterName, NodesName: ClusterNodesName, Keeper: true}
}

func cluster26Spec() LocalCluster {
	return LocalCluster{Label: "ch26", Name: Cluster26Name, NodesName: Cluster26Name, WeightedName: Cluster26WeightedName}
}

func clusterSeed(spec LocalCluster) string {
	if spec.Keeper {
		return envOr(EnvClusterSeed, DefaultClusterSeed)
	}
	return envOr(EnvCluster26Seed, DefaultCluster26Seed)
}

// localCluster returns the cluster of spec, or skips the test (fails it
// under SINK_REQUIRE_STACK=1).
func localCluster(t testing.TB, spec LocalCluster) LocalCluster {
	t.Helper()
	requireIntegrationBuild(t)
	c, err := probeCluster(spec)
	if err != nil {
		unavailableMsg(t, err.Error())
	}
	return c
}

// probeCluster probes the cluster of spec once per process and returns a
// copy of its topology.
func probeCluster(spec LocalCluster) (LocalCluster, error) {
	seed := clusterSeed(spec)
	err := probe("clickhouse-cluster "+spec.Name+" "+seed, func() error {
		c, err := discoverCluster(spec, seed)
		clusterMu.Lock()
		clusterTopology[spec.Name] = c
		clusterMu.Unlock()
		return err
	})
	if err != nil {
		up := "make cluster-up"
		if !spec.Keeper {
			up = "make cluster26-up"
		}
		return spec, fmt.Errorf("integration: ClickHouse cluster %s not reachable at %s; run `%s` (%v)", spec.Name, seed, up, err)
	}
	clusterMu.Lock()
	c := clusterTopology[spec.Name]
	clusterMu.Unlock()
	// Fresh slices: a test may reorder or trim its copy.
	shards := make([][]ClusterNode, len(c.Shards))
	for i, s := range c.Shards {
		shards[i] = append([]ClusterNode(nil), s...)
	}
	c.Shards = shards
	return c, nil
}

// clusterTopology is set once per cluster by the probe in localCluster.
var (
	clusterMu       sync.Mutex
	clusterTopology = map[string]LocalCluster{}
)

// discoverCluster reads spec.Name's shards and replicas from seed's
// system.clusters and checks that every node answers, names its replica and,
// with Keeper, reaches ZooKeeper.
func discoverCluster(spec LocalCluster, seed string) (LocalCluster, error) {
	c := spec
	err := withProbeConn(seed, func(ctx context.Context, conn driver.Conn) error {
		if err := conn.QueryRow(ctx, "SELECT version()").Scan(&c.Version); err != nil {
			return fmt.Errorf("SELECT version(): %w", err)
		}
		rows, err := conn.Query(ctx, "SELECT toUInt32(shard_num), toUInt32(replica_num), host_name, toUInt16(port) FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", c.Name)
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
		return c, fmt.Errorf("%s does not define cluster %s", seed, c.Name)
	}
	for i := range c.Shards {
		for j := range c.Shards[i] {
			n := &c.Shards[i][j]
			name, err := probeClusterNode(n.Addr, c.Keeper)
			if err != nil {
				return c, fmt.Errorf("node %s (shard %d replica %d): %w", n.Addr, n.Shard, n.Replica, err)
			}
			n.Name = name
		}
	}
	return c, nil
}

// probeClusterNode returns the node's {replica} macro once it answers and,
// with keeper, reaches ZooKeeper.
func probeClusterNode(addr string, keeper bool) (string, error) {
	var name string
	err := withProbeConn(addr, func(ctx context.Context, conn driver.Conn) error {
		if err := conn.QueryRow(ctx, "SELECT substitution FROM system.macros WHERE macro = 'replica'").Scan(&name); err != nil {
			return fmt.Errorf("{replica} macro: %w", err)
		}
		if !keeper {
			return nil
		}
		var zk uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'").Scan(&zk); err != nil {
			return fmt.Errorf("ZooKeeper: %w", err)
		}
		return nil
	})
	return name, err
}

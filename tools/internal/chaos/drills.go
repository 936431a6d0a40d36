package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// The fault drills on real clusters: KafkaClusterScenarios break the
// 3-broker Kafka (Env.Brokers = KafkaClusterBrokers, ReplicationFactor 3,
// min.insync.replicas 2) and run against a single ClickHouse server, in
// either delivery mode; ClusterScenarios break the ClickHouse cluster
// (Env.Cluster) and its ZooKeeper, at-least-once (exactly-once needs
// deduplication tokens, which the cluster's 18.16 lacks). Facts they are
// timed by, measured on this machine: Kafka moves a kill -9'd broker's
// leaderships after broker.session.timeout.ms (9 s) and a node restarted
// sooner waits for its old session; a kill -9'd ClickHouse replica stays
// read-only for the ZooKeeper session timeout (30 s) after it restarts; and
// writes resume 8-9 s after ZooKeeper returns.

// KafkaClusterScenarios returns the drills on the 3-broker Kafka.
func KafkaClusterScenarios(sc Scale) []Spec {
	n := sc.records
	d := sc.scaled
	return []Spec{
		{
			// The broker leading most of the topic's partitions dies
			// mid-load and is back 20 s later (past the 9-s session, so it
			// rejoins at once): the sink fetches from the new leaders and
			// commits through the coordinator wherever it is.
			Name: "kafka-leader-kill9", Records: n(300_000), Partitions: 8, Duration: d(30 * time.Second), Buffer: "64MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(6*time.Second))
				id, err := r.busiestLeader(ctx, r.topic)
				if err != nil {
					return err
				}
				return r.killBroker(ctx, id, syscall.SIGKILL, 20*time.Second)
			},
		},
		{
			// An operator's rolling upgrade: each broker in turn stopped
			// with SIGTERM (controlled shutdown moves its leaderships
			// first), restarted, and waited for until every partition is
			// in sync again.
			Name: "kafka-rolling-restart", Records: n(400_000), Partitions: 8, Duration: d(60 * time.Second), Buffer: "64MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				for id := int32(1); id <= 3; id++ {
					sleep(ctx, d(3*time.Second))
					if err := r.killBroker(ctx, id, syscall.SIGTERM, time.Second); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			// A second sink joins, and while the group rebalances the
			// broker coordinating the group dies (kill -9, back after
			// 20 s): the members find the new coordinator and finish
			// the rebalance there.
			Name: "kafka-coordinator-kill9", Records: n(300_000), Partitions: 8, Duration: d(30 * time.Second), Buffer: "64MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(6*time.Second))
				co := r.adm.FindGroupCoordinators(ctx, r.group)
				c, ok := co[r.group]
				if !ok || c.Err != nil {
					return fmt.Errorf("group coordinator of %s: %v", r.group, c.Err)
				}
				if err := r.startSink(); err != nil {
					return err
				}
				// The join takes the first member's next heartbeat (the
				// rebalance starts within a second) and its revoke flush.
				sleep(ctx, 700*time.Millisecond)
				r.logf("%s: group coordinator is broker %d", r.name, c.NodeID)
				return r.killBroker(ctx, c.NodeID, syscall.SIGKILL, 20*time.Second)
			},
		},
		{
			// 2% bad records dead-lettered while the DLQ partition's
			// leader dies (kill -9, back after 20 s): the dead-letter
			// produce waits for the new leader, the records after a
			// failed one wait for it, and the DLQ ends with every bad
			// record once... or more: at-least-once may write a bad
			// record twice, which the check below reports.
			Name: "kafka-dlq-leader-kill9", Records: n(200_000), Partitions: 8, Duration: d(30 * time.Second), Buffer: "64MiB", Instances: 1,
			BadPercent: 1,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(6*time.Second))
				id, err := r.topicLeader(ctx, r.dlqTopic)
				if err != nil {
					return err
				}
				r.logf("%s: the DLQ's leader is broker %d", r.name, id)
				return r.killBroker(ctx, id, syscall.SIGKILL, 20*time.Second)
			},
		},
	}
}

// ClusterScenarios returns the drills on the ClickHouse cluster.
func ClusterScenarios(sc Scale) []Spec {
	n := sc.records
	d := sc.scaled
	return []Spec{
		{
			// The shard-1 replica taking an INSERT is kill -9'd while the
			// INSERT runs: the sink sends the identical block to the other
			// replica (Keeper drops it if the dead one had committed it);
			// the node is restarted at once, stays read-only for its
			// ZooKeeper session, and fetches what it missed.
			Name: "ch-replica-kill9", Records: n(300_000), Partitions: 8, Duration: d(30 * time.Second), Buffer: "64MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(6*time.Second))
				node, caught := r.insertingReplica(ctx, r.env.Cluster.Shards[0], 10*time.Second)
				r.logf("%s: killing %s (INSERT running there: %v)", r.name, node.Name, caught)
				if err := r.signal(r.env.Cluster.pidName(node), syscall.SIGKILL); err != nil {
					return err
				}
				r.note(fmt.Sprintf("%s killed mid-INSERT: %v", node.Name, caught))
				return r.stackUp(ctx, r.env.Cluster.Stack, "up")
			},
			Check: func(ctx context.Context, r *run, res *Result, good int) { r.checkReplicas(ctx, res, good) },
		},
		{
			// ZooKeeper stopped for 30 s: INSERTs into the replicated
			// tables fail (242 read-only, 999 Keeper), are retried, and
			// resume once the nodes' sessions are back (8-9 s after).
			Name: "zookeeper-stop", Records: n(300_000), Partitions: 8, Duration: d(50 * time.Second), Buffer: "64MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(6*time.Second))
				if err := r.signal("cluster-zk", syscall.SIGTERM); err != nil {
					return err
				}
				if !sleep(ctx, 30*time.Second) {
					return ctx.Err()
				}
				if err := r.stackUp(ctx, r.env.Cluster.Stack, "up"); err != nil {
					return err
				}
				r.mark("zookeeper back")
				return nil
			},
			Check: func(ctx context.Context, r *run, res *Result, good int) {
				back, ok := r.marked("zookeeper back")
				if !ok {
					return
				}
				// ZooKeeper answers before the nodes' sessions are back;
				// the sink must be inserting within that (about 9 s) plus
				// its retry backoff (retry_max 3 s), a batch's max_wait
				// (1 s) and the logs' one-second resolution.
				after := r.firstInsertAfter(back)
				res.Notes = append(res.Notes, fmt.Sprintf("first INSERT %s after every node reached ZooKeeper again", after))
				if limit := 15 * time.Second; after < 0 || after > limit {
					res.fail("first INSERT %s after every node reached ZooKeeper again, want within %s", after, limit)
				}
				r.checkReplicas(ctx, res, good)
			},
		},
		{
			// Both replicas of shard 2 down (SIGTERM) for 30 s with target
			// local: shard 2's parts wait, the batches stay in flight,
			// fetching pauses at buffer_memory, RSS stays within the
			// bound, and shard 1 gets each of its rows once.
			Name: "ch-shard-down", Records: n(900_000), Partitions: 8, Duration: d(40 * time.Second), Buffer: "32MiB", Instances: 1,
			Pad: 400, ExpectPause: true,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(5*time.Second))
				for _, node := range r.env.Cluster.Shards[1] {
					if err := r.signal(r.env.Cluster.pidName(node), syscall.SIGTERM); err != nil {
						return err
					}
				}
				if !sleep(ctx, 30*time.Second) {
					return ctx.Err()
				}
				return r.stackUp(ctx, r.env.Cluster.Stack, "up")
			},
			Check: func(ctx context.Context, r *run, res *Result, good int) {
				for _, node := range r.env.Cluster.Shards[0] {
					total, distinct, err := r.nodeCount(ctx, node.Addr)
					if err != nil {
						res.fail("%s: %v", node.Name, err)
						continue
					}
					res.Notes = append(res.Notes, fmt.Sprintf("%s: %d rows, %d keys", node.Name, total, distinct))
					if total != distinct {
						res.fail("shard 1 (%s) holds %d rows for %d keys: rows doubled while shard 2 was down", node.Name, total, distinct)
					}
				}
				r.checkReplicas(ctx, res, good)
			},
		},
		{
			// The same shard outage through target: distributed: the
			// synchronous Distributed INSERT fails while a shard is
			// down and the identical block is retried.
			Name: "ch-shard-down-distributed", Target: "distributed", Records: n(300_000), Partitions: 8, Duration: d(40 * time.Second), Buffer: "32MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(5*time.Second))
				for _, node := range r.env.Cluster.Shards[1] {
					if err := r.signal(r.env.Cluster.pidName(node), syscall.SIGTERM); err != nil {
						return err
					}
				}
				if !sleep(ctx, 30*time.Second) {
					return ctx.Err()
				}
				return r.stackUp(ctx, r.env.Cluster.Stack, "up")
			},
			Check: func(ctx context.Context, r *run, res *Result, good int) { r.checkReplicas(ctx, res, good) },
		},
	}
}

// Cluster26Scenarios runs on the 26.9 cluster (`scripts/stack.sh cluster26
// up`: two shards of one chdb server each, no Keeper), with delivery:
// exactly_once, target: local and sharding_key. INSERTs are slowed by a
// materialized view on each node's local table (0.2 ms per row, batches of
// at most 10,000 rows, into a SummingMergeTree count with a deduplication
// window of its own); three times it waits for an INSERT running on a shard
// and kills the sink with SIGKILL right then, and starts a new one. The
// producer runs 30 s at any scale, so the last sink still has records to
// read and commit after the last kill.
// Every shard's plain MergeTree (non_replicated_deduplication_window) must
// hold each of its records once, the shards together every record once,
// and the views count every record once. Only the sink is killed, so it
// runs beside other tests.
func Cluster26Scenarios(sc Scale) []Spec {
	n := sc.records
	return []Spec{
		{
			Name: "ch26-cluster-sink-kill9", Records: n(300_000), Partitions: 8, Duration: 30 * time.Second, Buffer: "64MiB", Instances: 1,
			MaxRows: 10_000,
			Prepare: func(ctx context.Context, r *run) error {
				local := "chaos." + r.table + "_local"
				return r.onEachNode(ctx,
					"CREATE TABLE "+local+"_count (n UInt64) ENGINE = SummingMergeTree ORDER BY tuple() SETTINGS non_replicated_deduplication_window = 1000",
					"CREATE MATERIALIZED VIEW "+local+"_slow TO "+local+"_count AS SELECT count() AS n FROM "+local+" WHERE sleepEachRow(0.0002) = 0")
			},
			Faults: func(ctx context.Context, r *run) error {
				var nodes []Node
				for _, s := range r.env.Cluster.Shards {
					nodes = append(nodes, s...)
				}
				rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
				for i := 0; i < 3; i++ {
					// Past the 6-s session timeout, so that the new sink is
					// assigned the partitions and replays what it finds.
					if !sleep(ctx, time.Duration(7000+rng.IntN(2000))*time.Millisecond) {
						return ctx.Err()
					}
					node, caught := r.insertingReplica(ctx, nodes, 10*time.Second)
					if err := r.kill9(0); err != nil {
						return err
					}
					if caught {
						r.mark("killed mid-INSERT")
					}
					r.note(fmt.Sprintf("kill %d: INSERT running on %s: %v", i+1, node.Name, caught))
					if err := r.startSink(); err != nil {
						return err
					}
				}
				return nil
			},
			Check: func(ctx context.Context, r *run, res *Result, good int) {
				if _, ok := r.marked("killed mid-INSERT"); !ok {
					res.fail("no kill landed while an INSERT was running: nothing was left to replay")
				}
				r.checkShardsExactlyOnce(ctx, res)
				r.checkReplicas(ctx, res, good)
				var total uint64
				for _, s := range r.env.Cluster.Shards {
					conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s[0].Addr}, DialTimeout: 5 * time.Second})
					if err != nil {
						res.fail("%s: %v", s[0].Name, err)
						continue
					}
					var v uint64
					err = conn.QueryRow(ctx, "SELECT sum(n) FROM chaos."+r.table+"_local_count").Scan(&v)
					conn.Close()
					if err != nil {
						res.fail("%s: view target: %v", s[0].Name, err)
					}
					total += v
				}
				res.Notes = append(res.Notes, fmt.Sprintf("the views counted %d rows", total))
				if total != uint64(good) {
					res.fail("the materialized views counted %d rows, want %d", total, good)
				}
			},
		},
	}
}

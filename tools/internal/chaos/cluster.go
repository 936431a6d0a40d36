package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ClusterEnv is a ClickHouse cluster of the local stack (`scripts/stack.sh
// cluster up` or `cluster26 up`): its name in remote_servers and its nodes
// by shard.
type ClusterEnv struct {
	Name   string
	Shards [][]Node
	// Stack is the stack.sh command that starts it: "cluster" (18.16 with
	// ZooKeeper) or "cluster26" (26.9, no Keeper). A node's directory and
	// pid file under StackRoot/.stack are Stack+"-"+Node.Name.
	Stack string
	// Keeper: the local tables replicate (ReplicatedMergeTree); without it
	// each shard is one node with plain MergeTree tables.
	Keeper bool
}

// Node is one ClickHouse node of the cluster.
type Node struct {
	Name string // ch1 … ch4, c26n1, c26n2
	Addr string // native protocol
}

// LocalCluster is sink_cluster as scripts/stack.sh starts it.
func LocalCluster() *ClusterEnv {
	return &ClusterEnv{Name: "sink_cluster", Stack: "cluster", Keeper: true, Shards: [][]Node{
		{{"ch1", "127.0.0.1:9201"}, {"ch2", "127.0.0.1:9202"}},
		{{"ch3", "127.0.0.1:9203"}, {"ch4", "127.0.0.1:9204"}},
	}}
}

// LocalCluster26 is sink26_cluster as `scripts/stack.sh cluster26 up`
// starts it: two 26.9 (chdb) servers, one shard each.
func LocalCluster26() *ClusterEnv {
	return &ClusterEnv{Name: "sink26_cluster", Stack: "cluster26", Shards: [][]Node{
		{{"c26n1", "127.0.0.1:19201"}},
		{{"c26n2", "127.0.0.1:19202"}},
	}}
}

// pidName is the node's directory and pid file name under .stack.
func (c *ClusterEnv) pidName(n Node) string { return c.Stack + "-" + n.Name }

// KafkaClusterBrokers are the three brokers of `scripts/stack.sh
// kafka-cluster up`; broker id N listens on 9191+N.
var KafkaClusterBrokers = []string{"127.0.0.1:9192", "127.0.0.1:9193", "127.0.0.1:9194"}

// Addrs is every node's address, shard by shard.
func (c *ClusterEnv) Addrs() []string {
	var out []string
	for _, s := range c.Shards {
		for _, n := range s {
			out = append(out, n.Addr)
		}
	}
	return out
}

func quoted(addrs []string) string {
	q := make([]string, len(addrs))
	for i, a := range addrs {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, ", ")
}

// onEachNode runs the statements on every node of the cluster, in order.
func (r *run) onEachNode(ctx context.Context, stmts ...string) error {
	for _, addr := range r.env.Cluster.Addrs() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		for _, q := range stmts {
			if err := conn.Exec(ctx, q); err != nil {
				conn.Close()
				return fmt.Errorf("%s: %s: %w", addr, q, err)
			}
		}
		conn.Close()
	}
	return nil
}

// createClusterTable creates, on every node, the scenario's table name as a
// ReplicatedReplacingMergeTree (name+"_local", the Kafka offset as
// version, replicated within its shard) and name as the Distributed
// table over it, sharded by cityHash64(key) as the sink places rows. With
// exactly_once the local table is a plain (Replicated)MergeTree with the
// source columns, checked without FINAL; without Keeper nothing is
// replicated (settings then carry non_replicated_deduplication_window).
func (r *run) createClusterTable(ctx context.Context, name, settings string) error {
	local := name + "_local"
	cols := "key UInt64, v String, n UInt32, _partition UInt16, _offset UInt64"
	engine, args := "ReplacingMergeTree", "_offset"
	if r.env.exactlyOnce() {
		cols = "key UInt64, v String, n UInt32, _topic LowCardinality(String), _partition Int32, _offset Int64"
		engine, args = "MergeTree", ""
	}
	if r.env.Cluster.Keeper {
		engine = "Replicated" + engine
		args = strings.TrimSuffix(fmt.Sprintf("'/clickhouse/tables/{shard}/chaos/%s', '{replica}', %s", local, args), ", ")
	}
	ddl := fmt.Sprintf("CREATE TABLE chaos.%s (%s) ENGINE = %s(%s) ORDER BY key", local, cols, engine, args)
	if settings != "" {
		ddl += " SETTINGS " + settings
	}
	return r.onEachNode(ctx, "CREATE DATABASE IF NOT EXISTS chaos", ddl,
		fmt.Sprintf("CREATE TABLE chaos.%s AS chaos.%s ENGINE = Distributed(%s, chaos, %s, cityHash64(key))", name, local, r.env.Cluster.Name, local))
}

func (r *run) dropClusterTable(ctx context.Context, name string) {
	// The view and its target are those a scenario's Prepare may add.
	if err := r.onEachNode(ctx, "DROP TABLE IF EXISTS chaos."+name+"_local_slow", "DROP TABLE IF EXISTS chaos."+name+"_local_count",
		"DROP TABLE IF EXISTS chaos."+name, "DROP TABLE IF EXISTS chaos."+name+"_local"); err != nil {
		r.logf("%s: dropping the cluster tables: %v", r.name, err)
	}
}

// nodeCount is count() and uniqExact(key) of the local table on one node.
func (r *run) nodeCount(ctx context.Context, addr string) (total, distinct uint64, err error) {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	err = conn.QueryRow(ctx, "SELECT count(), uniqExact(key) FROM chaos."+r.table+"_local").Scan(&total, &distinct)
	return total, distinct, err
}

// checkReplicas requires both replicas of every shard to hold the same
// distinct keys, and the shards together all good keys once (no shard
// holding another's rows): waits up to a minute for replication to catch
// up after a node came back.
func (r *run) checkReplicas(ctx context.Context, res *Result, good int) {
	deadline := time.Now().Add(90 * time.Second)
	for {
		var problems []string
		sum := uint64(0)
		for si, shard := range r.env.Cluster.Shards {
			var first uint64
			for ni, n := range shard {
				_, d, err := r.nodeCount(ctx, n.Addr)
				if err != nil {
					problems = append(problems, fmt.Sprintf("shard %d %s: %v", si+1, n.Name, err))
					continue
				}
				if ni == 0 {
					first = d
					sum += d
				} else if d != first {
					problems = append(problems, fmt.Sprintf("shard %d: %s has %d keys, %s %d", si+1, shard[0].Name, first, n.Name, d))
				}
			}
		}
		if len(problems) == 0 && sum != uint64(good) {
			problems = append(problems, fmt.Sprintf("the shards hold %d distinct keys together, want %d (a key on two shards, or missing)", sum, good))
		}
		if len(problems) == 0 {
			res.Notes = append(res.Notes, "replicas equal")
			return
		}
		if time.Now().After(deadline) {
			for _, p := range problems {
				res.fail("replicas: %s", p)
			}
			return
		}
		sleep(ctx, 2*time.Second)
	}
}

// checkShardsExactlyOnce requires each shard's local table to hold every
// row once: count() equal to the distinct (_topic, _partition, _offset),
// on every node, so no shard kept a replayed part twice.
func (r *run) checkShardsExactlyOnce(ctx context.Context, res *Result) {
	for si, shard := range r.env.Cluster.Shards {
		for _, n := range shard {
			conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{n.Addr}, DialTimeout: 5 * time.Second})
			if err != nil {
				res.fail("shard %d %s: %v", si+1, n.Name, err)
				continue
			}
			var total, distinct uint64
			err = conn.QueryRow(ctx, "SELECT count(), uniqExact(_topic, _partition, _offset) FROM chaos."+r.table+"_local").Scan(&total, &distinct)
			conn.Close()
			if err != nil {
				res.fail("shard %d %s: %v", si+1, n.Name, err)
				continue
			}
			res.Notes = append(res.Notes, fmt.Sprintf("shard %d (%s): %d rows, %d distinct offsets", si+1, n.Name, total, distinct))
			if total != distinct || total == 0 {
				res.fail("shard %d (%s) holds %d rows for %d distinct source offsets: want each once, and some", si+1, n.Name, total, distinct)
			}
		}
	}
}

// pidOf reads a server's pid file under StackRoot/.stack.
func (r *run) pidOf(name string) (int, error) {
	p := filepath.Join(r.env.stackRoot(), ".stack", name, name+".pid")
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("no pid file %s (was the cluster started by %s? see --stack-root)", p, r.env.stackRoot())
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// signal sends sig to the stack server name and waits for it to exit.
func (r *run) signal(name string, sig syscall.Signal) error {
	pid, err := r.pidOf(name)
	if err != nil {
		return err
	}
	// Only the checkout that started a server can start it again (its
	// stack.sh recognises its own processes by their config paths): refuse
	// to kill one it could not bring back.
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if own := filepath.Join(r.env.stackRoot(), ".stack") + "/"; !strings.Contains(string(cmdline), own) {
		return fmt.Errorf("%s (pid %d) was not started from %s, so its stack.sh could not restart it: pass the checkout that started it as --stack-root (SINK_STACK_ROOT)",
			name, pid, own)
	}
	r.logf("%s: kill -%d %s (pid %d)", r.name, int(sig), name, pid)
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("%s %s: %w", sig, name, err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// stackUp runs StackRoot's scripts/stack.sh with args (e.g. "cluster",
// "up"), which starts whatever of that part of the stack is not running and
// waits until it answers.
func (r *run) stackUp(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(r.env.stackRoot(), "scripts", "stack.sh")}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("stack.sh %s: %v: %s", strings.Join(args, " "), err, out)
	}
	r.logf("%s: stack.sh %s: back", r.name, strings.Join(args, " "))
	return nil
}

// busiestLeader is the broker that leads most of the topic's partitions.
func (r *run) busiestLeader(ctx context.Context, topic string) (int32, error) {
	td, err := r.adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		return 0, fmt.Errorf("topic %s: not in the metadata (%v)", topic, d.Err)
	}
	led := map[int32]int{}
	for _, p := range d.Partitions {
		led[p.Leader]++
	}
	best, n := int32(-1), -1
	for b, c := range led {
		if c > n || c == n && b < best {
			best, n = b, c
		}
	}
	return best, nil
}

// killBroker kill -9s broker id of the 3-broker Kafka, keeps it down for
// downFor and starts it again, then waits until the scenario's topics are
// fully in sync.
func (r *run) killBroker(ctx context.Context, id int32, sig syscall.Signal, downFor time.Duration) error {
	if err := r.signal(fmt.Sprintf("kafka-cluster%d", id), sig); err != nil {
		return err
	}
	if !sleep(ctx, downFor) {
		return ctx.Err()
	}
	if err := r.stackUp(ctx, "kafka-cluster", "up"); err != nil {
		return err
	}
	return r.waitInSync(ctx, 2*time.Minute)
}

// waitInSync waits until every partition of the scenario's topics has all
// its replicas in sync.
func (r *run) waitInSync(ctx context.Context, timeout time.Duration) error {
	topics := []string{r.topic}
	if r.dlqTopic != "" {
		topics = append(topics, r.dlqTopic)
	}
	start := time.Now()
	for {
		td, err := r.adm.ListTopics(ctx, topics...)
		short := 0
		if err == nil {
			for _, t := range td {
				for _, p := range t.Partitions {
					if len(p.ISR) < len(p.Replicas) {
						short++
					}
				}
			}
		}
		if err == nil && short == 0 {
			r.logf("%s: every partition in sync after %s", r.name, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("%d partitions still out of sync after %s (%v)", short, timeout, err)
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// insertingReplica polls the replicas of shard for an INSERT into the
// scenario's table running there and returns the node, or the shard's
// first replica (and false) when none was seen within wait.
func (r *run) insertingReplica(ctx context.Context, shard []Node, wait time.Duration) (Node, bool) {
	conns := make([]clickhouse.Conn, len(shard))
	for i, n := range shard {
		c, err := clickhouse.Open(&clickhouse.Options{Addr: []string{n.Addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			continue
		}
		defer c.Close()
		conns[i] = c
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		for i, c := range conns {
			if c == nil {
				continue
			}
			var n uint64
			if err := c.QueryRow(ctx, "SELECT count() FROM system.processes WHERE query LIKE ?",
				"INSERT INTO `chaos`.`"+r.table+"_local`%").Scan(&n); err == nil && n > 0 {
				return shard[i], true
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return shard[0], false
}

// logLine is what the harness reads of a sink's JSON log line.
type logLine struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
	Code    *int32    `json:"code"`
}

// summarizeLogs reads every sink's log: the longest time between two
// INSERTs, the retried INSERT attempts by error code, and the warnings and
// errors by message.
func (r *run) summarizeLogs(res *Result) {
	var inserts []time.Time
	res.Retries = map[int32]int{}
	said := map[string]int{}
	for _, p := range r.procs {
		f, err := os.Open(p.logPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch {
			case l.Message == "inserted":
				inserts = append(inserts, l.Time)
			case l.Message == "insert failed, retrying the same block":
				code := int32(0)
				if l.Code != nil {
					code = *l.Code
				}
				res.Retries[code]++
			}
			if l.Level == "warn" || l.Level == "error" {
				said[l.Level+": "+l.Message]++
			}
		}
		f.Close()
	}
	slices.SortFunc(inserts, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(inserts); i++ {
		res.MaxGap = max(res.MaxGap, inserts[i].Sub(inserts[i-1]))
	}
	msgs := make([]string, 0, len(said))
	for m := range said {
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(i, j int) bool {
		return said[msgs[i]] > said[msgs[j]] || said[msgs[i]] == said[msgs[j]] && msgs[i] < msgs[j]
	})
	for _, m := range msgs {
		res.Log = append(res.Log, fmt.Sprintf("%d× %s", said[m], m))
	}
	slices.SortFunc(res.Offsets, func(a, b string) int {
		pa, _ := strconv.Atoi(a[:strings.IndexByte(a, ':')])
		pb, _ := strconv.Atoi(b[:strings.IndexByte(b, ':')])
		return pa - pb
	})
}

// firstInsertAfter is the time from t to the first INSERT any sink logged
// after it, or -1 if none did.
func (r *run) firstInsertAfter(t time.Time) time.Duration {
	best := time.Duration(-1)
	for _, p := range r.procs {
		f, err := os.Open(p.logPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Message != "inserted" {
				continue
			}
			// Log times have second resolution: compare at that grain.
			if d := l.Time.Sub(t.Truncate(time.Second)); d >= 0 && (best < 0 || d < best) {
				best = d
			}
		}
		f.Close()
	}
	return best
}

// topicLeader is the leader of partition 0 of topic.
func (r *run) topicLeader(ctx context.Context, topic string) (int32, error) {
	td, err := r.adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	for _, p := range td[topic].Partitions {
		if p.Partition == 0 {
			return p.Leader, nil
		}
	}
	return 0, fmt.Errorf("topic %s has no partition 0 in the metadata", topic)
}

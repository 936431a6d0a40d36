//go:build integration

package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/testenv"
)

// TestClusterReplicatesAndDistributes runs on the local ClickHouse cluster: the
// topology is 2 shards × 2 named replicas; a ReplicatedMergeTree table created ON
// CLUSTER and a Distributed table over it take a synchronous Distributed insert
// that lands split over both shards and copied to both replicas of each; a row
// inserted into one replica's local table reaches the other replica.
func TestClusterReplicatesAndDistributes(t *testing.T) {
	c := testenv.Cluster(t)
	if len(c.Shards) != 2 {
		t.Fatalf("cluster %s: %d shards, want 2: %+v", c.Name, len(c.Shards), c.Shards)
	}
	names := map[string]bool{}
	for i, s := range c.Shards {
		if len(s) != 2 {
			t.Fatalf("shard %d: %d replicas, want 2: %+v", i+1, len(s), s)
		}
		for _, n := range s {
			if n.Name == "" || names[n.Name] {
				t.Fatalf("replica names must be set and distinct: %+v", c.Shards)
			}
			names[n.Name] = true
		}
	}

	db := c.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seed := c.Conn(t)
	testenv.Exec(t, seed,
		fmt.Sprintf("CREATE TABLE %s.events ON CLUSTER %s (k UInt64, v String) "+
			"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/%s.events', '{replica}') ORDER BY k", db, c.Name, db),
		// Distributed tables are not replicated: their DDL goes through the
		// cluster whose shards are single nodes.
		fmt.Sprintf("CREATE TABLE %s.events_all ON CLUSTER %s AS %s.events "+
			"ENGINE = Distributed(%s, %s, events, cityHash64(k))", db, c.NodesName, db, c.Name, db))

	// insert_distributed_sync: the INSERT returns once every shard has its rows.
	opts := c.Shards[0][0].Options()
	opts.Settings = clickhouse.Settings{"insert_distributed_sync": 1}
	dconn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer dconn.Close()
	const rows = 1000
	testenv.InsertSeq(t, dconn, db, "events_all", "k", rows)

	count := func(n testenv.ClusterNode, table string) uint64 {
		t.Helper()
		conn := n.Conn(t)
		if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+db+".events"); err != nil {
			t.Fatalf("%s: SYSTEM SYNC REPLICA: %v", n.Name, err)
		}
		var got uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+"."+table).Scan(&got); err != nil {
			t.Fatalf("%s: count: %v", n.Name, err)
		}
		return got
	}
	var sum uint64
	for i, s := range c.Shards {
		a, b := count(s[0], "events"), count(s[1], "events")
		if a == 0 || a != b {
			t.Errorf("shard %d: %s has %d rows, %s has %d; want the same, non-zero", i+1, s[0].Name, a, s[1].Name, b)
		}
		sum += a
	}
	if sum != rows {
		t.Errorf("the shards hold %d rows together, want %d", sum, rows)
	}
	if got := count(c.Shards[1][1], "events_all"); got != rows {
		t.Errorf("the Distributed table reads %d rows, want %d", got, rows)
	}
	// remote() over every node reads each row once per replica.
	var everyNode uint64
	q := fmt.Sprintf("SELECT count() FROM remote('%s', %s.events)", c.Remote(), db)
	if err := seed.QueryRow(ctx, q).Scan(&everyNode); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if everyNode != 2*rows {
		t.Errorf("remote() over every node counts %d rows, want %d", everyNode, 2*rows)
	}

	// A row written into one replica's local table reaches the other replica.
	r1, r2 := c.Shards[0][1], c.Shards[0][0]
	before := count(r2, "events")
	b, err := r1.Conn(t).PrepareBatch(ctx, "INSERT INTO "+db+".events (k, v)")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(uint64(4242), "local"); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatalf("%s: insert: %v", r1.Name, err)
	}
	if got := count(r2, "events"); got != before+1 {
		t.Errorf("%s has %d rows after a local insert into %s, want %d", r2.Name, got, r1.Name, before+1)
	}
}

// TestCluster26DistributesWithoutReplication runs on the local 26.9 cluster
// (two chdb servers, no Keeper): the topology is 2 shards × 1 replica with the
// weighted twin; a synchronous Distributed insert (distributed_foreground_insert)
// returns with both shards holding their rows; ON CLUSTER DDL is refused with
// Code 392; a plain MergeTree with non_replicated_deduplication_window drops a
// repeated block and a repeated insert_deduplication_token.
func TestCluster26DistributesWithoutReplication(t *testing.T) {
	c := testenv.Cluster26(t)
	if c.Keeper || len(c.Shards) != 2 || len(c.Shards[0]) != 1 || len(c.Shards[1]) != 1 {
		t.Fatalf("cluster %s: %+v, want 2 shards of 1 node without Keeper", c.Name, c)
	}
	db := c.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range c.Nodes() {
		testenv.Exec(t, n.Conn(t),
			fmt.Sprintf("CREATE TABLE %s.events (k UInt64) ENGINE = %s", db, c.Engine(db, "events", "k")),
			fmt.Sprintf("CREATE TABLE %s.events_all AS %s.events ENGINE = Distributed(%s, %s, events, cityHash64(k))", db, db, c.Name, db))
	}
	err := c.Conn(t).Exec(ctx, fmt.Sprintf("ALTER TABLE %s.events ON CLUSTER %s ADD COLUMN x UInt8", db, c.Name))
	if err == nil || !strings.Contains(err.Error(), "392") {
		t.Errorf("ALTER … ON CLUSTER without Keeper: %v, want Code 392", err)
	}

	opts := c.Shards[0][0].Options()
	opts.Settings = clickhouse.Settings{"distributed_foreground_insert": 1}
	dconn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer dconn.Close()
	const rows = 1000
	testenv.InsertSeq(t, dconn, db, "events_all", "k", rows)
	count := func(n testenv.ClusterNode, where string) uint64 {
		t.Helper()
		var got uint64
		if err := n.Conn(t).QueryRow(ctx, "SELECT count() FROM "+db+".events "+where).Scan(&got); err != nil {
			t.Fatalf("%s: count: %v", n.Name, err)
		}
		return got
	}
	a, b := count(c.Shards[0][0], ""), count(c.Shards[1][0], "")
	if a == 0 || b == 0 || a+b != rows {
		t.Errorf("the shards hold %d and %d rows right after the synchronous insert, want both non-zero, %d together", a, b, rows)
	}

	// The same block twice into a local table: dropped the second time. Two
	// different blocks with one token: the second dropped too.
	n2 := c.Shards[1][0].Conn(t)
	testenv.Exec(t, n2, fmt.Sprintf("CREATE TABLE %s.dedup (k UInt64) ENGINE = %s", db, c.Engine(db, "dedup", "k")))
	testenv.InsertSeq(t, n2, db, "dedup", "k", 10)
	testenv.InsertSeq(t, n2, db, "dedup", "k", 10)
	tok := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_deduplication_token": "tok-1"}))
	for i, k := range []uint64{5000, 5001} {
		if err := n2.Exec(tok, fmt.Sprintf("INSERT INTO %s.dedup VALUES (%d)", db, k)); err != nil {
			t.Fatalf("token insert %d: %v", i, err)
		}
	}
	var small, big uint64
	if err := n2.QueryRow(ctx, "SELECT countIf(k < 10), countIf(k >= 5000) FROM "+db+".dedup").Scan(&small, &big); err != nil {
		t.Fatal(err)
	}
	if small != 10 {
		t.Errorf("the same 10-row block twice left %d rows, want 10", small)
	}
	if big != 1 {
		t.Errorf("two inserts with one insert_deduplication_token left %d rows, want 1", big)
	}
}

// TestKafkaClusterReplicatesTopics runs on the local 3-broker Kafka: a topic from
// NewClusterTopic has three in-sync replicas per partition and
// min.insync.replicas=2, and a record produced with acks=all is read back
// through another broker.
func TestKafkaClusterReplicatesTopics(t *testing.T) {
	brokers := testenv.KafkaCluster(t)
	topic := testenv.NewClusterTopic(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(testenv.KafkaClusterClient(t))
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range td[topic].Partitions {
		if len(p.Replicas) != 3 || len(p.ISR) != 3 {
			t.Errorf("partition %d: replicas %v, in sync %v; want 3 of each", p.Partition, p.Replicas, p.ISR)
		}
	}
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	minISR := ""
	for _, e := range c.Configs {
		if e.Key == "min.insync.replicas" {
			minISR = e.MaybeValue()
		}
	}
	if minISR != "2" {
		t.Errorf("min.insync.replicas = %q, want 2", minISR)
	}

	// Produce through the first broker only, read through the last only.
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers[0]), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("replicated")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers[len(brokers)-1]), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fs := cons.PollRecords(ctx, 1)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "replicated" {
		t.Fatalf("read back %d records: %+v", len(recs), recs)
	}
}

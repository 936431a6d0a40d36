// Package testenv finds the local stack (real Kafka and ClickHouse, and
// PostgreSQL with Debezium) for integration tests and skips, with a clear
// message, when it is not up.
//
// The stack is started by `make stack-up` (scripts/stack.sh): Apache Kafka 4.x in
// KRaft mode on 127.0.0.1:9092 and two ClickHouse servers, 18.16 on 127.0.0.1:9000
// and 26.9 on 127.0.0.1:19000 (native protocol), with system.query_log and
// system.part_log flushed every second.
//
// An integration test lives in a *_integration_test.go file that starts with
// //go:build integration: `make test` builds with -tags integration, `make unit`
// (plain go test) leaves those files out and runs without the stack, and an
// accessor called from an untagged file fails the test saying so.
//
// An integration test starts with one of the accessors, which probe the server once
// per test binary and skip the test when it does not answer:
//
//	brokers := testenv.Kafka(t)      // []string{"127.0.0.1:9092"}
//	topic := testenv.NewTopic(t, 3)  // fresh topic, deleted at cleanup
//	cl := testenv.KafkaClient(t)     // franz-go client, closed at cleanup
//
// A test that talks to ClickHouse runs once per server, as subtests named after
// the server ("ch18_18.16.1", "ch26_26.9.2.1"):
//
//	testenv.EachServer(t, func(t *testing.T, s testenv.Server) {
//		conn := s.Conn(t)        // clickhouse-go v2 native conn, closed at cleanup
//		db := s.NewDatabase(t)   // fresh database, dropped at cleanup
//		_ = s.Addr               // native host:port, for a config under test
//	})
//
// A feature that exists on one server only is tested with testenv.Server26(t)
// or testenv.Server18(t), in a test whose name says which.
//
// The ClickHouse cluster (`make cluster-up`; scripts/test.sh starts it before the
// tests): ZooKeeper and four 18.16 nodes, cluster sink_cluster = 2 shards × 2
// replicas, sink_cluster_nodes = one shard per node:
//
//	c := testenv.Cluster(t)      // c.Shards[0][1].Addr == "127.0.0.1:9202", .Name == "ch2"
//	db := c.NewDatabase(t)       // CREATE DATABASE … ON CLUSTER, dropped on every node at cleanup
//	_ = c.Remote()               // "127.0.0.1:9201,…" for remote('…', system.query_log)
//
// The 3-broker Kafka (`make kafka-cluster-up`; scripts/test.sh starts it when a
// test uses it): brokers 127.0.0.1:9192–9194, replication factor 3, min.insync.replicas=2:
//
//	brokers := testenv.KafkaCluster(t)     // []string{"127.0.0.1:9192", …}
//	topic := testenv.NewClusterTopic(t, 3) // replication factor 3, deleted at cleanup
//
// PostgreSQL and Debezium (`make cdc-up`; scripts/test.sh starts them when a
// test uses them): PostgreSQL 15 on 127.0.0.1:15432 with wal_level=logical, and a
// Kafka Connect 4.3 worker with Debezium's PostgreSQL connector 3.6 on the
// stack's Kafka, REST 127.0.0.1:8083:
//
//	pg := testenv.Postgres(t)          // fresh database, dropped (with its slots) at cleanup
//	pg.Exec(t, "CREATE TABLE t (id int PRIMARY KEY, v text)")
//	conn := pg.Conn(t)                 // pgx connection to it, closed at cleanup; pg.DSN for others
//	c := testenv.Debezium(t, pg, testenv.DebeziumConfig{Tables: []string{"t"}})
//	c.WaitStreaming(t)                 // snapshot done, changes stream (a marker row went through)
//	_ = c.Topic("t")                   // "<c.TopicPrefix>.public.t": JSON with schemas by default
//	c.Stop(t); c.Resume(t)             // or c.Restart(t); deleted, slot dropped at cleanup
//	base := testenv.ConnectFileSink(t) // the worker's REST URL, once it lists Connect's own
//	                                   // FileStreamSinkConnector (the REST API comparison)
//
// The first Postgres call of a test binary also removes what killed binaries
// left on the shared servers: test databases over three hours old, the
// connectors reading them and their replication slots.
//
// and for the security tests:
//
//	s := testenv.KafkaSASL(t)        // SASL_SSL listener 127.0.0.1:9094, its test CA, a client
//	                                 // certificate, user SASLUser/SASLPassword for PLAIN and SCRAM
//	pki := testenv.NewPKI(t)         // a throwaway CA and a certificate for 127.0.0.1
//	addr := testenv.CHTLSProxy(t, s, pki) // TLS in front of server s's native port
//	// CHUser/CHPassword: the test servers' user with a password
//
// Environment:
//
//	SINK_TEST_KAFKA       comma-separated brokers instead of 127.0.0.1:9092
//	SINK_TEST_CLICKHOUSE  18.16's native host:port instead of 127.0.0.1:9000
//	SINK_TEST_CLICKHOUSE26  26.9's native host:port instead of 127.0.0.1:19000
//	SINK_TEST_CLICKHOUSE_HTTP, SINK_TEST_CLICKHOUSE26_HTTP  their HTTP host:port
//	                      instead of 127.0.0.1:8123 and 127.0.0.1:18123
//	SINK_TEST_CLUSTER     a cluster node's native host:port instead of 127.0.0.1:9201
//	                      (the rest is read from its system.clusters)
//	SINK_TEST_KAFKA_CLUSTER  comma-separated brokers instead of 127.0.0.1:9192,9193,9194
//	SINK_TEST_KAFKA_SASL  SASL_SSL host:port instead of 127.0.0.1:9094
//	SINK_TEST_POSTGRES    PostgreSQL host:port instead of 127.0.0.1:15432 (user and
//	                      password sink, wal_level=logical)
//	SINK_TEST_CONNECT     the Kafka Connect worker's REST URL instead of http://127.0.0.1:8083
//	SINK_TEST_KAFKA_TLS   directory with ca.pem, client.pem, client.key instead of
//	                      the checkout's .stack/kafka/tls (scripts/stack.sh writes it)
//	SINK_REQUIRE_STACK=1  fail instead of skip when a server is not reachable;
//	                      `make test` and CI set it, so they cannot pass by
//	                      silently skipping every integration test.
//
// Names made by the helpers embed the test name, the time and random bits, so
// tests may run in parallel, and against a stack shared with other checkouts.
package testenv

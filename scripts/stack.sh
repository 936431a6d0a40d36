#!/usr/bin/env bash
# The local stack for integration tests, demos and benchmarks, without Docker:
#
#   ClickHouse  Debian's clickhouse-server 18.16, config from testdata/clickhouse/,
#               native 127.0.0.1:9000, HTTP 127.0.0.1:8123
#   ClickHouse  26.9, the engine of PyPI's chdb-core wheel (installed into a venv in
#               .cache/ch26/) serving clickhouse-local's listeners (scripts/ch26.py),
#               config from testdata/clickhouse26/, native 127.0.0.1:19000, HTTP 18123
#   Kafka       Apache Kafka 4.x (KRaft, one broker+controller node) assembled from
#               Maven Central by scripts/kafka/pom.xml, 127.0.0.1:9092 (controller 9093),
#               and SASL_SSL on 127.0.0.1:9094 (TLS from a throwaway CA generated into
#               .stack/kafka/tls/, client certificate required, SASL PLAIN/SCRAM) for
#               the security tests, and OAUTHBEARER on 127.0.0.1:9095 (SASL_PLAINTEXT;
#               tokens checked by Kafka's own JWT validator against the JWKS of the
#               token issuer below: signature, issuer, audience sink-stack-kafka;
#               re-authentication when a token expires)
#   Issuer      tools/tokenissuer, built from this checkout into .cache/tools/bin:
#               a test OpenID Connect issuer on http://127.0.0.1:9096 (client
#               credentials at /token, client sink secret sink-oauth-secret; JWKS
#               at /jwks; a control API for the tests at /control/); it starts
#               before Kafka, which will not start without its JWKS
#   Registry    Apicurio Registry 3.3 (in-memory storage) from Maven Central's
#               server distribution (scripts/registry/pom.xml), on Java 21+, its
#               Confluent-compatible API at http://127.0.0.1:8081/apis/ccompat/v7
#               (management interface 127.0.0.1:8082)
#
# The ClickHouse cluster (`scripts/stack.sh cluster up`, `make cluster-up`), for the
# tests, chaos scenarios and benchmarks about clusters only; `up` does not start it:
#
#   ZooKeeper   Debian's zookeeper package (3.8), one standalone node, 127.0.0.1:2181,
#               config from testdata/zookeeper/zoo.cfg
#   ClickHouse  four Debian clickhouse-server 18.16 processes (the same package as the
#               single 18.16 server), config from testdata/clickhouse-cluster/:
#                 node  shard  native  http  interserver
#                 ch1   1      9201    8201  9301
#                 ch2   1      9202    8202  9302
#                 ch3   2      9203    8203  9303
#                 ch4   2      9204    8204  9304
#               cluster sink_cluster = 2 shards x 2 replicas (internal_replication,
#               macros {shard} = 1|2 and {replica} = ch1..ch4, ON CLUSTER DDL through
#               ZooKeeper); cluster sink_cluster_nodes = the same four nodes, each its
#               own shard (ON CLUSTER DDL for Distributed tables, which Code 371 refuses
#               through sink_cluster, and remote() reads of every node)
#
# The ClickHouse 26.9 cluster (`scripts/stack.sh cluster26 up`, `make cluster26-up`),
# for the cluster tests of what works without replication; `up` does not start it:
#
#   ClickHouse  two 26.9 servers from the same chdb-core wheel as the single 26.9
#               server, config from testdata/clickhouse26-cluster/:
#                 node   shard  native  http
#                 c26n1  1      19201   18201
#                 c26n2  2      19202   18202
#               cluster sink26_cluster = 2 shards x 1 replica (weights 1, 1) and
#               sink26_weighted = the same with weights 1, 3. No Keeper: no
#               ReplicatedMergeTree, no ON CLUSTER (Code 392); Distributed tables,
#               synchronous Distributed inserts and non-replicated deduplication work
#
# The 3-broker Kafka (`scripts/stack.sh kafka-cluster up`, `make kafka-cluster-up`),
# for the fault drills on a replicated Kafka; `up` does not start it either:
#
#   Kafka       three KRaft nodes, each broker and controller, from the same jars as
#               the single broker (.cache/kafka-libs), config from
#               testdata/kafka-cluster/server.properties: brokers 127.0.0.1:9192,
#               9193, 9194, controllers 9195, 9196, 9197; topics get replication
#               factor 3 and min.insync.replicas=2; heap 320 MiB each
#
# The change-data-capture stack (`scripts/stack.sh cdc up`, `make cdc-up`), for the
# tests that drive PostgreSQL through Debezium; `up` does not start it, and it
# needs `up`'s Kafka:
#
#   PostgreSQL  Debian's postgresql-15, a cluster of its own (initdb) in
#               .stack/postgres/data run as the postgres OS user, config from
#               testdata/postgres/postgresql.conf: 127.0.0.1:15432 only,
#               wal_level=logical, 40 replication slots and WAL senders, fsync off;
#               user sink password sink (superuser, REPLICATION)
#   Connect     a Kafka Connect 4.3 distributed worker assembled from Maven Central
#               by scripts/connect/pom.xml into .cache/connect-libs/runtime, with
#               Debezium's PostgreSQL connector 3.6 (scripts/connect/debezium/pom.xml)
#               in its own plugin folder .cache/connect-libs/plugins/debezium-postgres;
#               config from testdata/connect/: Kafka 127.0.0.1:9092, internal topics
#               sink-connect-* with replication factor 1, REST 127.0.0.1:8083 only,
#               heap 256 MiB. Not 4.4: Debezium 3.6's task fails in a 4.4 worker
#               (NoClassDefFoundError org/apache/kafka/common/utils/Sanitizer)
#
# Usage: scripts/stack.sh up|down|status|logs
#        scripts/stack.sh cluster up|down|status|stop NODE|kill NODE
#        scripts/stack.sh cluster26 up|down|status|stop NODE|kill NODE
#        scripts/stack.sh kafka-cluster up|down|status
#        scripts/stack.sh cdc up|down|status
#
#   up      install what is missing (apt packages, Kafka jars, the chdb-core wheel,
#           the registry distribution), start all four servers and the token
#           issuer, wait until
#           they answer. Idempotent. If a healthy server (e.g. from another
#           checkout) already answers on the ports, it is reused. A port held by
#           something else is an error (one line on stderr, exit 1). A Kafka this
#           checkout started with an older testdata/kafka/server.properties is
#           restarted to apply it (a few seconds without a broker; its data stays).
#   down    stop only what this checkout started (pid files in .stack/).
#   status  versions, ports, and who started each; exit 1 if any is not answering.
#   logs    tail the servers' logs.
#   cluster up|down|status
#           the same for ZooKeeper and the four cluster nodes (state in
#           .stack/cluster-zk/ and .stack/cluster-ch1..4/); a node counts as
#           answering once it lists sink_cluster and reaches ZooKeeper.
#   cluster stop|kill ch1|ch2|ch3|ch4|zookeeper
#           for fault drills: stop one server this checkout started (SIGTERM,
#           waited for) or kill it (SIGKILL); `cluster up` brings it back.
#   cluster26 up|down|status|stop NODE|kill NODE
#           the same for the two 26.9 nodes (.stack/cluster26-c26n1, -c26n2); a
#           node counts as answering once it lists sink26_cluster.
#   kafka-cluster up|down|status
#           the same for the three Kafka nodes (.stack/kafka-cluster1..3/); a node
#           counts as answering once its metadata lists all three brokers.
#   cdc up|down|status
#           the same for PostgreSQL and the Kafka Connect worker (.stack/postgres/,
#           .stack/connect/); PostgreSQL counts as answering once user sink logs
#           in and wal_level is logical, the worker once GET /connector-plugins
#           lists PostgresConnector. `up` installs postgresql-15 when missing.
#
# State lives in .stack/ (data, logs, pid files, generated configs), the Kafka jars
# in .cache/kafka-libs/, the registry in .cache/apicurio/, the 26.9 engine in .cache/ch26/,
# Kafka Connect and Debezium in .cache/connect-libs/;
# all git-ignored. Environment knobs:
#   STACK_TIMEOUT   seconds to wait for each server to answer (default 120)
#   STACK_HEAP      Kafka JVM heap (default 512m)
#   STACK_REG_HEAP  schema registry JVM heap (default 256m)
#   STACK_REG_JAVA  java (21+) for the schema registry (default: newest in /usr/lib/jvm)
#   STACK_ZK_HEAP   ZooKeeper JVM heap (default 128m)
#   STACK_KC_HEAP   heap of each 3-broker Kafka node's JVM (default 320m)
#   STACK_CONNECT_HEAP  Kafka Connect worker JVM heap (default 256m)
#
# The stack's code is split by service under scripts/stack/, sourced below:
# common.sh (helpers), install.sh (packages, the 26.9 engine, Kafka jars,
# helm), clickhouse.sh, clickhouse26.sh, tokenissuer.sh, kafka.sh, registry.sh, cluster.sh,
# cluster26.sh, kafka-cluster.sh and cdc.sh (each server's check, start and
# wait; the clusters' and cdc's commands too). This file holds the commands
# of the four servers `up` starts and the entry point.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/stack/common.sh
source "$ROOT/scripts/stack/common.sh"
# shellcheck source=scripts/stack/install.sh
source "$ROOT/scripts/stack/install.sh"
# shellcheck source=scripts/stack/clickhouse.sh
source "$ROOT/scripts/stack/clickhouse.sh"
# shellcheck source=scripts/stack/clickhouse26.sh
source "$ROOT/scripts/stack/clickhouse26.sh"
# shellcheck source=scripts/stack/tokenissuer.sh
source "$ROOT/scripts/stack/tokenissuer.sh"
# shellcheck source=scripts/stack/kafka.sh
source "$ROOT/scripts/stack/kafka.sh"
# shellcheck source=scripts/stack/registry.sh
source "$ROOT/scripts/stack/registry.sh"
# shellcheck source=scripts/stack/cluster.sh
source "$ROOT/scripts/stack/cluster.sh"
# shellcheck source=scripts/stack/cluster26.sh
source "$ROOT/scripts/stack/cluster26.sh"
# shellcheck source=scripts/stack/kafka-cluster.sh
source "$ROOT/scripts/stack/kafka-cluster.sh"
# shellcheck source=scripts/stack/cdc.sh
source "$ROOT/scripts/stack/cdc.sh"

# One stack per machine (the ports are global), so one lock per machine too: two
# checkouts running `up` at once must not both try to start servers. lock NAME
# takes another lock for servers on other ports (`lock cluster`), so starting the
# cluster does not wait for a slow first `up` and the reverse.
lock() {
	local file=${TMPDIR:-/tmp}/sink-stack${1:+-$1}.lock
	exec 9>"$file"
	flock -w 600 9 || die "another stack.sh has held $file for 10 minutes"
}

cmd_up() {
	mkdir -p "$STACK_DIR"
	lock
	install_packages
	install_tools
	ch_check
	ch26_check
	issuer_check
	kafka_check
	reg_check
	# Start all before waiting for any: the startups overlap. Kafka's
	# OAUTHBEARER listener needs the issuer's JWKS when it starts.
	ch_start
	issuer_start
	ch26_start
	reg_start
	issuer_wait
	kafka_start
	ch_wait
	ch26_wait
	kafka_wait
	reg_wait
}

# stop NAME PID [SIGNAL]: SIGTERM (or SIGNAL), wait up to 30 s for a clean
# shutdown, then SIGKILL.
stop() {
	local name=$1 pid=$2
	kill -"${3:-TERM}" "$pid" 2>/dev/null || true
	for _ in $(seq 300); do
		[[ -e /proc/$pid ]] || break
		sleep 0.1
	done
	if [[ -e /proc/$pid ]]; then
		say "$name (pid $pid) did not exit within 30s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		while [[ -e /proc/$pid ]]; do sleep 0.1; done
	fi
	rm -f "$STACK_DIR/$name/$name.pid"
	say "$name stopped (pid $pid)"
}

cmd_down() {
	lock
	local pid
	if pid=$(kafka_ours); then stop kafka "$pid"; else
		rm -f "$KAFKA_DIR/kafka.pid"
		say "kafka: not started by this checkout, nothing to stop"
	fi
	issuer_down
	if pid=$(ch_ours); then stop clickhouse "$pid"; else
		rm -f "$CH_DIR/clickhouse.pid"
		say "clickhouse: not started by this checkout, nothing to stop"
	fi
	if pid=$(ch26_ours); then stop clickhouse26 "$pid"; else
		rm -f "$CH26_DIR/clickhouse26.pid"
		say "clickhouse26: not started by this checkout, nothing to stop"
	fi
	if pid=$(reg_ours); then stop registry "$pid"; else
		rm -f "$REG_DIR/registry.pid"
		say "registry: not started by this checkout, nothing to stop"
	fi
}

cmd_status() {
	local pid rc=0 who owner
	if ch_healthy; then
		if pid=$(ch_ours); then who="started by this checkout (pid $pid)"; else
			owner=$(port_owner "$CH_TCP")
			who="not started by this checkout ($owner)"
		fi
		say "clickhouse: up, version $(ch_version), native $HOST:$CH_TCP, http $HOST:$CH_HTTP, $who"
	else
		say "clickhouse: down (nothing answers SELECT 1 on $HOST:$CH_TCP)"
		rc=1
	fi
	if ch26_healthy; then
		if pid=$(ch26_ours); then who="started by this checkout (pid $pid)"; else
			owner=$(port_owner "$CH26_TCP")
			who="not started by this checkout ($owner)"
		fi
		say "clickhouse26: up, version $(ch_version "$CH26_TCP"), native $HOST:$CH26_TCP, http $HOST:$CH26_HTTP, $who"
	else
		say "clickhouse26: down (nothing answers SELECT 1 on $HOST:$CH26_TCP)"
		rc=1
	fi
	if kafka_healthy; then
		local sasl="SASL_SSL $HOST:$KAFKA_SASL"
		kafka_sasl_up || sasl="no SASL_SSL listener on $HOST:$KAFKA_SASL"
		if kafka_oauth_up; then sasl+=", OAUTHBEARER $HOST:$KAFKA_OAUTH"; else sasl+=", no OAUTHBEARER listener on $HOST:$KAFKA_OAUTH"; fi
		if pid=$(kafka_ours); then
			say "kafka: up, version $(kafka_version), broker $HOST:$KAFKA_PORT, $sasl, controller $HOST:$KAFKA_CTRL, started by this checkout (pid $pid)"
		else
			owner=$(port_owner "$KAFKA_PORT")
			pid=$(awk '{ print $2 }' <<<"$owner")
			say "kafka: up, version $(kafka_version "$pid"), broker $HOST:$KAFKA_PORT, $sasl, not started by this checkout ($owner)"
		fi
	else
		say "kafka: down (no metadata answer from $HOST:$KAFKA_PORT)"
		rc=1
	fi
	issuer_status || rc=1
	if reg_healthy; then
		if pid=$(reg_ours); then who="Apicurio Registry $(reg_version), started by this checkout (pid $pid)"; else
			who="not started by this checkout ($(port_owner "$REG_PORT"))"
		fi
		say "registry: up, http://$HOST:$REG_PORT$REG_API, $who"
	else
		say "registry: down (GET http://$HOST:$REG_PORT$REG_API/config does not answer)"
		rc=1
	fi
	return $rc
}

cmd_logs() {
	local logs=()
	for f in "$CH_DIR/log/clickhouse-server.log" "$CH_DIR/log/clickhouse-server.err.log" \
		"$CH26_DIR/log/clickhouse-server.err.log" "$CH26_DIR/log/stdout.log" "$KAFKA_DIR/kafka.log" \
		"$ISSUER_DIR/tokenissuer.log" "$REG_DIR/registry.log"; do
		[[ -f $f ]] && logs+=("$f")
	done
	((${#logs[@]})) || die "no logs in $STACK_DIR (has this checkout started the stack?)"
	exec tail -n 40 -F "${logs[@]}"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
logs) cmd_logs ;;
cluster) cmd_cluster "${2:-}" "${3:-}" ;;
cluster26) cmd_cluster26 "${2:-}" "${3:-}" ;;
kafka-cluster) cmd_kafka_cluster "${2:-}" ;;
cdc) cmd_cdc "${2:-}" ;;
*)
	echo "usage: $0 up|down|status|logs | cluster up|down|status | cluster26 up|down|status | kafka-cluster up|down|status | cdc up|down|status" >&2
	exit 2
	;;
esac

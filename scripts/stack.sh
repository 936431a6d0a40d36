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
#               the security tests
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
#           the registry distribution), start all four servers, wait until
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
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK_DIR=$ROOT/.stack
KAFKA_LIBS=$ROOT/.cache/kafka-libs
POM=$ROOT/scripts/kafka/pom.xml
TIMEOUT=${STACK_TIMEOUT:-120}
HEAP=${STACK_HEAP:-512m}

HOST=127.0.0.1
CH_TCP=9000
CH_HTTP=8123
CH26_TCP=19000
CH26_HTTP=18123
CH26_WHEEL=chdb-core==26.9.0
CH26_VENV=$ROOT/.cache/ch26
KAFKA_PORT=9092
KAFKA_CTRL=9093
KAFKA_SASL=9094

CH_DIR=$STACK_DIR/clickhouse
CH26_DIR=$STACK_DIR/clickhouse26
KAFKA_DIR=$STACK_DIR/kafka
KAFKA_TLS=$KAFKA_DIR/tls

say() { echo "stack: $*"; }
die() { echo "stack: $*" >&2; exit 1; }

# ---------------------------------------------------------------- helpers

# is_ours NAME MARKER: prints the pid from .stack/NAME/NAME.pid if that process is
# alive and its command line contains MARKER (so a recycled pid is not mistaken
# for our server).
is_ours() {
	local pidfile=$STACK_DIR/$1/$1.pid pid
	[[ -f $pidfile ]] || return 1
	pid=$(<"$pidfile")
	[[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$2" || return 1
	echo "$pid"
}
ch_ours() { is_ours clickhouse "$CH_DIR/config.xml"; }
ch26_ours() { is_ours clickhouse26 "$CH26_DIR/data"; }
kafka_ours() { is_ours kafka "$KAFKA_DIR/server.properties"; }

# port_busy PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null; }

# port_owner PORT: "pid N NAME" of the process listening on PORT, found via
# /proc (no dependency on ss/lsof being installed); "unknown owner" if not visible.
port_owner() {
	local hex inode fd pid
	hex=$(printf '%04X' "$1")
	while read -r inode; do
		for fd in /proc/[0-9]*/fd/*; do
			if [[ $(readlink "$fd" 2>/dev/null) == "socket:[$inode]" ]]; then
				pid=${fd#/proc/}
				pid=${pid%%/*}
				echo "pid $pid $(cat "/proc/$pid/comm" 2>/dev/null)"
				return 0
			fi
		done
	done < <(awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null)
	echo "unknown owner"
}

# ch_answers PORT: a ClickHouse server answers SELECT 1 on the native PORT.
ch_answers() {
	command -v clickhouse-client >/dev/null &&
		[[ $(timeout 5 clickhouse-client --host "$HOST" --port "$1" -q 'SELECT 1' 2>/dev/null) == 1 ]]
}
ch_healthy() { ch_answers "$CH_TCP"; }
ch26_healthy() { ch_answers "$CH26_TCP"; }

# A Kafka broker is healthy when it answers a metadata request and lists itself.
kafka_healthy() {
	command -v kcat >/dev/null &&
		timeout 10 kcat -L -b "$HOST:$KAFKA_PORT" -m 3 2>/dev/null | grep -q "broker .* at $HOST:$KAFKA_PORT"
}

ch_version() { timeout 5 clickhouse-client --host "$HOST" --port "${1:-$CH_TCP}" -q 'SELECT version()' 2>/dev/null || echo unknown; }

# kafka_version [PID]: from the kafka_2.13-X.jar on the classpath of our cache, or of
# the given (possibly foreign) broker process.
kafka_version() {
	local jars=() cp entry
	if [[ -n ${1:-} && -r /proc/$1/cmdline ]]; then
		cp=$(tr '\0' '\n' <"/proc/$1/cmdline" | grep -A1 -xE -- '-cp|-classpath' | tail -n1 || true)
		IFS=: read -ra entries <<<"$cp"
		for entry in "${entries[@]}"; do
			# shellcheck disable=SC2125 # the glob is expanded on the next line
			[[ $entry == *'*' ]] && entry=${entry%\*}kafka_2.13-*.jar
			# shellcheck disable=SC2206 # globbing wanted
			jars+=($entry)
		done
	else
		jars=("$KAFKA_LIBS"/kafka_2.13-*.jar)
	fi
	for entry in "${jars[@]}"; do
		if [[ -f $entry && $(basename "$entry") =~ ^kafka_2\.13-(.+)\.jar$ ]]; then
			echo "${BASH_REMATCH[1]}"
			return
		fi
	done
	echo unknown
}

# last_error LOG...: the newest error line of the given logs (the last log with one
# wins), else the last line of the last log; for one-line failure messages.
last_error() {
	local f line='' found
	for f in "$@"; do
		[[ -f $f ]] || continue
		found=$(grep -hE '<Error>|ERROR|Exception|Error:' "$f" | tail -n1 || true)
		[[ -n $found ]] && line=$found
	done
	if [[ -z $line ]]; then
		for f in "$@"; do [[ -f $f ]] && line=$(tail -n1 "$f"); done
	fi
	echo "${line:0:300}"
}

# wait_until WHAT ALIVE HEALTHY LOG...: poll until HEALTHY; fail early if the process
# we started died (ALIVE fails), or after TIMEOUT seconds.
wait_until() {
	local what=$1 alive=$2 healthy=$3 deadline=$((SECONDS + TIMEOUT))
	shift 3
	until $healthy; do
		if ! $alive >/dev/null; then
			die "$what exited during startup: $(last_error "$@") (see ${*: -1})"
		fi
		((SECONDS < deadline)) || die "$what did not answer within ${TIMEOUT}s (see ${*: -1})"
		sleep 0.5
	done
}

# render TEMPLATE OUT: copy a config template, pointing @STACK_DIR@ at .stack/.
render() { sed "s|@STACK_DIR@|$STACK_DIR|g" "$1" >"$2"; }

# config_changed TEMPLATE RENDERED: the template no longer renders to what the
# running server was started with.
config_changed() { ! sed "s|@STACK_DIR@|$STACK_DIR|g" "$1" | cmp -s - "$2"; }

# stale_config TEMPLATE RENDERED WHAT: note when a running server was started with
# an older version of its config template.
stale_config() {
	if config_changed "$1" "$2"; then
		say "note: ${1#"$ROOT"/} changed since $3 started; run \`make stack-down stack-up\` to apply it"
	fi
}

# launch NAME LOG CMD...: start CMD detached (own session, no stdin, output to LOG)
# so it outlives make and a closed terminal; the inner shell writes its own pid and
# then execs CMD, so the pid file holds the server's pid even if setsid forks.
launch() {
	local name=$1 log=$2
	shift 2
	rm -f "$STACK_DIR/$name/$name.pid"
	# 9>&-: do not hand the stack lock (fd 9) to the server, or it would hold it forever.
	# shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
	setsid bash -c 'echo $$ >"$0"; exec "$@"' "$STACK_DIR/$name/$name.pid" "$@" </dev/null >>"$log" 2>&1 9>&- &
	# Wait for the pid file (written within milliseconds).
	for _ in $(seq 50); do [[ -s $STACK_DIR/$name/$name.pid ]] && return; sleep 0.1; done
	die "could not start $name (see $log)"
}

# ---------------------------------------------------------------- install

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# install_packages [EXTRA...]: installs the missing Debian packages the stack needs,
# and the EXTRA ones (`cluster up` adds zookeeper). apt-get update only runs when
# something is missing.
install_packages() {
	local missing=() sudo=() pkg log=$STACK_DIR/install.log policy=/usr/sbin/policy-rc.d
	for pkg in clickhouse-server clickhouse-client kcat "$@"; do
		pkg_installed "$pkg" || missing+=("$pkg")
	done
	command -v java >/dev/null || missing+=(default-jre-headless)
	command -v mvn >/dev/null || missing+=(maven)
	# promtool checks and unit-tests deploy/prometheus's alert rules.
	command -v promtool >/dev/null || missing+=(prometheus)
	# The status page's browser test renders it in headless Chromium.
	command -v chromium >/dev/null || missing+=(chromium)
	((${#missing[@]})) || return 0

	[[ $EUID -eq 0 ]] || sudo=(sudo)
	say "installing ${missing[*]} (log: $log)"
	# The package's postinst would start the Debian clickhouse-server service, which
	# would take port 9000 with the system config. policy-rc.d exit 101 = "do not start
	# services"; only put ours in place if the machine has none, and remove it after.
	local own_policy=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod +x "$policy"
		own_policy=1
	fi
	local rc=0
	{
		"${sudo[@]}" apt-get update -q &&
			"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends "${missing[@]}"
	} >>"$log" 2>&1 || rc=$?
	[[ -z $own_policy ]] || "${sudo[@]}" rm -f "$policy"
	((rc == 0)) || die "installing ${missing[*]} failed (apt-get exit $rc; see $log)"

	# On a systemd host the unit is still enabled for the next boot, where it would
	# hold port 9000 with Debian's config; this stack starts its own server instead.
	if [[ " ${missing[*]} " == *" clickhouse-server "* && -d /run/systemd/system ]]; then
		"${sudo[@]}" systemctl disable --now clickhouse-server >>"$log" 2>&1 || true
	fi
}

# Installs the chdb-core wheel (ClickHouse 26.9's engine, about 560 MB) into a venv
# in .cache/ch26 once; pandas/pyarrow are only needed for chdb's Python API, not
# for serving, hence --no-deps. A stamp with the wheel's pin marks a complete install.
install_ch26() {
	local stamp=$CH26_VENV/.installed log=$STACK_DIR/ch26-install.log
	[[ -f $stamp && $(<"$stamp") == "$CH26_WHEEL" ]] && return 0
	command -v python3 >/dev/null || die "python3 is needed for ClickHouse 26.9 (chdb-core)"
	say "installing $CH26_WHEEL into ${CH26_VENV#"$ROOT"/} (log: $log)"
	rm -rf "$CH26_VENV"
	mkdir -p "$(dirname "$CH26_VENV")"
	if ! python3 -m venv "$CH26_VENV" >"$log" 2>&1; then
		# Debian splits ensurepip into python3-venv (python3.N-venv).
		local sudo=()
		[[ $EUID -eq 0 ]] || sudo=(sudo)
		{
			"${sudo[@]}" apt-get update -q &&
				"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv
		} >>"$log" 2>&1 || die "python3 -m venv failed and installing python3-venv failed (see $log)"
		rm -rf "$CH26_VENV"
		python3 -m venv "$CH26_VENV" >>"$log" 2>&1 || die "python3 -m venv failed (see $log)"
	fi
	"$CH26_VENV/bin/pip" install -q --disable-pip-version-check --no-deps "$CH26_WHEEL" >>"$log" 2>&1 ||
		{ rm -rf "$CH26_VENV"; die "pip install $CH26_WHEEL failed (see $log)"; }
	echo "$CH26_WHEEL" >"$stamp"
}

# Copies Kafka and its dependencies from Maven Central into .cache/kafka-libs once.
# A checksum of the pom marks a complete copy, so a version bump refetches.
fetch_kafka_libs() {
	local sum stamp=$KAFKA_LIBS/.pom.sha256 log=$STACK_DIR/maven.log tmp
	sum=$(sha256sum "$POM" | cut -d' ' -f1)
	[[ -f $stamp && $(<"$stamp") == "$sum" ]] && return 0
	say "downloading Kafka jars with Maven (log: $log)"
	tmp=$KAFKA_LIBS.tmp.$$
	rm -rf "$tmp"
	mvn -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$tmp" >"$log" 2>&1 ||
		{ rm -rf "$tmp"; die "downloading the Kafka jars failed (see $log)"; }
	ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || { rm -rf "$tmp"; die "Maven produced no kafka_2.13 jar (see $log)"; }
	echo "$sum" >"$tmp/.pom.sha256"
	rm -rf "$KAFKA_LIBS"
	mkdir -p "$(dirname "$KAFKA_LIBS")"
	mv "$tmp" "$KAFKA_LIBS"
}

# ---------------------------------------------------------------- clickhouse

CH_STATE= # running (ours) | reused (foreign, healthy) | absent -> started

# not_ours_state HEALTHY WHAT TCP HTTP: for a server this checkout did not start,
# prints "reused" when one already answers on TCP, "absent" when both ports are
# free, and fails when something else holds a port.
not_ours_state() {
	local healthy=$1 what=$2 tcp=$3 http=$4 port
	if $healthy; then
		say "reusing the $what that already answers on $HOST:$tcp (not started by this checkout)" >&2
		echo reused
		return
	fi
	for port in $tcp $http; do
		if port_busy "$port"; then
			die "port $port is in use by something that is not a ClickHouse server ($(port_owner "$port"))"
		fi
	done
	echo absent
}

# ch_check decides what `up` does with ClickHouse; it fails on a foreign port holder
# before anything is started, so a failed `up` leaves nothing half-running.
ch_check() {
	if ch_ours >/dev/null; then
		CH_STATE=running
		# users.xml is re-read by a running server: apply edits now. config.xml
		# needs a restart, so only say that it changed.
		render "$ROOT/testdata/clickhouse/users.xml" "$CH_DIR/users.xml"
		stale_config "$ROOT/testdata/clickhouse/config.xml" "$CH_DIR/config.xml" ClickHouse
		return
	fi
	CH_STATE=$(not_ours_state ch_healthy ClickHouse "$CH_TCP" "$CH_HTTP") || exit 1
}

ch_start() {
	[[ $CH_STATE == absent ]] || return 0
	mkdir -p "$CH_DIR"/{data,tmp,log,user_files,format_schemas}
	render "$ROOT/testdata/clickhouse/config.xml" "$CH_DIR/config.xml"
	render "$ROOT/testdata/clickhouse/users.xml" "$CH_DIR/users.xml"
	# cwd = .stack/clickhouse: 18.16 writes its preprocessed configs beside the config
	# file and may resolve stray relative paths against the cwd; keep both in .stack/.
	(cd "$CH_DIR" && launch clickhouse "$CH_DIR/log/stdout.log" \
		clickhouse-server --config-file="$CH_DIR/config.xml")
	CH_STATE=started
}

ch_wait() {
	[[ $CH_STATE == reused ]] && return
	wait_until ClickHouse ch_ours ch_healthy "$CH_DIR/log/stdout.log" "$CH_DIR/log/clickhouse-server.err.log"
	if [[ $CH_STATE == running ]]; then
		say "ClickHouse already running (pid $(ch_ours)), $HOST:$CH_TCP"
	else
		say "ClickHouse $(ch_version) started (pid $(ch_ours)), native $HOST:$CH_TCP, http $HOST:$CH_HTTP"
	fi
}

# ---------------------------------------------------------------- clickhouse 26.9

CH26_STATE= # as CH_STATE

ch26_check() {
	if ch26_ours >/dev/null; then
		CH26_STATE=running
		stale_config "$ROOT/testdata/clickhouse26/config.xml" "$CH26_DIR/config.xml" "ClickHouse 26.9"
		stale_config "$ROOT/testdata/clickhouse26/users.xml" "$CH26_DIR/users.xml" "ClickHouse 26.9"
		return
	fi
	CH26_STATE=$(not_ours_state ch26_healthy "ClickHouse 26.9" "$CH26_TCP" "$CH26_HTTP") || exit 1
}

ch26_start() {
	[[ $CH26_STATE == absent ]] || return 0
	install_ch26
	mkdir -p "$CH26_DIR"/{data,log}
	render "$ROOT/testdata/clickhouse26/config.xml" "$CH26_DIR/config.xml"
	render "$ROOT/testdata/clickhouse26/users.xml" "$CH26_DIR/users.xml"
	launch clickhouse26 "$CH26_DIR/log/stdout.log" \
		"$CH26_VENV/bin/python" "$ROOT/scripts/ch26.py" "$CH26_DIR" "$CH26_DIR/data"
	CH26_STATE=started
}

ch26_wait() {
	[[ $CH26_STATE == reused ]] && return
	wait_until "ClickHouse 26.9" ch26_ours ch26_healthy "$CH26_DIR/log/clickhouse-server.err.log" "$CH26_DIR/log/stdout.log"
	if [[ $CH26_STATE == running ]]; then
		say "ClickHouse 26.9 already running (pid $(ch26_ours)), $HOST:$CH26_TCP"
	else
		say "ClickHouse $(ch_version "$CH26_TCP") started (pid $(ch26_ours)), native $HOST:$CH26_TCP, http $HOST:$CH26_HTTP"
	fi
}

# ---------------------------------------------------------------- kafka

KAFKA_STATE= # as CH_STATE

# The JVM command line for Kafka's main classes: a small heap (the machine has 2 cores
# and runs ClickHouse, the tests and the sink too), our log4j2 config, the cached jars.
kafka_java() {
	KAFKA_JAVA=(java -Xmx"$HEAP" -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
		-Dlog4j2.configurationFile="$ROOT/testdata/kafka/log4j2.properties"
		-cp "$KAFKA_LIBS/*")
}

# A KRaft cluster id is 16 random bytes in URL-safe base64 without padding (what
# `kafka-storage random-uuid` prints); one that starts with '-' would read as an option.
cluster_id() {
	local id=-
	while [[ $id == -* ]]; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
	done
	echo "$id"
}

kafka_check() {
	local pid
	if pid=$(kafka_ours); then
		KAFKA_STATE=running
		# A new listener (or any other broker setting) needs a restart. Ours, so
		# restarting is ours to do; other users of the stack see the broker gone
		# for a few seconds, which their clients ride out as a reconnect.
		if config_changed "$ROOT/testdata/kafka/server.properties" "$KAFKA_DIR/server.properties"; then
			KAFKA_STATE=restart
		fi
		return
	fi
	if kafka_healthy; then
		KAFKA_STATE=reused
		say "reusing the Kafka broker that already answers on $HOST:$KAFKA_PORT (not started by this checkout)"
		return
	fi
	for port in $KAFKA_PORT $KAFKA_CTRL $KAFKA_SASL; do
		if port_busy "$port"; then
			die "port $port is in use by something that is not a Kafka broker ($(port_owner "$port"))"
		fi
	done
	KAFKA_STATE=absent
}

# kafka_tls writes the SASL_SSL listener's TLS material into .stack/kafka/tls/ unless
# a valid set is there: a throwaway CA (ca.pem, ca.key), the broker's certificate
# for 127.0.0.1/localhost/kafka.sink.test (broker.pem, broker.key, and both in
# broker-keystore.pem, the PEM key store Kafka reads) and a client certificate
# for CN=sink (client.pem, client.key). Unencrypted keys: this is test material
# for a loopback broker, readable only by this user. Regenerated when any file is
# missing or a certificate expires within a day.
kafka_tls() {
	local d=$KAFKA_TLS f ok=1 log=$KAFKA_DIR/tls.log
	for f in ca.pem ca.key broker.pem broker.key broker-keystore.pem client.pem client.key; do
		[[ -s $d/$f ]] || ok=
	done
	for f in ca.pem broker.pem client.pem; do
		[[ -n $ok ]] && { openssl x509 -checkend 86400 -noout -in "$d/$f" >/dev/null 2>&1 || ok=; }
	done
	[[ -n $ok ]] && return 0
	command -v openssl >/dev/null || die "openssl is needed to make the Kafka SASL_SSL listener's certificates (apt-get install openssl)"
	say "generating a test CA and certificates for Kafka's SASL_SSL listener in ${d#"$ROOT"/}"
	local tmp=$d.tmp.$$
	rm -rf "$tmp"
	mkdir -p "$tmp"
	chmod 700 "$tmp"
	{
		openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 825 \
			-subj "/CN=sink local stack test CA" \
			-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
			-keyout "$tmp/ca.key" -out "$tmp/ca.pem" &&
			tls_leaf "$tmp" broker 127.0.0.1 serverAuth \
				'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kafka.sink.test' &&
			tls_leaf "$tmp" client sink clientAuth ''
	} >"$log" 2>&1 || { rm -rf "$tmp"; die "generating TLS material failed (see $log)"; }
	cat "$tmp/broker.key" "$tmp/broker.pem" >"$tmp/broker-keystore.pem"
	rm -rf "$d"
	mv "$tmp" "$d"
}

# tls_leaf DIR NAME CN USAGE EXTRA: a key and a certificate signed by DIR/ca.pem.
tls_leaf() {
	local dir=$1 name=$2 cn=$3 usage=$4 extra=$5
	openssl req -new -newkey rsa:2048 -nodes -subj "/CN=$cn" \
		-keyout "$dir/$name.key" -out "$dir/$name.csr" &&
		openssl x509 -req -sha256 -days 825 -in "$dir/$name.csr" \
			-CA "$dir/ca.pem" -CAkey "$dir/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
			-extfile <(printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n%s\n' "$usage" "$extra") \
			-out "$dir/$name.pem" &&
		rm -f "$dir/$name.csr"
}

kafka_start() {
	local pid
	case $KAFKA_STATE in
	absent) ;;
	restart)
		pid=$(kafka_ours) || true
		say "restarting Kafka (pid $pid) to apply testdata/kafka/server.properties; clients reconnect in a few seconds"
		[[ -z $pid ]] || stop kafka "$pid"
		;;
	*) return 0 ;;
	esac
	kafka_tls
	fetch_kafka_libs
	kafka_java
	mkdir -p "$KAFKA_DIR/data"
	render "$ROOT/testdata/kafka/server.properties" "$KAFKA_DIR/server.properties"
	# KRaft needs its log dir formatted with a cluster id once; later starts reuse it.
	if [[ ! -f $KAFKA_DIR/data/meta.properties ]]; then
		"${KAFKA_JAVA[@]}" kafka.tools.StorageTool format -t "$(cluster_id)" -c "$KAFKA_DIR/server.properties" \
			>>"$KAFKA_DIR/kafka.log" 2>&1 || die "formatting Kafka storage failed (see $KAFKA_DIR/kafka.log)"
	fi
	(cd "$KAFKA_DIR" && launch kafka "$KAFKA_DIR/kafka.log" \
		"${KAFKA_JAVA[@]}" kafka.Kafka "$KAFKA_DIR/server.properties")
	KAFKA_STATE=started
}

# The SASL_SSL listener opens together with the PLAINTEXT one; a broker started
# before it existed has none (see kafka_check).
kafka_sasl_up() { port_busy "$KAFKA_SASL"; }
kafka_ready() { kafka_healthy && kafka_sasl_up; }

kafka_wait() {
	[[ $KAFKA_STATE == reused ]] && return
	wait_until Kafka kafka_ours kafka_ready "$KAFKA_DIR/kafka.log"
	if [[ $KAFKA_STATE == running ]]; then
		say "Kafka already running (pid $(kafka_ours)), $HOST:$KAFKA_PORT, SASL_SSL $HOST:$KAFKA_SASL"
	else
		say "Kafka $(kafka_version) started (pid $(kafka_ours)), broker $HOST:$KAFKA_PORT, SASL_SSL $HOST:$KAFKA_SASL (CA ${KAFKA_TLS#"$ROOT"/}/ca.pem), controller $HOST:$KAFKA_CTRL"
	fi
}

# ---------------------------------------------------------------- schema registry

REG_PORT=8081
REG_API=/apis/ccompat/v7
REG_DIR=$STACK_DIR/registry
REG_HOME=$ROOT/.cache/apicurio
REG_POM=$ROOT/scripts/registry/pom.xml
REG_HEAP=${STACK_REG_HEAP:-256m}
REG_STATE= # as CH_STATE

REG_MGMT=8082 # Quarkus's management interface (default 0.0.0.0:9000, ClickHouse's port)

reg_ours() { is_ours registry "$REG_HOME/quarkus-run.jar"; }

# reg_java: a java of version 21 or newer (Apicurio 3.3 is compiled for 21;
# Debian bookworm's default is 17): STACK_REG_JAVA, else the newest JDK in
# /usr/lib/jvm, else java on the PATH.
reg_java() {
	local j v candidates=()
	[[ -n ${STACK_REG_JAVA:-} ]] && candidates+=("$STACK_REG_JAVA")
	for j in /usr/lib/jvm/*/bin/java; do [[ -x $j ]] && candidates+=("$j"); done
	command -v java >/dev/null && candidates+=("$(command -v java)")
	for j in "${candidates[@]}"; do
		v=$("$j" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
		if [[ $v =~ ^[0-9]+$ ]] && ((v >= 21)); then
			echo "$j"
			return 0
		fi
	done
	return 1
}
# Healthy: the Confluent-compatible API answers GET /config.
reg_healthy() { timeout 5 curl -fsS -o /dev/null "http://$HOST:$REG_PORT$REG_API/config" 2>/dev/null; }
reg_version() { sed -n 's/^version=//p' "$REG_HOME/.version" 2>/dev/null || echo unknown; }

# Unpacks Apicurio's server distribution into .cache/apicurio once; a
# checksum of the pom marks a complete unpack, so a version bump refetches.
fetch_registry() {
	local sum stamp=$REG_HOME/.pom.sha256 log=$STACK_DIR/maven-registry.log tmp tgz
	sum=$(sha256sum "$REG_POM" | cut -d' ' -f1)
	[[ -f $stamp && $(<"$stamp") == "$sum" ]] && return 0
	say "downloading Apicurio Registry with Maven (log: $log)"
	tmp=$REG_HOME.tmp.$$
	rm -rf "$tmp"
	mkdir -p "$tmp/dl"
	mvn -B -f "$REG_POM" dependency:copy-dependencies -DoutputDirectory="$tmp/dl" >"$log" 2>&1 ||
		{ rm -rf "$tmp"; die "downloading Apicurio Registry failed (see $log)"; }
	tgz=$(compgen -G "$tmp/dl/apicurio-registry-app-*-all.tar.gz" | head -n1 || true)
	[[ -n $tgz ]] || { rm -rf "$tmp"; die "Maven produced no apicurio-registry-app tar.gz (see $log)"; }
	tar -xzf "$tgz" -C "$tmp" || { rm -rf "$tmp"; die "unpacking $tgz failed"; }
	[[ -f $tmp/quarkus-run.jar ]] || { rm -rf "$tmp"; die "$(basename "$tgz") holds no quarkus-run.jar"; }
	basename "$tgz" | sed -E 's/^apicurio-registry-app-(.*)-all\.tar\.gz$/version=\1/' >"$tmp/.version"
	rm -rf "$tmp/dl"
	echo "$sum" >"$tmp/.pom.sha256"
	rm -rf "$REG_HOME"
	mv "$tmp" "$REG_HOME"
}

reg_check() {
	if reg_ours >/dev/null; then
		REG_STATE=running
		return
	fi
	if reg_healthy; then
		REG_STATE=reused
		say "reusing the schema registry that already answers on $HOST:$REG_PORT (not started by this checkout)"
		return
	fi
	for port in $REG_PORT $REG_MGMT; do
		if port_busy "$port"; then
			die "port $port is in use by something that is not a schema registry ($(port_owner "$port"))"
		fi
	done
	REG_STATE=absent
}

reg_start() {
	[[ $REG_STATE == absent ]] || return 0
	local java
	java=$(reg_java) || die "Apicurio Registry $(reg_version) needs Java 21 or newer and none was found (/usr/lib/jvm, PATH); install one or set STACK_REG_JAVA"
	fetch_registry
	mkdir -p "$REG_DIR"
	# In-memory storage (the distribution's default): schemas last as long as
	# the process, which is what tests want. Loopback only; no auth.
	(cd "$REG_DIR" && launch registry "$REG_DIR/registry.log" \
		"$java" -Xmx"$REG_HEAP" -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError -XX:TieredStopAtLevel=1 \
		-Dquarkus.http.host="$HOST" -Dquarkus.http.port="$REG_PORT" \
		-Dquarkus.management.host="$HOST" -Dquarkus.management.port="$REG_MGMT" \
		-jar "$REG_HOME/quarkus-run.jar")
	REG_STATE=started
}

reg_wait() {
	[[ $REG_STATE == reused ]] && return
	wait_until "Schema registry" reg_ours reg_healthy "$REG_DIR/registry.log"
	if [[ $REG_STATE == running ]]; then
		say "schema registry already running (pid $(reg_ours)), http://$HOST:$REG_PORT$REG_API"
	else
		say "Apicurio Registry $(reg_version) started (pid $(reg_ours)), http://$HOST:$REG_PORT$REG_API"
	fi
}

# ---------------------------------------------------------------- clickhouse cluster

# `stack.sh cluster up|down|status`: ZooKeeper and four ClickHouse 18.16 nodes
# forming sink_cluster (see the header). Separate from `up`: only the tests,
# chaos scenarios and benchmarks about clusters need it.
ZK_PORT=2181
ZK_DIR=$STACK_DIR/cluster-zk
ZK_HEAP=${STACK_ZK_HEAP:-128m}
CLUSTER_NODES=(ch1 ch2 ch3 ch4)
declare -A NODE_SHARD=([ch1]=1 [ch2]=1 [ch3]=2 [ch4]=2)
declare -A NODE_TCP=([ch1]=9201 [ch2]=9202 [ch3]=9203 [ch4]=9204)
declare -A NODE_HTTP=([ch1]=8201 [ch2]=8202 [ch3]=8203 [ch4]=8204)
declare -A NODE_INTER=([ch1]=9301 [ch2]=9302 [ch3]=9303 [ch4]=9304)
declare -A NODE_STATE=() # per node, as CH_STATE
ZK_STATE=

zk_ours() { is_ours cluster-zk "$ZK_DIR/zoo.cfg"; }
# zk_srvr: ZooKeeper's answer to the four-letter word srvr (version, mode).
zk_srvr() {
	# shellcheck disable=SC2016 # $0 and $1 belong to the inner shell
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"; printf srvr >&3; cat <&3' "$HOST" "$ZK_PORT" 2>/dev/null
}
# ZooKeeper serves requests once srvr reports a mode (ruok answers imok earlier,
# while it is still loading its database).
zk_healthy() { zk_srvr | grep -qE '^Mode: (standalone|leader|follower)'; }
zk_version() { zk_srvr | sed -n 's/^Zookeeper version: \([^-,]*\).*/\1/p' | grep . || echo unknown; }

node_dir() { echo "$STACK_DIR/cluster-$1"; }
node_ours() { is_ours "cluster-$1" "$(node_dir "$1")/config.xml"; }
# node_healthy NODE: the node answers, defines sink_cluster with its 4 replicas
# and reaches ZooKeeper (replicated tables and ON CLUSTER need all three).
node_healthy() {
	command -v clickhouse-client >/dev/null &&
		[[ $(timeout 5 clickhouse-client --host "$HOST" --port "${NODE_TCP[$1]}" -q \
			"SELECT (SELECT count() FROM system.clusters WHERE cluster = 'sink_cluster'), (SELECT count() > 0 FROM system.zookeeper WHERE path = '/')" \
			2>/dev/null) == $'4\t1' ]]
}

# render_node NODE TEMPLATE OUT: a cluster config template with the node's
# name, shard and ports filled in.
render_node() {
	sed -e "s|@STACK_DIR@|$STACK_DIR|g" -e "s|@NODE@|$1|g" -e "s|@SHARD@|${NODE_SHARD[$1]}|g" \
		-e "s|@TCP@|${NODE_TCP[$1]}|g" -e "s|@HTTP@|${NODE_HTTP[$1]}|g" \
		-e "s|@INTERSERVER@|${NODE_INTER[$1]}|g" "$2" >"$3"
}

zk_check() {
	if zk_ours >/dev/null; then
		ZK_STATE=running
		if config_changed "$ROOT/testdata/zookeeper/zoo.cfg" "$ZK_DIR/zoo.cfg"; then
			say "note: testdata/zookeeper/zoo.cfg changed since ZooKeeper started; run \`scripts/stack.sh cluster down\` and \`cluster up\` to apply it"
		fi
		return
	fi
	if zk_healthy; then
		ZK_STATE=reused
		say "reusing the ZooKeeper that already answers on $HOST:$ZK_PORT (not started by this checkout)"
		return
	fi
	port_busy "$ZK_PORT" && die "port $ZK_PORT is in use by something that is not ZooKeeper ($(port_owner "$ZK_PORT"))"
	ZK_STATE=absent
}

# ZooKeeper's jars come from Debian's zookeeper package (its manifest names its
# dependencies); slf4j-simple, when installed, makes it log to stderr, else it
# logs nothing.
zk_start() {
	[[ $ZK_STATE == absent ]] || return 0
	local cp=/usr/share/java/zookeeper.jar
	[[ -f $cp ]] || die "$cp is missing (Debian package zookeeper)"
	[[ -f /usr/share/java/slf4j-simple.jar ]] && cp+=:/usr/share/java/slf4j-simple.jar
	mkdir -p "$ZK_DIR/data"
	render "$ROOT/testdata/zookeeper/zoo.cfg" "$ZK_DIR/zoo.cfg"
	(cd "$ZK_DIR" && launch cluster-zk "$ZK_DIR/zookeeper.log" \
		java -Xmx"$ZK_HEAP" -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
		-Dorg.slf4j.simpleLogger.showDateTime=true -cp "$cp" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$ZK_DIR/zoo.cfg")
	ZK_STATE=started
}

zk_wait() {
	[[ $ZK_STATE == reused ]] && return
	wait_until ZooKeeper zk_ours zk_healthy "$ZK_DIR/zookeeper.log"
	if [[ $ZK_STATE == running ]]; then
		say "ZooKeeper already running (pid $(zk_ours)), $HOST:$ZK_PORT"
	else
		say "ZooKeeper $(zk_version) started (pid $(zk_ours)), $HOST:$ZK_PORT"
	fi
}

node_check() {
	local n=$1 d port
	d=$(node_dir "$n")
	if node_ours "$n" >/dev/null; then
		NODE_STATE[$n]=running
		render_node "$n" "$ROOT/testdata/clickhouse-cluster/users.xml" "$d/users.xml" # re-read live
		if ! render_node "$n" "$ROOT/testdata/clickhouse-cluster/config.xml" /dev/stdout | cmp -s - "$d/config.xml"; then
			say "note: testdata/clickhouse-cluster/config.xml changed since $n started; run \`scripts/stack.sh cluster down\` and \`cluster up\` to apply it"
		fi
		return
	fi
	if node_healthy "$n"; then
		NODE_STATE[$n]=reused
		say "reusing the cluster node $n that already answers on $HOST:${NODE_TCP[$n]} (not started by this checkout)"
		return
	fi
	for port in ${NODE_TCP[$n]} ${NODE_HTTP[$n]} ${NODE_INTER[$n]}; do
		if port_busy "$port"; then
			die "port $port (cluster node $n) is in use by something that is not a node of sink_cluster ($(port_owner "$port"))"
		fi
	done
	NODE_STATE[$n]=absent
}

node_start() {
	local n=$1 d
	[[ ${NODE_STATE[$n]} == absent ]] || return 0
	d=$(node_dir "$n")
	mkdir -p "$d"/{data,tmp,log,user_files,format_schemas}
	render_node "$n" "$ROOT/testdata/clickhouse-cluster/config.xml" "$d/config.xml"
	render_node "$n" "$ROOT/testdata/clickhouse-cluster/users.xml" "$d/users.xml"
	# A node killed in the middle of a replicated operation (the chaos drills
	# do it on purpose) may hold parts ZooKeeper does not list, and 18.16 then
	# refuses to start ("The local set of parts … doesn't look like the set of
	# parts in ZooKeeper"). This flag, consumed at startup, makes it move such
	# parts to detached/ and fetch the rest from the other replica, as an
	# operator would; on a clean node it changes nothing.
	mkdir -p "$d/data/flags"
	touch "$d/data/flags/force_restore_data"
	(cd "$d" && launch "cluster-$n" "$d/log/stdout.log" clickhouse-server --config-file="$d/config.xml")
	NODE_STATE[$n]=started
}

node_wait() {
	local n=$1 d
	[[ ${NODE_STATE[$n]} == reused ]] && return
	d=$(node_dir "$n")
	# shellcheck disable=SC2317 # called indirectly by wait_until
	alive() { node_ours "$n"; }
	# shellcheck disable=SC2317
	healthy() { node_healthy "$n"; }
	wait_until "cluster node $n" alive healthy "$d/log/stdout.log" "$d/log/clickhouse-server.err.log"
	if [[ ${NODE_STATE[$n]} == running ]]; then
		say "cluster node $n already running (pid $(node_ours "$n")), native $HOST:${NODE_TCP[$n]}"
	else
		say "cluster node $n (shard ${NODE_SHARD[$n]}) started (pid $(node_ours "$n")), native $HOST:${NODE_TCP[$n]}, http $HOST:${NODE_HTTP[$n]}, interserver $HOST:${NODE_INTER[$n]}"
	fi
}

cluster_up() {
	mkdir -p "$STACK_DIR"
	lock cluster
	install_packages zookeeper
	local n
	zk_check
	for n in "${CLUSTER_NODES[@]}"; do node_check "$n"; done
	# The nodes open their ZooKeeper session at startup: ZooKeeper first.
	zk_start
	zk_wait
	for n in "${CLUSTER_NODES[@]}"; do node_start "$n"; done
	for n in "${CLUSTER_NODES[@]}"; do node_wait "$n"; done
}

cluster_down() {
	lock cluster
	local n pid
	# The nodes stop in parallel (18.16 takes a second or two each).
	for n in "${CLUSTER_NODES[@]}"; do
		if pid=$(node_ours "$n"); then stop "cluster-$n" "$pid" & else
			rm -f "$(node_dir "$n")/cluster-$n.pid"
			say "cluster node $n: not started by this checkout, nothing to stop"
		fi
	done
	wait
	if pid=$(zk_ours); then stop cluster-zk "$pid"; else
		rm -f "$ZK_DIR/cluster-zk.pid"
		say "zookeeper: not started by this checkout, nothing to stop"
	fi
}

cluster_status() {
	local n pid rc=0 who
	if zk_healthy; then
		if pid=$(zk_ours); then who="started by this checkout (pid $pid)"; else
			who="not started by this checkout ($(port_owner "$ZK_PORT"))"
		fi
		say "zookeeper: up, version $(zk_version), $HOST:$ZK_PORT, $who"
	else
		say "zookeeper: down (srvr on $HOST:$ZK_PORT reports no serving mode)"
		rc=1
	fi
	for n in "${CLUSTER_NODES[@]}"; do
		if node_healthy "$n"; then
			if pid=$(node_ours "$n"); then who="started by this checkout (pid $pid)"; else
				who="not started by this checkout ($(port_owner "${NODE_TCP[$n]}"))"
			fi
			say "cluster node $n: up, shard ${NODE_SHARD[$n]}, version $(ch_version "${NODE_TCP[$n]}"), native $HOST:${NODE_TCP[$n]}, http $HOST:${NODE_HTTP[$n]}, $who"
		else
			say "cluster node $n: down or not in sink_cluster with ZooKeeper (native $HOST:${NODE_TCP[$n]})"
			rc=1
		fi
	done
	return $rc
}

# cluster_stop SIGNAL WHO: stops one server of the cluster this checkout
# started, for fault drills: a node (ch1…ch4) or zookeeper, with SIGTERM
# (waited for, as `down` does) or SIGKILL (kill -9, a crash). `cluster up`
# starts it again.
cluster_stop() {
	local sig=$1 who=$2 name pid
	case $who in
	zk | zookeeper) name=cluster-zk; pid=$(zk_ours) || true ;;
	ch[1-4]) name=cluster-$who; pid=$(node_ours "$who") || true ;;
	*) die "cluster stop|kill: want one of ch1 ch2 ch3 ch4 zookeeper, not \"$who\"" ;;
	esac
	[[ -n $pid ]] || die "$who: not running or not started by this checkout"
	if [[ $sig == KILL ]]; then
		kill -KILL "$pid"
		while [[ -e /proc/$pid ]]; do sleep 0.1; done
		rm -f "$STACK_DIR/$name/$name.pid"
		say "$name killed (pid $pid, SIGKILL)"
	else
		stop "$name" "$pid"
	fi
}

cmd_cluster() {
	case ${1:-} in
	up) cluster_up ;;
	down) cluster_down ;;
	status) cluster_status ;;
	stop) cluster_stop TERM "${2:-}" ;;
	kill) cluster_stop KILL "${2:-}" ;;
	*)
		echo "usage: $0 cluster up|down|status|stop NODE|kill NODE (NODE: ch1 ch2 ch3 ch4 zookeeper)" >&2
		exit 2
		;;
	esac
}

# ---------------------------------------------------------------- clickhouse 26.9 cluster

# `stack.sh cluster26 up|down|status|stop NODE|kill NODE`: two ClickHouse 26.9
# servers (chdb, as the single 26.9 server) forming sink26_cluster, 2 shards x
# 1 replica (see the header). No Keeper: nothing replicates, no ON CLUSTER.
C26_NODES=(c26n1 c26n2)
declare -A C26_SHARD=([c26n1]=1 [c26n2]=2)
declare -A C26_TCP=([c26n1]=19201 [c26n2]=19202)
declare -A C26_HTTP=([c26n1]=18201 [c26n2]=18202)
declare -A C26_STATE=() # per node, as CH_STATE

c26_dir() { echo "$STACK_DIR/cluster26-$1"; }
c26_ours() { is_ours "cluster26-$1" "$(c26_dir "$1")/data"; }
# c26_healthy NODE: the node answers and defines sink26_cluster with both shards.
c26_healthy() {
	command -v clickhouse-client >/dev/null &&
		[[ $(timeout 5 clickhouse-client --host "$HOST" --port "${C26_TCP[$1]}" -q \
			"SELECT count() FROM system.clusters WHERE cluster = 'sink26_cluster'" 2>/dev/null) == 2 ]]
}

# render_c26 NODE TEMPLATE OUT: the template with the node's name, shard and ports.
render_c26() {
	sed -e "s|@STACK_DIR@|$STACK_DIR|g" -e "s|@NODE@|$1|g" -e "s|@SHARD@|${C26_SHARD[$1]}|g" \
		-e "s|@TCP@|${C26_TCP[$1]}|g" -e "s|@HTTP@|${C26_HTTP[$1]}|g" "$2" >"$3"
}

c26_check() {
	local n=$1 d port
	d=$(c26_dir "$n")
	if c26_ours "$n" >/dev/null; then
		C26_STATE[$n]=running
		if ! render_c26 "$n" "$ROOT/testdata/clickhouse26-cluster/config.xml" /dev/stdout | cmp -s - "$d/config.xml"; then
			say "note: testdata/clickhouse26-cluster/config.xml changed since $n started; run \`scripts/stack.sh cluster26 down\` and \`cluster26 up\` to apply it"
		fi
		return
	fi
	if c26_healthy "$n"; then
		C26_STATE[$n]=reused
		say "reusing the 26.9 cluster node $n that already answers on $HOST:${C26_TCP[$n]} (not started by this checkout)"
		return
	fi
	for port in ${C26_TCP[$n]} ${C26_HTTP[$n]}; do
		if port_busy "$port"; then
			die "port $port (26.9 cluster node $n) is in use by something that is not a node of sink26_cluster ($(port_owner "$port"))"
		fi
	done
	C26_STATE[$n]=absent
}

c26_start() {
	local n=$1 d
	[[ ${C26_STATE[$n]} == absent ]] || return 0
	d=$(c26_dir "$n")
	mkdir -p "$d"/{data,log}
	render_c26 "$n" "$ROOT/testdata/clickhouse26-cluster/config.xml" "$d/config.xml"
	# The same users as the single 26.9 server (users.xml only in clickhouse-local).
	render "$ROOT/testdata/clickhouse26/users.xml" "$d/users.xml"
	launch "cluster26-$n" "$d/log/stdout.log" \
		"$CH26_VENV/bin/python" "$ROOT/scripts/ch26.py" "$d" "$d/data"
	C26_STATE[$n]=started
}

c26_wait() {
	local n=$1 d
	[[ ${C26_STATE[$n]} == reused ]] && return
	d=$(c26_dir "$n")
	# shellcheck disable=SC2317 # called indirectly by wait_until
	alive() { c26_ours "$n"; }
	# shellcheck disable=SC2317
	healthy() { c26_healthy "$n"; }
	wait_until "26.9 cluster node $n" alive healthy "$d/log/clickhouse-server.err.log" "$d/log/stdout.log"
	if [[ ${C26_STATE[$n]} == running ]]; then
		say "26.9 cluster node $n already running (pid $(c26_ours "$n")), native $HOST:${C26_TCP[$n]}"
	else
		say "26.9 cluster node $n (shard ${C26_SHARD[$n]}, ClickHouse $(ch_version "${C26_TCP[$n]}")) started (pid $(c26_ours "$n")), native $HOST:${C26_TCP[$n]}, http $HOST:${C26_HTTP[$n]}"
	fi
}

cluster26_up() {
	mkdir -p "$STACK_DIR"
	lock cluster26
	install_packages
	local n need=
	for n in "${C26_NODES[@]}"; do
		c26_check "$n"
		[[ ${C26_STATE[$n]} == absent ]] && need=1
	done
	[[ -z $need ]] || install_ch26
	for n in "${C26_NODES[@]}"; do c26_start "$n"; done
	for n in "${C26_NODES[@]}"; do c26_wait "$n"; done
}

cluster26_down() {
	lock cluster26
	local n pid
	for n in "${C26_NODES[@]}"; do
		if pid=$(c26_ours "$n"); then stop "cluster26-$n" "$pid" & else
			rm -f "$(c26_dir "$n")/cluster26-$n.pid"
			say "26.9 cluster node $n: not started by this checkout, nothing to stop"
		fi
	done
	wait
}

cluster26_status() {
	local n pid rc=0 who
	for n in "${C26_NODES[@]}"; do
		if c26_healthy "$n"; then
			if pid=$(c26_ours "$n"); then who="started by this checkout (pid $pid)"; else
				who="not started by this checkout ($(port_owner "${C26_TCP[$n]}"))"
			fi
			say "26.9 cluster node $n: up, shard ${C26_SHARD[$n]}, version $(ch_version "${C26_TCP[$n]}"), native $HOST:${C26_TCP[$n]}, http $HOST:${C26_HTTP[$n]}, $who"
		else
			say "26.9 cluster node $n: down or not in sink26_cluster (native $HOST:${C26_TCP[$n]})"
			rc=1
		fi
	done
	return $rc
}

# cluster26_stop SIGNAL NODE: stops one node this checkout started (SIGTERM,
# waited for, or SIGKILL); `cluster26 up` starts it again.
cluster26_stop() {
	local sig=$1 n=$2 pid
	[[ -n ${C26_TCP[$n]:-} ]] || die "cluster26 stop|kill: want one of ${C26_NODES[*]}, not \"$n\""
	pid=$(c26_ours "$n") || die "$n: not running or not started by this checkout"
	if [[ $sig == KILL ]]; then
		kill -KILL "$pid"
		while [[ -e /proc/$pid ]]; do sleep 0.1; done
		rm -f "$(c26_dir "$n")/cluster26-$n.pid"
		say "cluster26-$n killed (pid $pid, SIGKILL)"
	else
		stop "cluster26-$n" "$pid"
	fi
}

cmd_cluster26() {
	case ${1:-} in
	up) cluster26_up ;;
	down) cluster26_down ;;
	status) cluster26_status ;;
	stop) cluster26_stop TERM "${2:-}" ;;
	kill) cluster26_stop KILL "${2:-}" ;;
	*)
		echo "usage: $0 cluster26 up|down|status|stop NODE|kill NODE (NODE: ${C26_NODES[*]})" >&2
		exit 2
		;;
	esac
}

# ---------------------------------------------------------------- kafka cluster

# `stack.sh kafka-cluster up|down|status`: three KRaft nodes (broker + controller
# each) from the same jars as the single broker, replication factor 3 and
# min.insync.replicas=2 by default (testdata/kafka-cluster/server.properties).
KC_NODES=(1 2 3)
declare -A KC_PORT=([1]=9192 [2]=9193 [3]=9194)
declare -A KC_CTRL=([1]=9195 [2]=9196 [3]=9197)
declare -A KC_STATE=() # per node, as CH_STATE
KC_HEAP=${STACK_KC_HEAP:-320m}
KC_ID_FILE=$STACK_DIR/kafka-cluster.id

kc_dir() { echo "$STACK_DIR/kafka-cluster$1"; }
kc_ours() { is_ours "kafka-cluster$1" "$(kc_dir "$1")/server.properties"; }
# kc_healthy NODE: the node answers a metadata request, lists itself and all
# three brokers (a node alone, without a quorum, answers no metadata).
kc_healthy() {
	local md
	command -v kcat >/dev/null || return 1
	md=$(timeout 10 kcat -L -b "$HOST:${KC_PORT[$1]}" -m 3 2>/dev/null) || return 1
	grep -q "broker .* at $HOST:${KC_PORT[$1]}" <<<"$md" && grep -qE '^ ?3 brokers:' <<<"$md"
}

kc_render() {
	sed -e "s|@STACK_DIR@|$STACK_DIR|g" -e "s|@NODE_ID@|$1|g" -e "s|@PORT@|${KC_PORT[$1]}|g" \
		-e "s|@CTRL@|${KC_CTRL[$1]}|g" "$ROOT/testdata/kafka-cluster/server.properties"
}

kc_check() {
	local n=$1 port
	if kc_ours "$n" >/dev/null; then
		KC_STATE[$n]=running
		if ! kc_render "$n" | cmp -s - "$(kc_dir "$n")/server.properties"; then
			say "note: testdata/kafka-cluster/server.properties changed since Kafka node $n started; run \`scripts/stack.sh kafka-cluster down\` and \`kafka-cluster up\` to apply it"
		fi
		return
	fi
	if kc_healthy "$n"; then
		KC_STATE[$n]=reused
		say "reusing the Kafka cluster node $n that already answers on $HOST:${KC_PORT[$n]} (not started by this checkout)"
		return
	fi
	for port in ${KC_PORT[$n]} ${KC_CTRL[$n]}; do
		if port_busy "$port"; then
			die "port $port (Kafka cluster node $n) is in use by something that is not a node of the Kafka cluster ($(port_owner "$port"))"
		fi
	done
	KC_STATE[$n]=absent
}

# kc_cluster_id: the id every node is formatted with: the one a node already
# holds, else the saved one, else a new one (saved).
kc_cluster_id() {
	local n id
	for n in "${KC_NODES[@]}"; do
		id=$(sed -n 's/^cluster.id=//p' "$(kc_dir "$n")/data/meta.properties" 2>/dev/null || true)
		[[ -n $id ]] && { echo "$id"; return; }
	done
	[[ -s $KC_ID_FILE ]] || cluster_id >"$KC_ID_FILE"
	cat "$KC_ID_FILE"
}

# kc_format NODE: KRaft needs each node's log dir formatted with the cluster id
# once; later starts reuse it.
kc_format() {
	local n=$1 d
	d=$(kc_dir "$n")
	mkdir -p "$d/data"
	kc_render "$n" >"$d/server.properties"
	[[ -f $d/data/meta.properties ]] && return 0
	"${KAFKA_JAVA[@]}" kafka.tools.StorageTool format -t "$2" -c "$d/server.properties" >>"$d/kafka.log" 2>&1
}

kc_start() {
	local n=$1 d
	[[ ${KC_STATE[$n]} == absent ]] || return 0
	d=$(kc_dir "$n")
	(cd "$d" && launch "kafka-cluster$n" "$d/kafka.log" "${KAFKA_JAVA[@]}" kafka.Kafka "$d/server.properties")
	KC_STATE[$n]=started
}

kc_wait() {
	local n=$1 d
	[[ ${KC_STATE[$n]} == reused ]] && return
	d=$(kc_dir "$n")
	# shellcheck disable=SC2317 # called indirectly by wait_until
	alive() { kc_ours "$n"; }
	# shellcheck disable=SC2317
	healthy() { kc_healthy "$n"; }
	wait_until "Kafka cluster node $n" alive healthy "$d/kafka.log"
	if [[ ${KC_STATE[$n]} == running ]]; then
		say "Kafka cluster node $n already running (pid $(kc_ours "$n")), $HOST:${KC_PORT[$n]}"
	else
		say "Kafka $(kafka_version) cluster node $n started (pid $(kc_ours "$n")), broker $HOST:${KC_PORT[$n]}, controller $HOST:${KC_CTRL[$n]}"
	fi
}

kafka_cluster_up() {
	mkdir -p "$STACK_DIR"
	lock kafka-cluster
	install_packages
	local n id
	for n in "${KC_NODES[@]}"; do kc_check "$n"; done
	fetch_kafka_libs
	HEAP=$KC_HEAP kafka_java
	id=$(kc_cluster_id)
	# Formatting starts a JVM per node: in parallel.
	declare -A pids=()
	for n in "${KC_NODES[@]}"; do
		[[ ${KC_STATE[$n]} == absent ]] || continue
		kc_format "$n" "$id" &
		pids[$n]=$!
	done
	for n in "${!pids[@]}"; do
		wait "${pids[$n]}" || die "formatting Kafka cluster node $n's storage failed (see $(kc_dir "$n")/kafka.log)"
	done
	# All three before waiting: a node answers metadata only once a quorum is up.
	for n in "${KC_NODES[@]}"; do kc_start "$n"; done
	for n in "${KC_NODES[@]}"; do kc_wait "$n"; done
}

kafka_cluster_down() {
	lock kafka-cluster
	local n pid
	for n in "${KC_NODES[@]}"; do
		if pid=$(kc_ours "$n"); then stop "kafka-cluster$n" "$pid" & else
			rm -f "$(kc_dir "$n")/kafka-cluster$n.pid"
			say "Kafka cluster node $n: not started by this checkout, nothing to stop"
		fi
	done
	wait
}

kafka_cluster_status() {
	local n pid rc=0 who
	for n in "${KC_NODES[@]}"; do
		if kc_healthy "$n"; then
			if pid=$(kc_ours "$n"); then who="started by this checkout (pid $pid)"; else
				who="not started by this checkout ($(port_owner "${KC_PORT[$n]}"))"
			fi
			say "Kafka cluster node $n: up, broker $HOST:${KC_PORT[$n]}, controller $HOST:${KC_CTRL[$n]}, $who"
		else
			say "Kafka cluster node $n: down or without its 3-broker quorum (broker $HOST:${KC_PORT[$n]})"
			rc=1
		fi
	done
	return $rc
}

cmd_kafka_cluster() {
	case ${1:-} in
	up) kafka_cluster_up ;;
	down) kafka_cluster_down ;;
	status) kafka_cluster_status ;;
	*)
		echo "usage: $0 kafka-cluster up|down|status" >&2
		exit 2
		;;
	esac
}

# ---------------------------------------------------------------- cdc (PostgreSQL + Debezium)

PG_PORT=15432
PG_DIR=$STACK_DIR/postgres
PG_BIN=/usr/lib/postgresql/15/bin
PG_USER=sink # the password user the connectors and the tests log in as (password sink)
CONNECT_PORT=8083
CONNECT_DIR=$STACK_DIR/connect
CONNECT_LIBS=$ROOT/.cache/connect-libs
CONNECT_POM=$ROOT/scripts/connect/pom.xml
DEBEZIUM_POM=$ROOT/scripts/connect/debezium/pom.xml
CONNECT_HEAP=${STACK_CONNECT_HEAP:-256m}
PG_STATE=      # as CH_STATE
CONNECT_STATE= # as CH_STATE

pg_ours() { is_ours postgres "$PG_DIR/data"; }
connect_ours() { is_ours connect "$CONNECT_DIR/connect-distributed.properties"; }

# pg_sql SQL: runs SQL as the sink user over TCP, prints the unaligned result.
pg_sql() {
	PGPASSWORD=sink PGCONNECT_TIMEOUT=3 timeout 10 "$PG_BIN/psql" -h "$HOST" -p "$PG_PORT" -U "$PG_USER" \
		-d postgres -XAtqc "$1" 2>/dev/null
}
# Healthy: the sink user logs in and the server decodes logical WAL.
pg_healthy() { [[ -x $PG_BIN/psql && $(pg_sql 'SHOW wal_level') == logical ]]; }
# pg_accepts: the server takes connections (before the sink user exists).
pg_accepts() { "$PG_BIN/pg_isready" -q -h "$HOST" -p "$PG_PORT" -t 2 2>/dev/null; }
pg_version() { pg_sql 'SHOW server_version' | cut -d' ' -f1 | grep . || echo unknown; }

# Healthy: the worker's REST API lists Debezium's PostgreSQL connector.
connect_healthy() {
	timeout 5 curl -fsS "http://$HOST:$CONNECT_PORT/connector-plugins" 2>/dev/null |
		grep -q '"io.debezium.connector.postgresql.PostgresConnector"'
}
# connect_version: the worker's and Debezium's versions, e.g. "Kafka Connect 4.3.0, Debezium 3.6.1.Final".
connect_version() {
	local root plugins
	root=$(timeout 5 curl -fsS "http://$HOST:$CONNECT_PORT/" 2>/dev/null | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
	plugins=$(timeout 5 curl -fsS "http://$HOST:$CONNECT_PORT/connector-plugins" 2>/dev/null |
		sed -n 's/.*PostgresConnector","type":"source","version":"\([^"]*\)".*/\1/p')
	echo "Kafka Connect ${root:-unknown}, Debezium ${plugins:-unknown}"
}

# AS_PG: the prefix that runs a command as the postgres OS user when we are root
# (PostgreSQL refuses to run as root), else nothing. setpriv execs in place, so a
# launched server keeps the pid the pid file holds.
AS_PG=()
if [[ $EUID -eq 0 ]]; then AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups); fi

# others_blocking: the first directory from / down to $1 that other users
# cannot pass through (no o+x), which the postgres user needs to reach its
# data (PG_DIR itself is chowned to it); nothing when every one lets them.
others_blocking() {
	local d=$1 blocked=
	while [[ $d != / && -n $d ]]; do
		[[ $(stat -c %A "$d" 2>/dev/null) == *[xt] ]] || blocked=$d
		d=$(dirname "$d")
	done
	echo "$blocked"
}

# Copies Kafka Connect (scripts/connect/pom.xml) into .cache/connect-libs/runtime
# and Debezium's PostgreSQL connector (scripts/connect/debezium/pom.xml) into
# .cache/connect-libs/plugins/debezium-postgres once; the worker finds the plugin
# through plugin.path and loads it in its own class loader. Kafka's own jars and
# slf4j stay out of the plugin folder: the worker provides them. A checksum of
# both poms marks a complete copy, so a version bump refetches.
fetch_connect_libs() {
	local sum stamp=$CONNECT_LIBS/.pom.sha256 log=$STACK_DIR/maven-connect.log tmp
	sum=$(cat "$CONNECT_POM" "$DEBEZIUM_POM" | sha256sum | cut -d' ' -f1)
	[[ -f $stamp && $(<"$stamp") == "$sum" ]] && return 0
	command -v mvn >/dev/null || die "mvn is needed to fetch Kafka Connect and Debezium (apt-get install maven)"
	say "downloading Kafka Connect and Debezium jars with Maven (log: $log)"
	tmp=$CONNECT_LIBS.tmp.$$
	rm -rf "$tmp"
	{
		mvn -B -f "$CONNECT_POM" dependency:copy-dependencies -DoutputDirectory="$tmp/runtime" &&
			mvn -B -f "$DEBEZIUM_POM" dependency:copy-dependencies -DincludeScope=runtime \
				-DexcludeGroupIds=org.apache.kafka,org.slf4j -DoutputDirectory="$tmp/plugins/debezium-postgres"
	} >"$log" 2>&1 || { rm -rf "$tmp"; die "downloading the Kafka Connect/Debezium jars failed (see $log)"; }
	ls "$tmp"/runtime/connect-runtime-*.jar "$tmp"/plugins/debezium-postgres/debezium-connector-postgres-*.jar >/dev/null 2>&1 ||
		{ rm -rf "$tmp"; die "Maven produced no connect-runtime or debezium-connector-postgres jar (see $log)"; }
	echo "$sum" >"$tmp/.pom.sha256"
	rm -rf "$CONNECT_LIBS"
	mkdir -p "$(dirname "$CONNECT_LIBS")"
	mv "$tmp" "$CONNECT_LIBS"
}

render_connect() {
	sed -e "s|@STACK_DIR@|$STACK_DIR|g" -e "s|@CONNECT_LIBS@|$CONNECT_LIBS|g" \
		"$ROOT/testdata/connect/connect-distributed.properties"
}

pg_check() {
	if pg_ours >/dev/null; then
		PG_STATE=running
		if config_changed "$ROOT/testdata/postgres/postgresql.conf" "$PG_DIR/postgresql.conf"; then
			say "note: testdata/postgres/postgresql.conf changed since PostgreSQL started; run \`scripts/stack.sh cdc down\` and \`cdc up\` to apply it"
		fi
		return
	fi
	if pg_healthy; then
		PG_STATE=reused
		say "reusing the PostgreSQL that already answers on $HOST:$PG_PORT (not started by this checkout)"
		return
	fi
	port_busy "$PG_PORT" && die "port $PG_PORT is in use by something that is not the stack's PostgreSQL ($(port_owner "$PG_PORT"))"
	PG_STATE=absent
}

connect_check() {
	if connect_ours >/dev/null; then
		CONNECT_STATE=running
		if ! render_connect | cmp -s - "$CONNECT_DIR/connect-distributed.properties"; then
			say "note: testdata/connect/connect-distributed.properties changed since Kafka Connect started; run \`scripts/stack.sh cdc down\` and \`cdc up\` to apply it"
		fi
		return
	fi
	if connect_healthy; then
		CONNECT_STATE=reused
		say "reusing the Kafka Connect worker that already answers on $HOST:$CONNECT_PORT (not started by this checkout)"
		return
	fi
	port_busy "$CONNECT_PORT" && die "port $CONNECT_PORT is in use by something that is not a Kafka Connect worker with Debezium ($(port_owner "$CONNECT_PORT"))"
	CONNECT_STATE=absent
}

# pg_start: a cluster of our own in .stack/postgres/data (initdb once), with
# testdata/postgres/postgresql.conf included from the generated postgresql.conf.
# .stack/postgres belongs to the postgres OS user when we are root.
pg_start() {
	[[ $PG_STATE == absent ]] || return 0
	local log=$PG_DIR/postgres.log
	mkdir -p "$PG_DIR"
	if ((${#AS_PG[@]})); then
		local blocked
		blocked=$(others_blocking "$(dirname "$PG_DIR")")
		[[ -z $blocked ]] || die "PostgreSQL runs as the postgres user, which cannot enter $blocked ($(stat -c %a "$blocked")); let it through with: chmod o+x $blocked"
		chown postgres:postgres "$PG_DIR"
	fi
	if [[ ! -f $PG_DIR/data/PG_VERSION ]]; then
		rm -rf "$PG_DIR/data"
		# Trust on the Unix socket (only this user reaches it), passwords over TCP.
		"${AS_PG[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -E UTF8 --locale=C.UTF-8 \
			--auth-local=trust --auth-host=scram-sha-256 >"$PG_DIR/initdb.log" 2>&1 ||
			die "initdb failed (see $PG_DIR/initdb.log)"
		echo "include '$PG_DIR/postgresql.conf'" >>"$PG_DIR/data/postgresql.conf"
	fi
	render "$ROOT/testdata/postgres/postgresql.conf" "$PG_DIR/postgresql.conf"
	(cd "$PG_DIR" && launch postgres "$log" "${AS_PG[@]}" "$PG_BIN/postgres" -D "$PG_DIR/data")
	PG_STATE=started
}

# pg_wait: until the server accepts connections, then (on a server we started)
# makes sure the sink user exists, then until it is healthy.
pg_wait() {
	[[ $PG_STATE == reused ]] && return
	wait_until PostgreSQL pg_ours pg_accepts "$PG_DIR/postgres.log"
	"$PG_BIN/psql" -h "$PG_DIR" -p "$PG_PORT" -U postgres -d postgres -XAtq -v ON_ERROR_STOP=1 >>"$PG_DIR/postgres.log" 2>&1 <<-SQL ||
		DO \$\$ BEGIN
		  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_USER') THEN
		    CREATE ROLE $PG_USER LOGIN SUPERUSER REPLICATION PASSWORD 'sink';
		  END IF;
		END \$\$;
	SQL
		die "creating the PostgreSQL user $PG_USER failed (see $PG_DIR/postgres.log)"
	wait_until PostgreSQL pg_ours pg_healthy "$PG_DIR/postgres.log"
	if [[ $PG_STATE == running ]]; then
		say "PostgreSQL already running (pid $(pg_ours)), $HOST:$PG_PORT"
	else
		say "PostgreSQL $(pg_version) started (pid $(pg_ours)), $HOST:$PG_PORT, user $PG_USER password sink, wal_level=logical"
	fi
}

# The worker's JVM, kept small (the machine has 2 cores and runs everything
# else too; a test connector moves a few rows): serial GC with a small young
# generation and a heap that shrinks back toward what is live (about 30 MiB),
# only the C1 compiler and a small code cache, two malloc arenas; our log4j2
# config, the runtime jars (not the plugin's). About 0.35 GB RSS, 0.2 GB of it
# anonymous.
connect_start() {
	[[ $CONNECT_STATE == absent ]] || return 0
	fetch_connect_libs
	mkdir -p "$CONNECT_DIR"
	render_connect >"$CONNECT_DIR/connect-distributed.properties"
	(cd "$CONNECT_DIR" && launch connect "$CONNECT_DIR/connect.log" env MALLOC_ARENA_MAX=2 \
		java -Xms32m -Xmx"$CONNECT_HEAP" -Xmn32m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 \
		-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=64m \
		-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$ROOT/testdata/connect/log4j2.properties" \
		-cp "$CONNECT_LIBS/runtime/*" org.apache.kafka.connect.cli.ConnectDistributed \
		"$CONNECT_DIR/connect-distributed.properties")
	CONNECT_STATE=started
}

connect_wait() {
	[[ $CONNECT_STATE == reused ]] && return
	wait_until "Kafka Connect" connect_ours connect_healthy "$CONNECT_DIR/connect.log"
	if [[ $CONNECT_STATE == running ]]; then
		say "Kafka Connect already running (pid $(connect_ours)), http://$HOST:$CONNECT_PORT"
	else
		say "$(connect_version) started (pid $(connect_ours)), REST http://$HOST:$CONNECT_PORT, Kafka $HOST:$KAFKA_PORT"
	fi
}

cdc_up() {
	mkdir -p "$STACK_DIR"
	lock cdc
	install_packages postgresql-15
	pg_check
	connect_check
	if [[ $CONNECT_STATE == absent ]] && ! kafka_healthy; then
		die "Kafka Connect needs the stack's Kafka on $HOST:$KAFKA_PORT, which does not answer: run \`scripts/stack.sh up\` first"
	fi
	pg_start
	connect_start
	pg_wait
	connect_wait
}

cdc_down() {
	lock cdc
	local pid
	if pid=$(connect_ours); then stop connect "$pid"; else
		rm -f "$CONNECT_DIR/connect.pid"
		say "Kafka Connect: not started by this checkout, nothing to stop"
	fi
	# SIGINT: PostgreSQL's fast shutdown (SIGTERM would wait for every client).
	if pid=$(pg_ours); then stop postgres "$pid" INT; else
		rm -f "$PG_DIR/postgres.pid"
		say "PostgreSQL: not started by this checkout, nothing to stop"
	fi
}

cdc_status() {
	local pid rc=0 who
	if pg_healthy; then
		if pid=$(pg_ours); then who="started by this checkout (pid $pid)"; else
			who="not started by this checkout ($(port_owner "$PG_PORT"))"
		fi
		say "postgres: up, version $(pg_version), $HOST:$PG_PORT, $(pg_sql 'SELECT count(*) FROM pg_replication_slots') replication slots, $who"
	else
		say "postgres: down (user $PG_USER cannot log in on $HOST:$PG_PORT, or wal_level is not logical)"
		rc=1
	fi
	if connect_healthy; then
		if pid=$(connect_ours); then who="started by this checkout (pid $pid)"; else
			who="not started by this checkout ($(port_owner "$CONNECT_PORT"))"
		fi
		say "connect: up, $(connect_version), http://$HOST:$CONNECT_PORT, $who"
	else
		say "connect: down (GET http://$HOST:$CONNECT_PORT/connector-plugins lists no PostgresConnector)"
		rc=1
	fi
	return $rc
}

cmd_cdc() {
	case ${1:-} in
	up) cdc_up ;;
	down) cdc_down ;;
	status) cdc_status ;;
	*)
		echo "usage: $0 cdc up|down|status" >&2
		exit 2
		;;
	esac
}

# ---------------------------------------------------------------- commands

# One stack per machine (the ports are global), so one lock per machine too: two
# checkouts running `up` at once must not both try to start servers. lock NAME
# takes another lock for servers on other ports (`lock cluster`), so starting the
# cluster does not wait for a slow first `up` and the reverse.
lock() {
	local file=${TMPDIR:-/tmp}/sink-stack${1:+-$1}.lock
	exec 9>"$file"
	flock -w 600 9 || die "another stack.sh has held $file for 10 minutes"
}

# Installs helm (not packaged by Debian) into .cache/tools/bin from its Go
# module, pinned: deploy/k8s/chart_test.go renders deploy/helm/sink with it.
# The first build takes a few minutes; later runs find the binary.
HELM_VERSION=v3.19.0
install_tools() {
	local bin=$ROOT/.cache/tools/bin log=$STACK_DIR/tools-install.log
	[[ -x $bin/helm ]] && return 0
	command -v helm >/dev/null && return 0
	say "building helm $HELM_VERSION into ${bin#"$ROOT"/} (log: $log)"
	mkdir -p "$bin"
	GOBIN=$bin go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >>"$log" 2>&1 ||
		die "building helm failed (see $log)"
}

cmd_up() {
	mkdir -p "$STACK_DIR"
	lock
	install_packages
	install_tools
	ch_check
	ch26_check
	kafka_check
	reg_check
	# Start all before waiting for any: the startups overlap.
	ch_start
	kafka_start
	ch26_start
	reg_start
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
		"$REG_DIR/registry.log"; do
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

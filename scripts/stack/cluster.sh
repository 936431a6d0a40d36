# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): `stack.sh cluster`: ZooKeeper and the four ClickHouse 18.16
# nodes of sink_cluster.

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

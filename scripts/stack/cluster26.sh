# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): `stack.sh cluster26`: the two ClickHouse 26.9 nodes of
# sink26_cluster.

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

# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): `stack.sh kafka-cluster`: the three KRaft nodes of the
# replicated Kafka.

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

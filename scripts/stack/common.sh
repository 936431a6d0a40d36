# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): the state directory and the helpers every server's file uses: pid
# files, ports, probing a ClickHouse server, waiting for a server, rendering
# configs, launching a server detached.

STACK_DIR=$ROOT/.stack
TIMEOUT=${STACK_TIMEOUT:-120}
HOST=127.0.0.1

say() { echo "stack: $*"; }
die() { echo "stack: $*" >&2; exit 1; }

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

ch_version() { timeout 5 clickhouse-client --host "$HOST" --port "${1:-$CH_TCP}" -q 'SELECT version()' 2>/dev/null || echo unknown; }

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

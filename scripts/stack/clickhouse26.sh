# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): ClickHouse 26.9 (the chdb-core engine serving
# clickhouse-local's listeners, scripts/ch26.py), native 127.0.0.1:19000, HTTP
# 18123, config from testdata/clickhouse26/.

CH26_TCP=19000
CH26_HTTP=18123
CH26_WHEEL=chdb-core==26.9.0
CH26_VENV=$ROOT/.cache/ch26
CH26_DIR=$STACK_DIR/clickhouse26
CH26_STATE= # as CH_STATE

ch26_ours() { is_ours clickhouse26 "$CH26_DIR/data"; }
ch26_healthy() { ch_answers "$CH26_TCP"; }

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

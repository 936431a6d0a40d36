# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): ClickHouse 18.16 (Debian's clickhouse-server), native 127.0.0.1:9000,
# HTTP 8123, config from testdata/clickhouse/.

CH_TCP=9000
CH_HTTP=8123
CH_DIR=$STACK_DIR/clickhouse
CH_STATE= # running (ours) | reused (foreign, healthy) | absent -> started

ch_ours() { is_ours clickhouse "$CH_DIR/config.xml"; }
ch_healthy() { ch_answers "$CH_TCP"; }

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

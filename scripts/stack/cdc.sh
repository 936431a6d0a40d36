# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): `stack.sh cdc`: PostgreSQL 15 and the Kafka Connect worker with
# Debezium's PostgreSQL connector.

PG_PORT=15432
PG_DIR=$STACK_DIR/postgres
PG_BIN=/usr/lib/postgresql/15/bin
PG_USER=sink # the password user the connectors and the tests log in as (password sink)
CONNECT_PORT=8083
CONNECT_DIR=$STACK_DIR/connect
CONNECT_LIBS=$ROOT/.cache/connect-libs
CONNECT_POM=$ROOT/scripts/connect/pom.xml
DEBEZIUM_POM=$ROOT/scripts/connect/debezium/pom.xml
FILE_POM=$ROOT/scripts/connect/file/pom.xml
FILE_SINK=org.apache.kafka.connect.file.FileStreamSinkConnector
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
# connect_has_file_sink: the worker lists Connect's file sink connector.
connect_has_file_sink() {
	timeout 5 curl -fsS "http://$HOST:$CONNECT_PORT/connector-plugins" 2>/dev/null | grep -q "\"$FILE_SINK\""
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

# Copies Kafka Connect (scripts/connect/pom.xml) into .cache/connect-libs/runtime,
# Debezium's PostgreSQL connector (scripts/connect/debezium/pom.xml) into
# .cache/connect-libs/plugins/debezium-postgres and Connect's own file connectors
# (scripts/connect/file/pom.xml: FileStreamSinkConnector, the sink connector the
# REST API tests compare the sink with) into .cache/connect-libs/plugins/connect-file
# once; the worker finds the plugins through plugin.path and loads each in its
# own class loader. Kafka's own jars and slf4j stay out of the plugin folders:
# the worker provides them. A checksum of the poms marks a complete copy, so a
# version bump (or a new plugin) refetches.
fetch_connect_libs() {
	local sum stamp=$CONNECT_LIBS/.pom.sha256 log=$STACK_DIR/maven-connect.log tmp
	sum=$(cat "$CONNECT_POM" "$DEBEZIUM_POM" "$FILE_POM" | sha256sum | cut -d' ' -f1)
	[[ -f $stamp && $(<"$stamp") == "$sum" ]] && return 0
	command -v mvn >/dev/null || die "mvn is needed to fetch Kafka Connect and Debezium (apt-get install maven)"
	say "downloading Kafka Connect and Debezium jars with Maven (log: $log)"
	tmp=$CONNECT_LIBS.tmp.$$
	rm -rf "$tmp"
	{
		mvn -B -f "$CONNECT_POM" dependency:copy-dependencies -DoutputDirectory="$tmp/runtime" &&
			mvn -B -f "$DEBEZIUM_POM" dependency:copy-dependencies -DincludeScope=runtime \
				-DexcludeGroupIds=org.apache.kafka,org.slf4j -DoutputDirectory="$tmp/plugins/debezium-postgres" &&
			mvn -B -f "$FILE_POM" dependency:copy-dependencies -DexcludeTransitive=true \
				-DoutputDirectory="$tmp/plugins/connect-file"
	} >"$log" 2>&1 || { rm -rf "$tmp"; die "downloading the Kafka Connect/Debezium jars failed (see $log)"; }
	ls "$tmp"/runtime/connect-runtime-*.jar "$tmp"/plugins/debezium-postgres/debezium-connector-postgres-*.jar \
		"$tmp"/plugins/connect-file/connect-file-*.jar >/dev/null 2>&1 ||
		{ rm -rf "$tmp"; die "Maven produced no connect-runtime, debezium-connector-postgres or connect-file jar (see $log)"; }
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
		connect_has_file_sink ||
			say "note: the running Kafka Connect worker was started without $FILE_SINK (the REST API comparison tests need it); run \`scripts/stack.sh cdc down\` and \`cdc up\` to load it"
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

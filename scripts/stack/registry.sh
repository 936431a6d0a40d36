# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): the Apicurio schema registry, http://127.0.0.1:8081/apis/ccompat/v7.

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

# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): Apache Kafka (one KRaft broker+controller), 127.0.0.1:9092,
# controller 9093, SASL_SSL 9094, OAUTHBEARER (SASL_PLAINTEXT) 9095 with the
# token issuer's JWKS (tokenissuer.sh), config from testdata/kafka/.

KAFKA_LIBS=$ROOT/.cache/kafka-libs
POM=$ROOT/scripts/kafka/pom.xml
HEAP=${STACK_HEAP:-512m}
KAFKA_PORT=9092
KAFKA_CTRL=9093
KAFKA_SASL=9094
KAFKA_OAUTH=9095
KAFKA_DIR=$STACK_DIR/kafka
KAFKA_TLS=$KAFKA_DIR/tls
KAFKA_STATE= # as CH_STATE

kafka_ours() { is_ours kafka "$KAFKA_DIR/server.properties"; }

# A Kafka broker is healthy when it answers a metadata request and lists itself.
kafka_healthy() {
	command -v kcat >/dev/null &&
		timeout 10 kcat -L -b "$HOST:$KAFKA_PORT" -m 3 2>/dev/null | grep -q "broker .* at $HOST:$KAFKA_PORT"
}

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

# The JVM command line for Kafka's main classes: a small heap (the machine has 2 cores
# and runs ClickHouse, the tests and the sink too), our log4j2 config, the cached jars.
# Kafka 4 fetches an OAuth URL only when this system property allows it: the token
# issuer's JWKS, for the OAUTHBEARER listener's validator.
kafka_java() {
	KAFKA_JAVA=(java -Xmx"$HEAP" -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
		-Dlog4j2.configurationFile="$ROOT/testdata/kafka/log4j2.properties"
		-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="$ISSUER_URL/jwks"
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
	for port in $KAFKA_PORT $KAFKA_CTRL $KAFKA_SASL $KAFKA_OAUTH; do
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
	# The OAUTHBEARER listener's validator reads the issuer's JWKS at start;
	# without it the broker exits.
	issuer_healthy || die "the token issuer does not answer on $ISSUER_URL/jwks; Kafka's OAUTHBEARER listener needs it to start"
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

# The SASL_SSL and OAUTHBEARER listeners open together with the PLAINTEXT one;
# a broker started before they existed has none (see kafka_check).
kafka_sasl_up() { port_busy "$KAFKA_SASL"; }
kafka_oauth_up() { port_busy "$KAFKA_OAUTH"; }
kafka_ready() { kafka_healthy && kafka_sasl_up && kafka_oauth_up; }

kafka_wait() {
	[[ $KAFKA_STATE == reused ]] && return
	wait_until Kafka kafka_ours kafka_ready "$KAFKA_DIR/kafka.log"
	if [[ $KAFKA_STATE == running ]]; then
		say "Kafka already running (pid $(kafka_ours)), $HOST:$KAFKA_PORT, SASL_SSL $HOST:$KAFKA_SASL, OAUTHBEARER $HOST:$KAFKA_OAUTH"
	else
		say "Kafka $(kafka_version) started (pid $(kafka_ours)), broker $HOST:$KAFKA_PORT, SASL_SSL $HOST:$KAFKA_SASL (CA ${KAFKA_TLS#"$ROOT"/}/ca.pem), OAUTHBEARER $HOST:$KAFKA_OAUTH (tokens from $ISSUER_URL/token), controller $HOST:$KAFKA_CTRL"
	fi
}

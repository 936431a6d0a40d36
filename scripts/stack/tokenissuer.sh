# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): the token issuer of Kafka's OAUTHBEARER listener
# (tools/tokenissuer, built from this checkout into .cache/tools/bin),
# http://127.0.0.1:9096: token endpoint /token, JWKS /jwks, the tests'
# control API /control/. Kafka fetches the JWKS when it starts and refuses
# to start without it, so the issuer answers before Kafka starts.

ISSUER_PORT=9096
ISSUER_URL=http://$HOST:$ISSUER_PORT
ISSUER_DIR=$STACK_DIR/tokenissuer
ISSUER_BIN=$ROOT/.cache/tools/bin/tokenissuer
ISSUER_STATE= # as CH_STATE

issuer_ours() { is_ours tokenissuer "$ISSUER_BIN"; }

# Healthy: GET /jwks answers 200 with a key set.
issuer_healthy() { timeout 5 curl -fsS "$ISSUER_URL/jwks" 2>/dev/null | grep -q '"keys"'; }

# issuer_build: go build the issuer when the binary is missing or older than
# its sources (a few seconds; standard library only).
issuer_build() {
	local log=$ISSUER_DIR/build.log
	if [[ -x $ISSUER_BIN && -z $(find "$ROOT/tools/tokenissuer" -name '*.go' -newer "$ISSUER_BIN" 2>/dev/null) ]]; then
		return 0
	fi
	mkdir -p "$(dirname "$ISSUER_BIN")" "$ISSUER_DIR"
	(cd "$ROOT" && go build -o "$ISSUER_BIN" ./tools/tokenissuer) >"$log" 2>&1 ||
		die "building tools/tokenissuer failed (see $log)"
}

issuer_check() {
	if issuer_ours >/dev/null; then
		ISSUER_STATE=running
		return
	fi
	if issuer_healthy; then
		ISSUER_STATE=reused
		say "reusing the token issuer that already answers on $ISSUER_URL (not started by this checkout)"
		return
	fi
	if port_busy "$ISSUER_PORT"; then
		die "port $ISSUER_PORT is in use by something that is not the token issuer ($(port_owner "$ISSUER_PORT"))"
	fi
	ISSUER_STATE=absent
}

issuer_start() {
	[[ $ISSUER_STATE == absent ]] || return 0
	issuer_build
	mkdir -p "$ISSUER_DIR"
	launch tokenissuer "$ISSUER_DIR/tokenissuer.log" "$ISSUER_BIN" -listen "$HOST:$ISSUER_PORT"
	ISSUER_STATE=started
}

issuer_wait() {
	[[ $ISSUER_STATE == reused ]] && return
	wait_until "token issuer" issuer_ours issuer_healthy "$ISSUER_DIR/tokenissuer.log"
	if [[ $ISSUER_STATE == running ]]; then
		say "token issuer already running (pid $(issuer_ours)), $ISSUER_URL"
	else
		say "token issuer started (pid $(issuer_ours)), $ISSUER_URL/token, JWKS $ISSUER_URL/jwks"
	fi
}

issuer_down() {
	local pid
	if pid=$(issuer_ours); then stop tokenissuer "$pid"; else
		rm -f "$ISSUER_DIR/tokenissuer.pid"
		say "tokenissuer: not started by this checkout, nothing to stop"
	fi
}

issuer_status() {
	local pid
	if ! issuer_healthy; then
		say "tokenissuer: down (GET $ISSUER_URL/jwks does not answer)"
		return 1
	fi
	if pid=$(issuer_ours); then
		say "tokenissuer: up, $ISSUER_URL/token, started by this checkout (pid $pid)"
	else
		say "tokenissuer: up, $ISSUER_URL/token, not started by this checkout ($(port_owner "$ISSUER_PORT"))"
	fi
}

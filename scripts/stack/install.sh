# shellcheck shell=bash
# Sourced by scripts/stack.sh (its header describes the stack and its
# commands): installing what the stack needs: Debian packages, the 26.9 engine
# (chdb-core wheel), the Kafka jars and helm.

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# install_packages [EXTRA...]: installs the missing Debian packages the stack needs,
# and the EXTRA ones (`cluster up` adds zookeeper). apt-get update only runs when
# something is missing.
install_packages() {
	local missing=() sudo=() pkg log=$STACK_DIR/install.log policy=/usr/sbin/policy-rc.d
	for pkg in clickhouse-server clickhouse-client kcat "$@"; do
		pkg_installed "$pkg" || missing+=("$pkg")
	done
	command -v java >/dev/null || missing+=(default-jre-headless)
	command -v mvn >/dev/null || missing+=(maven)
	# promtool checks and unit-tests deploy/prometheus's alert rules.
	command -v promtool >/dev/null || missing+=(prometheus)
	# The status page's browser test renders it in headless Chromium.
	command -v chromium >/dev/null || missing+=(chromium)
	((${#missing[@]})) || return 0

	[[ $EUID -eq 0 ]] || sudo=(sudo)
	say "installing ${missing[*]} (log: $log)"
	# The package's postinst would start the Debian clickhouse-server service, which
	# would take port 9000 with the system config. policy-rc.d exit 101 = "do not start
	# services"; only put ours in place if the machine has none, and remove it after.
	local own_policy=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod +x "$policy"
		own_policy=1
	fi
	local rc=0
	{
		"${sudo[@]}" apt-get update -q &&
			"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends "${missing[@]}"
	} >>"$log" 2>&1 || rc=$?
	[[ -z $own_policy ]] || "${sudo[@]}" rm -f "$policy"
	((rc == 0)) || die "installing ${missing[*]} failed (apt-get exit $rc; see $log)"

	# On a systemd host the unit is still enabled for the next boot, where it would
	# hold port 9000 with Debian's config; this stack starts its own server instead.
	if [[ " ${missing[*]} " == *" clickhouse-server "* && -d /run/systemd/system ]]; then
		"${sudo[@]}" systemctl disable --now clickhouse-server >>"$log" 2>&1 || true
	fi
}

# Installs the chdb-core wheel (ClickHouse 26.9's engine, about 560 MB) into a venv
# in .cache/ch26 once; pandas/pyarrow are only needed for chdb's Python API, not
# for serving, hence --no-deps. A stamp with the wheel's pin marks a complete install.
install_ch26() {
	local stamp=$CH26_VENV/.installed log=$STACK_DIR/ch26-install.log
	[[ -f $stamp && $(<"$stamp") == "$CH26_WHEEL" ]] && return 0
	command -v python3 >/dev/null || die "python3 is needed for ClickHouse 26.9 (chdb-core)"
	say "installing $CH26_WHEEL into ${CH26_VENV#"$ROOT"/} (log: $log)"
	rm -rf "$CH26_VENV"
	mkdir -p "$(dirname "$CH26_VENV")"
	if ! python3 -m venv "$CH26_VENV" >"$log" 2>&1; then
		# Debian splits ensurepip into python3-venv (python3.N-venv).
		local sudo=()
		[[ $EUID -eq 0 ]] || sudo=(sudo)
		{
			"${sudo[@]}" apt-get update -q &&
				"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv
		} >>"$log" 2>&1 || die "python3 -m venv failed and installing python3-venv failed (see $log)"
		rm -rf "$CH26_VENV"
		python3 -m venv "$CH26_VENV" >>"$log" 2>&1 || die "python3 -m venv failed (see $log)"
	fi
	"$CH26_VENV/bin/pip" install -q --disable-pip-version-check --no-deps "$CH26_WHEEL" >>"$log" 2>&1 ||
		{ rm -rf "$CH26_VENV"; die "pip install $CH26_WHEEL failed (see $log)"; }
	echo "$CH26_WHEEL" >"$stamp"
}

# Copies Kafka and its dependencies from Maven Central into .cache/kafka-libs once.
# A checksum of the pom marks a complete copy, so a version bump refetches.
fetch_kafka_libs() {
	local sum stamp=$KAFKA_LIBS/.pom.sha256 log=$STACK_DIR/maven.log tmp
	sum=$(sha256sum "$POM" | cut -d' ' -f1)
	[[ -f $stamp && $(<"$stamp") == "$sum" ]] && return 0
	say "downloading Kafka jars with Maven (log: $log)"
	tmp=$KAFKA_LIBS.tmp.$$
	rm -rf "$tmp"
	mvn -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$tmp" >"$log" 2>&1 ||
		{ rm -rf "$tmp"; die "downloading the Kafka jars failed (see $log)"; }
	ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || { rm -rf "$tmp"; die "Maven produced no kafka_2.13 jar (see $log)"; }
	echo "$sum" >"$tmp/.pom.sha256"
	rm -rf "$KAFKA_LIBS"
	mkdir -p "$(dirname "$KAFKA_LIBS")"
	mv "$tmp" "$KAFKA_LIBS"
}

# Installs helm (not packaged by Debian) into .cache/tools/bin from its Go
# module, pinned: deploy/k8s/chart_test.go renders deploy/helm/sink with it.
# The first build takes a few minutes; later runs find the binary.
HELM_VERSION=v3.19.0
install_tools() {
	local bin=$ROOT/.cache/tools/bin log=$STACK_DIR/tools-install.log
	[[ -x $bin/helm ]] && return 0
	command -v helm >/dev/null && return 0
	say "building helm $HELM_VERSION into ${bin#"$ROOT"/} (log: $log)"
	mkdir -p "$bin"
	GOBIN=$bin go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >>"$log" 2>&1 ||
		die "building helm failed (see $log)"
}

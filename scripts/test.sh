#!/usr/bin/env bash
# test.sh: every Go test, against the running local stack (-tags integration
# adds the *_integration_test.go files; `make unit` runs the rest without it). Prints which servers
# the integration tests talk to, one line per test (PASS/FAIL/SKIP, so a reader
# sees the integration tests ran), and a closing "N passed, N failed" line;
# then every fuzz target for 3 s (scripts/fuzz.sh), with the time each ran.
# SINK_REQUIRE_STACK=1 turns a missing stack into failures, not skips.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .stack

chv() { clickhouse-client --port "$1" -q 'SELECT version()' 2>/dev/null || echo '?'; }
# The Kafka version comes from this checkout's jars; a stack reused from another
# checkout has none here.
kv=$(ls .cache/kafka-libs 2>/dev/null | sed -n 's/^kafka_2.13-\(.*\)\.jar$/\1/p' | head -1 || true)
echo "test: Kafka ${kv:-(version unknown: a stack started by another checkout)} at 127.0.0.1:9092," \
	"ClickHouse $(chv 9000) at 127.0.0.1:9000 (ch18), ClickHouse $(chv 19000) at 127.0.0.1:19000 (ch26)"

# The ClickHouse cluster (ZooKeeper + four 18.16 nodes, ~0.4 GB RSS), the
# ClickHouse 26.9 cluster (two chdb servers, ~0.6 GB RSS) and the 3-broker Kafka
# (~1 GB RSS) are not part of `make stack-up`: they are started here only when
# some test uses them (internal/testenv.Cluster, Cluster26, EachCluster,
# KafkaCluster, KafkaClusterClient, NewClusterTopic). TEST_CLUSTER=0 leaves them
# out; their tests then fail under SINK_REQUIRE_STACK=1.
uses() { grep -rqlE --include='*_test.go' "$1" --exclude-dir=.stack --exclude-dir=.cache . 2>/dev/null; }
if [[ ${TEST_CLUSTER:-1} != 0 ]]; then
	if uses 'testenv\.(Cluster|EachCluster)\('; then bash scripts/stack.sh cluster up; fi
	if uses 'testenv\.(Cluster26|EachCluster)\('; then bash scripts/stack.sh cluster26 up; fi
	if uses 'testenv\.(KafkaCluster|KafkaClusterClient|NewClusterTopic)\('; then bash scripts/stack.sh kafka-cluster up; fi
fi
# PostgreSQL + Kafka Connect with Debezium (~0.45 GB RSS) likewise, for the tests
# that use internal/testenv.Postgres, Debezium or ConnectFileSink (the worker's
# own file sink, which the REST API comparison runs).
if uses 'testenv\.(Postgres|Debezium|ConnectFileSink)\('; then bash scripts/stack.sh cdc up; fi

log=.stack/go-test.log
status=0
# Most integration tests wait on Kafka and ClickHouse rather than use the
# CPU, so more test binaries run at once than the machine has cores
# (TEST_P, default 4), and more of a package's t.Parallel tests
# (TEST_PARALLEL, default 4); go test's own default for both is one per
# core. go test starts packages in the order they are named: the slowest
# go first, so that the longest (internal/pipeline) does not start last
# and end last.
slow=(./internal/pipeline ./internal/budget ./cmd/sink ./tools/internal/chaos . ./internal/consumer ./internal/writer)
SINK_REQUIRE_STACK=1 go test -tags integration -count=1 -timeout 25m -p "${TEST_P:-4}" -parallel "${TEST_PARALLEL:-4}" \
	-v "$@" "${slow[@]}" ./... >"$log" 2>&1 || status=$?
# The fault drills on the clusters kill servers the other packages' tests use:
# alone, after them (TestChaosClusterDrills; TEST_DRILLS=0 leaves them out).
if [[ ${TEST_CLUSTER:-1} != 0 && ${TEST_DRILLS:-1} != 0 && $# -eq 0 ]]; then
	SINK_CHAOS_DRILLS=1 SINK_REQUIRE_STACK=1 go test -tags integration -count=1 -timeout 10m -v \
		-run '^(TestChaosClusterDrills|TestSoakShort)$' ./tools/internal/chaos/ >>"$log" 2>&1 || status=$?
fi

# Per-test results and package lines; full output is in $log.
grep -E '^(\s*--- (PASS|FAIL|SKIP)|ok |FAIL|panic:|\s+\S+_test\.go:[0-9]+: )' "$log" | grep -vE '^\s+\S+_test\.go:[0-9]+: .*(level|"message")' || true
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
if [[ $status -ne 0 && $failed -eq 0 ]]; then
	# a build error or panic fails no named test: show the tail of the log
	tail -40 "$log"
	failed=1
fi
# Integration tests that talk to ClickHouse run once per server, as subtests
# named ch18_<version> and ch26_<version> (internal/testenv.EachServer).
for label in ch18 ch26; do
	p=$(grep -cE "^\s*--- PASS: \S*/${label}_[0-9.]+ \(" "$log" || true)
	f=$(grep -cE "^\s*--- FAIL: \S*/${label}_[0-9.]+ \(" "$log" || true)
	echo "test: on ClickHouse $label: $p passed, $f failed"
done
# Every fuzz target for a short fixed time, beyond its seed corpus (`make fuzz`
# runs them longer); TEST_FUZZTIME=0 skips them. Before the closing line, so
# that line stays last.
if [[ ${TEST_FUZZTIME:-3s} != 0 ]]; then
	FUZZTIME=${TEST_FUZZTIME:-3s} bash scripts/fuzz.sh || { status=1; failed=$((failed + 1)); }
fi
echo "$passed passed, $failed failed, $skipped skipped"
exit $status

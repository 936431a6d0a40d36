#!/usr/bin/env bash
# bench.sh: `make bench`. Builds bin/sink and bin/bench, checks the clients the
# alternatives need, and runs tools/bench on the local stack (make bench starts it):
# one workload produced once, the sink against ClickHouse's Kafka engine, kcat
# pipes and naive per-record INSERTs and the seed 004 replay, on ClickHouse 18.16
# and then 26.9; the hot path's Go benchmarks; the performance targets per server.
# Writes bench/results/<date>.md and .json (a table per server). Then the
# many-tables steady state (tools/bench/manytables.go): one connector into 100
# and 500 tables of each server, even and Zipf-skewed rates, the insert budget
# off and on, interleaved (bench/results/manytables-<date>.md and .json);
# BENCH_ARGS='--manytables-only --duration 1m' runs it alone, shortened.
# Extra flags: make bench BENCH_ARGS='--count 200000 --runs 1 --clickhouse 26'
# (bin/bench run -h).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for c in kcat clickhouse-client curl; do
	command -v "$c" >/dev/null || need+=("$c")
done
command -v perf >/dev/null || need+=(linux-perf)
if ((${#need[@]})); then
	pkgs=()
	for c in "${need[@]}"; do
		case $c in
		clickhouse-client) pkgs+=(clickhouse-client) ;;
		*) pkgs+=("$c") ;;
		esac
	done
	echo "bench: installing ${pkgs[*]}"
	if [[ $(id -u) -eq 0 ]]; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null ||
			echo "bench: could not install ${pkgs[*]}; the variants that need them report 'could not run'"
	else
		echo "bench: missing ${pkgs[*]} (not root, not installing); the variants that need them report 'could not run'"
	fi
fi

mkdir -p bin .stack/bench
VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
go build -ldflags "-X main.version=$VERSION" -o bin/sink ./cmd/sink
go build -o bin/bench ./tools/bench
go build -o bin/loadgen ./tools/loadgen
# --manytables-only: the many-tables steady state alone, the other flags
# its own (bin/bench manytables -h).
if [[ ${1:-} == --manytables-only ]]; then
	shift
	exec bin/bench manytables "$@"
fi
bin/bench run "$@"
# Then one connector into 100 and 500 tables per server at modest rates,
# with and without the insert budget (manytables-<date>.md).
exec bin/bench manytables

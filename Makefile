# Entry points for developers and CI. The integration tests need the local stack
# (real Kafka + ClickHouse on loopback, see scripts/stack.sh); `make test` starts it.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build test unit vet fuzz demo demo-cdc bench bench-adaptive chaos chaos-drills soak stack-up stack-down stack-status stack-logs \
	cluster-up cluster-down cluster-status cluster26-up cluster26-down cluster26-status kafka-cluster-up kafka-cluster-down kafka-cluster-status \
	cdc-up cdc-down cdc-status

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/sink ./cmd/sink

# SINK_REQUIRE_STACK=1 turns "stack not reachable" skips into failures, so a run
# cannot pass while silently skipping every integration test.
test: stack-up
	bash scripts/test.sh

# Every test that needs no stack (no Kafka, ClickHouse or registry): plain go test leaves
# out the *_integration_test.go files (they start with //go:build integration;
# `make test` passes -tags integration), and a test elsewhere that reaches for
# the stack fails saying where it belongs (internal/testenv). Fuzz targets
# replay their seed corpus only. -short leaves out the one slow check that
# needs no stack, the release build of the binary (TestDockerfile), which
# `make test` runs.
unit:
	$(GO) test -short -count=1 ./...

# go vet over both builds, so the integration files are checked too.
vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

# Every native fuzz target in the module (listed by its package's test binary), one after
# another, FUZZTIME each; `make test` runs them for 3s each. A crash leaves
# its input in the package's testdata/fuzz/, which go test then replays.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

# The before/after story on ClickHouse 26.9, then the same job into the local
# cluster (scripts/demo.sh starts it: scripts/stack.sh cluster up) with
# target: local by key and sink report --cluster. DEMO_CLUSTER=0 skips the
# cluster run, DEMO_CLUSTER=only runs it alone.
demo: stack-up
	bash scripts/demo.sh

# Change data capture end to end: PostgreSQL 15 and Debezium (scripts/stack.sh
# cdc up), a seeded workload, the sink into ClickHouse 26.9 (DEMO_CLICKHOUSE=18
# for 18.16), and every table compared with PostgreSQL key by key.
demo-cdc: stack-up
	bash scripts/demo-cdc.sh

# The sink against the alternatives on one workload, on ClickHouse 18.16 and 26.9,
# and the cluster table when the local cluster answers (make cluster-up);
# writes bench/results/<date>.md and .json with a table per server.
# Then the steady state per server: a paced stream at 50% and 90% of the
# sink's backlog rate (measured in the same run) for 5 minutes each: client
# CPU per row, RSS, INSERTs/min and end-to-end latency against the batch wait.
# Flags: make bench BENCH_ARGS='--count 200000 --runs 1 --clickhouse 26';
# the cluster table alone: BENCH_ARGS='--cluster-only' (cluster-<date>.md);
# the steady state alone: BENCH_ARGS='--steady-only' (steady-<date>.md).
# Last, many tables: one connector into 100 and 500 tables per server at
# 20 records/s per table (even and Zipf-skewed), 5 minutes per run, the
# insert budget off and on interleaved (manytables-<date>.md); alone and
# shortened: BENCH_ARGS='--manytables-only --duration 1m' (bin/bench manytables -h).
bench: stack-up
	bash scripts/bench.sh $(BENCH_ARGS)

# The delivery-guarantee scenarios at full scale (kill -9, server restarts,
# rebalances, TOO_MANY_PARTS, poison records, a burst while ClickHouse is down);
# on ClickHouse 18.16 then 26.9; prints a table per server and writes them to
# .stack/chaos.md. Flags: make chaos CHAOS_ARGS='--clickhouse 26 --only burst'
# (go run ./tools/chaos -h). `make test` runs a short version of the scenarios
# that do not restart the shared servers.
# batch.mode adaptive against the fixed defaults and the hand-tuned fetch
# setting, in the same run, on a paced workload whose rate changes 20× up and
# down, plus two tables with merges stopped; ClickHouse 26.9 by default
# (about 6 minutes). Writes bench/results/adaptive-<date>.md and .svg.
# Flags: make bench-adaptive ADAPTIVE_ARGS='--clickhouse both' (bin/bench adaptive -h).
bench-adaptive: stack-up
	mkdir -p bin .stack/bench
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/sink ./cmd/sink
	$(GO) build -o bin/bench ./tools/bench
	bin/bench adaptive $(ADAPTIVE_ARGS)

chaos: stack-up
	$(GO) run ./tools/chaos --out .stack/chaos.md $(CHAOS_ARGS)

# The fault drills on the clusters (tools/chaos --suite kafka-cluster|cluster):
# the 3-broker Kafka's leaders, rolling restart, coordinator and DLQ leader, in
# both delivery modes (at-least-once on 18.16, exactly-once on 26.9); a replica
# killed mid-INSERT, ZooKeeper stopped and a shard down on the ClickHouse
# cluster. Their tables are appended to .stack/chaos.md. They kill and restart
# cluster servers through the scripts/stack.sh of the checkout that started
# them (SINK_STACK_ROOT). About 15 minutes.
chaos-drills: stack-up cluster-up kafka-cluster-up
	$(GO) run ./tools/chaos --suite kafka-cluster --clickhouse 18 --out .stack/chaos.md --append $(CHAOS_ARGS)
	$(GO) run ./tools/chaos --suite kafka-cluster --clickhouse 26 --delivery exactly_once --out .stack/chaos.md --append $(CHAOS_ARGS)
	$(GO) run ./tools/chaos --suite cluster --out .stack/chaos.md --append $(CHAOS_ARGS)

# The soak: for DURATION, a paced stream (the loadgen's rate profile, 500
# records/s with a 5x burst every 5 minutes, 2% bad records) from the 3-broker
# Kafka into the ClickHouse cluster on three routes (one topic fanned out into
# two tables, one table gaining columns with schema.evolve: add_columns), a
# SIGTERM restart every 15 minutes and one kill -9, sampled every 10 s; passes
# when (runs of 30 min or more) RSS and goroutines do not trend up, the counts
# and the evolved columns' values are exact and no INSERT error stopped the
# sink. Results, plot and verdict in .stack/soak/ (SOAK_ARGS='--soak-rate N').
DURATION ?= 1h
soak: stack-up cluster-up kafka-cluster-up
	$(GO) run ./tools/chaos --soak $(DURATION) --soak-dir .stack/soak $(SOAK_ARGS)

stack-up:
	bash scripts/stack.sh up

stack-down:
	bash scripts/stack.sh down

stack-status:
	bash scripts/stack.sh status

stack-logs:
	bash scripts/stack.sh logs

# The ClickHouse cluster (ZooKeeper and four 18.16 nodes, sink_cluster = 2 shards x
# 2 replicas; ports in scripts/stack.sh). Not part of stack-up: only the cluster
# tests, scenarios and benchmarks need it.
cluster-up:
	bash scripts/stack.sh cluster up

cluster-down:
	bash scripts/stack.sh cluster down

cluster-status:
	bash scripts/stack.sh cluster status

# The ClickHouse 26.9 cluster (two chdb servers, sink26_cluster = 2 shards x 1
# replica, native 127.0.0.1:19201-19202): the cluster features that exist
# without replication, tested on a current server.
cluster26-up:
	bash scripts/stack.sh cluster26 up

cluster26-down:
	bash scripts/stack.sh cluster26 down

cluster26-status:
	bash scripts/stack.sh cluster26 status

# The 3-broker Kafka (KRaft, brokers 127.0.0.1:9192-9194, replication factor 3,
# min.insync.replicas=2) for the fault drills on a replicated Kafka.
kafka-cluster-up:
	bash scripts/stack.sh kafka-cluster up

kafka-cluster-down:
	bash scripts/stack.sh kafka-cluster down

kafka-cluster-status:
	bash scripts/stack.sh kafka-cluster status

# PostgreSQL 15 (127.0.0.1:15432, wal_level=logical, user sink password sink) and
# a Kafka Connect 4.3 worker with Debezium's PostgreSQL connector (REST
# 127.0.0.1:8083) on the stack's Kafka, for the change-data-capture tests
# (internal/testenv.Postgres, Debezium). Needs stack-up's Kafka.
cdc-up:
	bash scripts/stack.sh cdc up

cdc-down:
	bash scripts/stack.sh cdc down

cdc-status:
	bash scripts/stack.sh cdc status

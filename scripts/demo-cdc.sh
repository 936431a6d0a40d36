#!/usr/bin/env bash
# demo-cdc.sh: change data capture end to end on the local stack. PostgreSQL 15
# and a Kafka Connect worker with Debezium's PostgreSQL connector
# (`scripts/stack.sh cdc up`) feed a seeded workload (every type, composite and
# text keys, REPLICA IDENTITY DEFAULT and FULL, TOASTed values, rollbacks and
# savepoints, primary-key changes, ADD COLUMN, TRUNCATE) through Kafka to
# `sink run` (format debezium-json) into ReplacingMergeTree tables on
# ClickHouse 26.9, then compares every table with PostgreSQL, key by key and
# column by column (tools/pgcdc-demo). DEMO_CLICKHOUSE=18 uses 18.16 instead;
# DEMO_CDC_ARGS passes flags (--seed N, --transactions N, --keep).
# Expects the Kafka/ClickHouse stack up (make demo-cdc does that first).
set -euo pipefail
cd "$(dirname "$0")/.."

case ${DEMO_CLICKHOUSE:-26} in
26) CH_PORT=19000 ;;
18) CH_PORT=9000 ;;
*) echo "demo-cdc: DEMO_CLICKHOUSE must be 26 or 18, not ${DEMO_CLICKHOUSE}" >&2; exit 2 ;;
esac

bash scripts/stack.sh cdc up
mkdir -p bin
go build -o bin/sink ./cmd/sink
go build -o bin/pgcdc-demo ./tools/pgcdc-demo
# shellcheck disable=SC2086 # DEMO_CDC_ARGS is a list of flags
bin/pgcdc-demo --clickhouse "127.0.0.1:$CH_PORT" --sink bin/sink ${DEMO_CDC_ARGS:-}

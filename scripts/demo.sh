#!/usr/bin/env bash
# demo.sh: the sink end to end on the local stack, as a before/after story.
#
#   1. "before": from a minute boundary, events arrive live at $BEFORE_RATE/s
#      for $BEFORE_SECS s into a 12-partition topic, and the connector runs
#      with batch.max_rows: 1, the way a default Kafka Connect sink behaved
#      in seed 004: one INSERT per record.
#   2. It waits for the next minute, so the two runs land in different
#      minutes of ClickHouse's logs (the report counts per minute).
#   3. "after": the same connector, same group, default batching: it
#      continues from the committed offsets over $EVENTS more events, then
#      stops with SIGTERM (flush, commit, leave the group).
#   4. `sink report --split` prints per-minute INSERTs, rows per INSERT and
#      new parts from system.query_log/part_log, and the before/after ratios.
#   5. The same job into the local cluster (sink_cluster: 2 shards x 2
#      replicas of 18.16, started by `scripts/stack.sh cluster up`), with
#      `target: local` by `sharding_key: user_id` (config/local-cluster.yaml):
#      before and after again, then `sink report --cluster sink_cluster` sums
#      every node's logs and splits them per shard. DEMO_CLUSTER=0 skips it,
#      DEMO_CLUSTER=only runs it alone.
# The demo targets the stack's ClickHouse 26.9 (native 127.0.0.1:19000), the
# version users run; DEMO_CLICKHOUSE=18 runs it against 18.16 on 9000 instead.
# Expects the stack up (make demo does that first).
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${DEMO_EVENTS:-200000}
BEFORE_RATE=${DEMO_BEFORE_RATE:-50}
BEFORE_SECS=50
BEFORE=$(( BEFORE_RATE * BEFORE_SECS ))
TOPIC=demo_events
TABLE=demo_events
CONFIG=config/local.yaml
case ${DEMO_CLICKHOUSE:-26} in
26) CH_PORT=19000 ;;
18) CH_PORT=9000 ;;
*) echo "demo: DEMO_CLICKHOUSE must be 26 or 18, not ${DEMO_CLICKHOUSE}" >&2; exit 2 ;;
esac
CH="clickhouse-client --port $CH_PORT"
export SINK_CLICKHOUSE__ADDRS=127.0.0.1:$CH_PORT

mkdir -p bin .stack
go build -o bin/sink ./cmd/sink
go build -o bin/loadgen ./tools/loadgen

# A fresh group each run, so the demo always starts from the beginning; both
# runs share it, like a connector that is retuned and restarted.
export SINK_KAFKA__GROUP="demo-$(date +%s)"
export SINK_LOG__FORMAT=console
# The HTTP endpoint is not needed here, and a free port is not guaranteed.
export SINK_HTTP__LISTEN=

# run_until LOG ROWS: runs the sink on $CONFIG in the background until
# $COUNT_SQL (on $CH) says ROWS rows, then stops it with SIGTERM and waits for
# a clean exit.
COUNT_SQL="SELECT count() FROM default.$TABLE"
run_until() {
  local log=$1 want=$2 rows=0 pid
  bin/sink run --config "$CONFIG" 2> "$log" &
  pid=$!
  trap "kill $pid 2>/dev/null || true" EXIT
  for _ in $(seq 1 600); do
    # A server that does not answer this once (a cluster node restarting)
    # is asked again on the next turn.
    rows=$($CH -q "$COUNT_SQL" 2>/dev/null) || rows=0
    [ "$rows" -ge "$want" ] && break
    kill -0 $pid 2>/dev/null || { echo "demo: the sink exited early; its log:"; tail -20 "$log"; exit 1; }
    sleep 0.5
  done
  kill -TERM $pid
  wait $pid || { echo "demo: the sink did not stop cleanly; its log:"; tail -20 "$log"; exit 1; }
  trap - EXIT
  [ "$rows" -ge "$want" ] || { echo "demo: only $rows of $want rows landed"; exit 1; }
}

# wait_minute: sleeps until the next minute boundary, saying why.
wait_minute() {
  local now next
  now=$(date +%s)
  next=$(( (now / 60 + 1) * 60 ))
  echo "demo: waiting $(( next - now ))s for $(date -d @$next +%H:%M:%S): $1"
  sleep $(( next - now ))
}


# single_server: steps 1-4 on one server.
single_server() {
  echo "demo: ClickHouse $($CH -q 'SELECT version()') at $SINK_CLICKHOUSE__ADDRS; creating table default.$TABLE"
  $CH -q "DROP TABLE IF EXISTS default.$TABLE"
  $CH -q "CREATE TABLE default.$TABLE (
    id UInt64, user_id UInt64, ts DateTime, event_type String, channel String,
    cost Decimal(18, 2), payload String, _topic String, _partition UInt16, _offset UInt64,
    inserted_at DateTime DEFAULT now()
  ) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)"

  bin/loadgen --topic "$TOPIC" --partitions 12 --recreate --count 0
  bin/sink check --config "$CONFIG"

  echo
  wait_minute "the per-record run then fills one minute of the logs"
  echo "demo: BEFORE: $BEFORE_RATE events/s for ${BEFORE_SECS}s, the sink with batch.max_rows: 1 (one INSERT per record)"
  start=$(date +%s)
  bin/loadgen --topic "$TOPIC" --count "$BEFORE" --rate "$BEFORE_RATE" 2>/dev/null &
  SINK_BATCH__MAX_ROWS=1 run_until .stack/demo-before.log "$BEFORE"
  wait
  echo "demo: before run done in $(( $(date +%s) - start ))s"

  # The split is the next minute boundary: the report's per-minute buckets then
  # hold one regime each.
  split=$(( ($(date +%s) / 60 + 1) * 60 ))
  wait_minute "the batched run then starts in a new minute"

  echo
  echo "demo: AFTER: $EVENTS more events, the same connector and group with default batching"
  bin/loadgen --topic "$TOPIC" --count "$EVENTS" --start-id "$BEFORE"
  t0=$(date +%s)
  run_until .stack/demo-sink.log "$(( BEFORE + EVENTS ))"
  took=$(( $(date +%s) - t0 ))
  total=$($CH -q "SELECT count() FROM default.$TABLE")

  echo
  echo "demo: sink log of the batched run (last lines, .stack/demo-sink.log has all):"
  tail -3 .stack/demo-sink.log
  echo
  echo "demo: $(( BEFORE + EVENTS )) events -> $total rows in default.$TABLE; the batched run took ${took}s"
  echo "demo: bin/sink report --clickhouse $SINK_CLICKHOUSE__ADDRS --table default.$TABLE --since $start --split $split --chart .stack/demo-report.svg"
  echo
  bin/sink report --clickhouse "$SINK_CLICKHOUSE__ADDRS" --table "default.$TABLE" --since "$start" --split "$split" --chart .stack/demo-report.svg
}

# cluster: step 5, the same job into the local cluster.
cluster() {
  echo
  echo "demo: CLUSTER: the same job into sink_cluster (2 shards x 2 replicas of 18.16), target: local by user_id"
  bash scripts/stack.sh cluster up
  CONFIG=config/local-cluster.yaml
  CTOPIC=demo_cluster_events
  CDB=demo_cluster
  CH="clickhouse-client --port 9201"
  # config/local-cluster.yaml names ch1; the single-server part's address
  # must not override it.
  export SINK_CLICKHOUSE__ADDRS=127.0.0.1:9201
  COUNT_SQL="SELECT count() FROM $CDB.demo_events_all"
  # DDL for every node once goes through sink_cluster_nodes (each node its own
  # shard). The replicated table's ZooKeeper path is new each run, so a table
  # dropped earlier leaves nothing behind that this one would collide with.
  zk="/clickhouse/tables/{shard}/${CDB}_$(date +%s)/demo_events"
  $CH -q "DROP DATABASE IF EXISTS $CDB ON CLUSTER sink_cluster_nodes" >/dev/null
  $CH -q "CREATE DATABASE $CDB ON CLUSTER sink_cluster_nodes" >/dev/null
  $CH -q "CREATE TABLE $CDB.demo_events ON CLUSTER sink_cluster_nodes (
    id UInt64, user_id UInt64, ts DateTime, event_type String, channel String,
    cost Decimal(18, 2), payload String, _topic String, _partition UInt16, _offset UInt64,
    inserted_at DateTime DEFAULT now()
  ) ENGINE = ReplicatedMergeTree('$zk', '{replica}') PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)" >/dev/null
  $CH -q "CREATE TABLE $CDB.demo_events_all ON CLUSTER sink_cluster_nodes AS $CDB.demo_events
    ENGINE = Distributed(sink_cluster, $CDB, demo_events, cityHash64(user_id))" >/dev/null
  echo "demo: on every node: $CDB.demo_events (ReplicatedMergeTree) and $CDB.demo_events_all (Distributed by cityHash64(user_id))"

  bin/loadgen --topic "$CTOPIC" --partitions 12 --recreate --count 0
  bin/sink check --config "$CONFIG"
  export SINK_KAFKA__GROUP="demo-cluster-$(date +%s)"

  echo
  wait_minute "the per-record run into the cluster then fills one minute of the nodes' logs"
  echo "demo: CLUSTER BEFORE: $BEFORE_RATE events/s for ${BEFORE_SECS}s, batch.max_rows: 1 (one INSERT per record, each to its row's shard)"
  cstart=$(date +%s)
  bin/loadgen --topic "$CTOPIC" --count "$BEFORE" --rate "$BEFORE_RATE" 2>/dev/null &
  SINK_BATCH__MAX_ROWS=1 run_until .stack/demo-cluster-before.log "$BEFORE"
  wait
  echo "demo: cluster before run done in $(( $(date +%s) - cstart ))s"
  csplit=$(( ($(date +%s) / 60 + 1) * 60 ))
  wait_minute "the batched run into the cluster then starts in a new minute"

  echo
  echo "demo: CLUSTER AFTER: $EVENTS more events, default batching: each batch becomes one INSERT per shard"
  bin/loadgen --topic "$CTOPIC" --count "$EVENTS" --start-id "$BEFORE"
  t0=$(date +%s)
  run_until .stack/demo-cluster-sink.log "$(( BEFORE + EVENTS ))"
  took=$(( $(date +%s) - t0 ))
  echo
  echo "demo: rows per shard and replica (each replica holds its shard's rows):"
  for p in 9201 9202 9203 9204; do
    echo "  127.0.0.1:$p: $(clickhouse-client --port $p -q "SELECT count() FROM $CDB.demo_events") rows"
  done
  echo "demo: $(( BEFORE + EVENTS )) events -> $($CH -q "$COUNT_SQL") rows in $CDB.demo_events_all; the batched run took ${took}s"
  echo "demo: bin/sink report --clickhouse 127.0.0.1:9201 --cluster sink_cluster --table $CDB.demo_events --since $cstart --split $csplit"
  echo
  bin/sink report --clickhouse 127.0.0.1:9201 --cluster sink_cluster --table "$CDB.demo_events" --since "$cstart" --split "$csplit"
}

case ${DEMO_CLUSTER:-1} in
0) single_server ;;
only) cluster ;;
*) single_server; cluster ;;
esac

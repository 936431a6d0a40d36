#!/usr/bin/env bash
# demo.sh: the sink end to end on the local stack. Creates a demo table and a
# 12-partition topic, produces events, runs the sink until every event is a
# row, stops it with SIGTERM (flush + commit), and prints what ClickHouse saw:
# rows, INSERTs, rows per INSERT and parts, from system.query_log/part_log.
# Expects the stack up (make demo does that first).
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${DEMO_EVENTS:-200000}
TOPIC=demo_events
TABLE=demo_events
CONFIG=config/local.yaml
CH="clickhouse-client --port 9000"

mkdir -p bin .stack
go build -o bin/sink ./cmd/sink
go build -o bin/loadgen ./cmd/loadgen

echo "demo: creating table default.$TABLE"
$CH -q "DROP TABLE IF EXISTS default.$TABLE"
$CH -q "CREATE TABLE default.$TABLE (
  id UInt64, user_id UInt64, ts DateTime, event_type String, channel String,
  cost Decimal(18, 2), payload String, _topic String, _partition UInt16, _offset UInt64,
  inserted_at DateTime DEFAULT now()
) ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (user_id, ts)"

echo "demo: producing $EVENTS events to a fresh topic $TOPIC (12 partitions)"
bin/loadgen --topic "$TOPIC" --partitions 12 --recreate --count "$EVENTS"

bin/sink check --config "$CONFIG"

# A fresh group each run, so the demo always starts from the beginning.
export SINK_KAFKA__GROUP="demo-$(date +%s)"
export SINK_LOG__FORMAT=console
start=$(date +%s)
bin/sink run --config "$CONFIG" 2> .stack/demo-sink.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT

rows=0
for _ in $(seq 1 600); do
  rows=$($CH -q "SELECT count() FROM default.$TABLE")
  [ "$rows" -ge "$EVENTS" ] && break
  kill -0 $pid 2>/dev/null || { echo "demo: the sink exited early; its log:"; tail -20 .stack/demo-sink.log; exit 1; }
  sleep 0.5
done
kill -TERM $pid
wait $pid || { echo "demo: the sink did not stop cleanly; its log:"; tail -20 .stack/demo-sink.log; exit 1; }
trap - EXIT
took=$(( $(date +%s) - start ))
[ "$rows" -ge "$EVENTS" ] || { echo "demo: only $rows of $EVENTS rows landed"; exit 1; }

$CH -q "SYSTEM FLUSH LOGS"
echo
echo "demo: sink log (last lines, .stack/demo-sink.log has all):"
tail -5 .stack/demo-sink.log
echo
echo "demo: $EVENTS events -> $($CH -q "SELECT count() FROM default.$TABLE") rows in default.$TABLE in ${took}s"
$CH -q "
SELECT count() AS inserts, sum(written_rows) AS rows, round(sum(written_rows) / count()) AS rows_per_insert,
       max(query_duration_ms) AS max_insert_ms
FROM system.query_log
WHERE type = 2 AND query LIKE 'INSERT INTO \`default\`.\`$TABLE\`%' AND event_time >= toDateTime($start)
FORMAT PrettyCompact"
$CH -q "
SELECT count() AS new_parts, sum(rows) AS rows_in_new_parts
FROM system.part_log
WHERE event_type = 1 AND database = 'default' AND table = '$TABLE' AND event_time >= toDateTime($start)
FORMAT PrettyCompact"

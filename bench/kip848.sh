#!/usr/bin/env bash
# Scale-out from 1 to 3 sink processes and back under a paced load, once per
# kafka.group_protocol (classic, consumer) per run, the two interleaved and
# their order alternated from run to run. Each round gets a fresh
# 12-partition topic, table and group. Per round it reports, from the table
# itself (every INSERT stamps its rows with one `inserted DateTime64(3)
# DEFAULT now64(3)`):
#   gap_out / gap_in  the longest time without an INSERT in the 20 s after
#                     the two extra members are started / sent SIGTERM
#   ins_min           INSERTs per minute from the scale-out to 20 s after
#                     the scale-in
#   dups              rows whose (_topic, _partition, _offset) is there
#                     twice (count() - uniqExact), at least once delivery
#   settle_s          seconds from the start of an extra member to its last
#                     "partitions assigned" (its log, 1 s resolution; the
#                     later of the two extra members)
#   running           the protocol the group ran, from the sink's own log
# Then the median and range of each measure per protocol, and the machine
# (nproc, CPU, load average before and after: other work on it shows).
# Usage: bench/kip848.sh [runs]   (RATE, HOLD, CH_PORT in the environment)
# Needs the local stack (Kafka 127.0.0.1:9092, ClickHouse 26.9 on :19000).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-3}
RATE=${RATE:-2000}   # events/s
HOLD=${HOLD:-20}     # seconds in each phase (1 member, 3 members, 1 member)
CH_PORT=${CH_PORT:-19000}
CH="clickhouse-client --port $CH_PORT"
DB=kip848_bench
OUT=${OUT:-.cache/kip848}
mkdir -p bin "$OUT"
go build -o bin/sink ./cmd/sink
go build -o bin/loadgen ./tools/loadgen
$CH -q "CREATE DATABASE IF NOT EXISTS $DB"

now() { date +%s.%N; }

# round PROTO N: one measured scale-out and scale-in; prints one result line.
round() {
  local proto=$1 n=$2 id topic table cfg
  id="${proto}_${n}_$(date +%s)"
  topic="kip848_$id"
  table="$DB.e_$id"
  cfg="$OUT/$id.yaml"
  $CH -q "CREATE TABLE $table (id UInt64, user_id UInt64, ts DateTime, event_type String, channel String,
    cost Decimal(18, 2), payload String, _topic String, _partition Int32, _offset Int64,
    inserted DateTime64(3) DEFAULT now64(3)) ENGINE = MergeTree ORDER BY (_topic, _partition, _offset)"
  bin/loadgen --topic "$topic" --partitions 12 --recreate --count 0 >/dev/null 2>&1
  cat > "$cfg" <<YAML
name: kip848-$id
kafka: {brokers: [127.0.0.1:9092], topics: [$topic], group_protocol: $proto, fetch_max_wait: 200ms}
clickhouse: {addrs: [127.0.0.1:$CH_PORT], database: $DB}
batch: {max_rows: 100000, max_latency: 1200ms}
routes: [{topic: $topic, table: e_$id}]
http: {listen: ""}
log: {format: json}
YAML
  local events=$(( RATE * (3 * HOLD + 5) ))
  bin/loadgen --topic "$topic" --count "$events" --rate "$RATE" >/dev/null 2>&1 &
  local gen=$!
  bin/sink run --config "$cfg" 2> "$OUT/$id.1.log" &
  local s1=$!
  sleep "$HOLD"
  local t_out; t_out=$(now)
  bin/sink run --config "$cfg" 2> "$OUT/$id.2.log" &
  local s2=$!
  bin/sink run --config "$cfg" 2> "$OUT/$id.3.log" &
  local s3=$!
  sleep "$HOLD"
  local t_in; t_in=$(now)
  kill -TERM $s2 $s3
  wait $s2 $s3 || true
  sleep "$HOLD"
  local t_end; t_end=$(now)
  wait $gen
  local rows=0
  for _ in $(seq 1 240); do
    rows=$($CH -q "SELECT uniqExact(_topic, _partition, _offset) FROM $table")
    [ "$rows" -ge "$events" ] && break
    sleep 0.5
  done
  kill -TERM $s1; wait $s1 || true
  local gap="arrayMax(arrayDifference(arrayConcat([a], arraySort(groupUniqArrayIf(toFloat64(inserted), toFloat64(inserted) BETWEEN a AND b)), [b])))"
  local q="SELECT
    round((WITH $t_out AS a, $t_out + $HOLD AS b SELECT $gap FROM $table), 2),
    round((WITH $t_in AS a, $t_in + $HOLD AS b SELECT $gap FROM $table), 2),
    round(uniqExactIf(inserted, toFloat64(inserted) BETWEEN $t_out AND $t_end) * 60 / ($t_end - $t_out), 1),
    count() - uniqExact(_topic, _partition, _offset),
    uniqExact(_topic, _partition, _offset)
    FROM $table FORMAT TSV"
  local r; r=$($CH -q "$q")
  local running
  running=$(grep -ho '"running":"[a-z]*"' "$OUT/$id".[123].log | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  local settle
  settle=$(python3 - "$OUT/$id".[23].log <<'PY'
import datetime, json, sys
worst = 0.0
for f in sys.argv[1:]:
    start = last = None
    for line in open(f):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        t = datetime.datetime.fromisoformat(d["time"].replace("Z", "+00:00"))
        if d["message"] == "started" and start is None:
            start = t
        if d["message"] == "partitions assigned":
            last = t
    if start and last:
        worst = max(worst, (last - start).total_seconds())
print(worst)
PY
)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$proto" "$n" "$r" "$events" "$settle" "$running"
  $CH -q "DROP TABLE $table"
}

echo "# $(date -u '+%F %T') UTC, nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
TSV="$OUT/results-$(date +%s).tsv"
{
printf 'protocol\trun\tgap_out_s\tgap_in_s\tins_min\tdups\tdistinct\tproduced\tsettle_s\trunning\n'
for n in $(seq 1 "$RUNS"); do
  if [ $(( n % 2 )) -eq 1 ]; then order="classic consumer"; else order="consumer classic"; fi
  for p in $order; do round "$p" "$n"; done
done
} | tee "$TSV"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$TSV" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
head, rows = rows[0], rows[1:]
cols = ["gap_out_s", "gap_in_s", "ins_min", "dups", "settle_s"]
print()
print("| protocol | rounds | " + " | ".join(c + " median (min–max)" for c in cols) + " |")
print("|---|---|" + "---|" * len(cols))
for p in ("classic", "consumer"):
    rs = [r for r in rows if r[0] == p]
    if not rs:
        continue
    cells = []
    for c in cols:
        v = [float(r[head.index(c)]) for r in rs]
        cells.append("%g (%g–%g)" % (statistics.median(v), min(v), max(v)))
    print("| %s | %d | %s |" % (p, len(rs), " | ".join(cells)))
PY

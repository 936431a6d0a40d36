-- Run once by the clickhouse/clickhouse-server image on an empty data volume
-- (docker-compose.yml). The target of the `events` route in config/compose.yaml.
-- ReplacingMergeTree: duplicates from a replay after a crash or rebalance collapse
-- on merge and under SELECT ... FINAL.
CREATE TABLE IF NOT EXISTS default.events
(
    ts      DateTime,
    id      UInt64,
    type    String,
    payload String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (type, id);

-- Run by the one-shot init-table service of docker-compose.yml on every `up`
-- (idempotent). The target of the `events` route in config/compose.yaml.
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

-- Hourly rollups (see store/rollup.go): counters per hour, source or
-- destination, metric, and writer shard, summed on read.
CREATE TABLE stats_hourly (
    hour   INTEGER NOT NULL,   -- unix seconds of the hour's start
    scope  TEXT    NOT NULL,   -- source | destination
    name   TEXT    NOT NULL,
    metric TEXT    NOT NULL,
    shard  TEXT    NOT NULL,
    value  INTEGER NOT NULL,
    PRIMARY KEY (hour, scope, name, metric, shard)
) WITHOUT ROWID;

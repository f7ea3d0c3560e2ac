-- Hourly rollups (see store/rollup.go): counters per hour, source or
-- destination, metric, and writer shard (each replica's writers write rows
-- of their own, so commits never queue on a shared counter), summed on read.
CREATE TABLE stats_hourly (
    hour   TIMESTAMPTZ NOT NULL,
    scope  TEXT        NOT NULL,
    name   TEXT        NOT NULL,
    metric TEXT        NOT NULL,
    shard  TEXT        NOT NULL,
    value  BIGINT      NOT NULL,
    PRIMARY KEY (hour, scope, name, metric, shard)
);

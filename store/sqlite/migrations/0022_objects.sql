-- The sources and destinations created at runtime, through the API
-- (store.Objects): one row per kind and name, the name unique per kind
-- whatever the tenant (a source's name is its intake URL, one for all).
-- spec is JSON under the config file's field names, its secrets sealed
-- (internal/secretbox); version is bumped by each update, the optimistic
-- check of a change.
CREATE TABLE objects (
    kind       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    tenant     TEXT    NOT NULL DEFAULT '',
    version    INTEGER NOT NULL,
    spec       TEXT    NOT NULL,
    created_at INTEGER NOT NULL, -- unix milliseconds, as every time here
    updated_at INTEGER NOT NULL,
    created_by TEXT    NOT NULL DEFAULT '',
    updated_by TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (kind, name)
);
CREATE INDEX objects_tenant ON objects (tenant, kind, name);

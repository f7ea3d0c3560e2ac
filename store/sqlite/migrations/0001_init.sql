-- Events are claimed by the unique (source, key) constraint: the insert that
-- wins is the one and only event; every other insert does nothing.
CREATE TABLE events (
    id           INTEGER PRIMARY KEY,
    source       TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    keyless      INTEGER NOT NULL DEFAULT 0,
    content_type TEXT    NOT NULL,
    body         BLOB    NOT NULL,
    received_at  INTEGER NOT NULL, -- unix ms
    expires_at   INTEGER NOT NULL, -- unix ms: the key is kept at least until then
    UNIQUE (source, key)
);
CREATE INDEX events_expires_at ON events (expires_at);

-- One delivery per event and destination. A worker owns a delivery while
-- lease_token is set and lease_expires_at is in the future.
CREATE TABLE deliveries (
    id               INTEGER PRIMARY KEY,
    event_id         INTEGER NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    destination      TEXT    NOT NULL,
    state            TEXT    NOT NULL DEFAULT 'pending', -- pending | delivered | dead
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL, -- unix ms
    lease_token      TEXT,
    lease_expires_at INTEGER,          -- unix ms
    last_status      INTEGER,
    last_error       TEXT,
    updated_at       INTEGER NOT NULL,
    UNIQUE (event_id, destination)
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_event ON deliveries (event_id);

-- Every attempt, kept for the operator (dashboard, dead-letter forensics).
CREATE TABLE attempts (
    id          INTEGER PRIMARY KEY,
    delivery_id INTEGER NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    status_code INTEGER NOT NULL,
    error       TEXT    NOT NULL,
    outcome     TEXT    NOT NULL
);
CREATE INDEX attempts_delivery ON attempts (delivery_id);

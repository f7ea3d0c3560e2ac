-- Events are claimed by the unique (source, key) constraint: the insert that
-- wins is the one and only event, across every replica; every other insert
-- does nothing.
CREATE TABLE events (
    id           BIGSERIAL PRIMARY KEY,
    source       TEXT        NOT NULL,
    key          TEXT        NOT NULL,
    keyless      BOOLEAN     NOT NULL DEFAULT FALSE,
    content_type TEXT        NOT NULL,
    body         BYTEA       NOT NULL,
    received_at  TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL, -- the key is kept at least until then
    UNIQUE (source, key)
);
CREATE INDEX events_expires_at ON events (expires_at);

-- One delivery per event and destination. A worker owns a delivery while
-- lease_token is set and lease_expires_at is in the future; workers of all
-- replicas lease with FOR UPDATE SKIP LOCKED.
CREATE TABLE deliveries (
    id               BIGSERIAL PRIMARY KEY,
    event_id         BIGINT      NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    destination      TEXT        NOT NULL,
    state            TEXT        NOT NULL DEFAULT 'pending', -- pending | delivered | dead
    attempts         INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    lease_token      TEXT,
    lease_expires_at TIMESTAMPTZ,
    last_status      INTEGER,
    last_error       TEXT,
    updated_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (event_id, destination)
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';

-- Every attempt, kept for the operator.
CREATE TABLE attempts (
    id          BIGSERIAL PRIMARY KEY,
    delivery_id BIGINT      NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    attempt     INTEGER     NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL,
    duration_ms BIGINT      NOT NULL,
    status_code INTEGER     NOT NULL,
    error       TEXT        NOT NULL,
    outcome     TEXT        NOT NULL
);
CREATE INDEX attempts_delivery ON attempts (delivery_id);

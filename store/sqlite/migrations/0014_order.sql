-- Kept per backend, beside store/postgres/migrations/0014_order.sql: each
-- package embeds its own migrations, and the column types differ (this
-- file is its dialect's). Editing an applied migration changes nothing for
-- a database that ran it (only its version is recorded): change the schema
-- with a new migration, in both.

-- Order per entity (see store/order.go). An ordered delivery names its
-- entity (source/entity) and the version it is ordered by; order_waiting
-- marks one parked behind its entity's delivery in flight or fifo head,
-- which an outcome of the entity wakes.
ALTER TABLE deliveries ADD COLUMN order_entity TEXT;
ALTER TABLE deliveries ADD COLUMN order_version INTEGER;
ALTER TABLE deliveries ADD COLUMN order_text TEXT;
ALTER TABLE deliveries ADD COLUMN order_mode TEXT;
ALTER TABLE deliveries ADD COLUMN order_deliver_stale INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN order_waiting INTEGER NOT NULL DEFAULT 0;
CREATE INDEX deliveries_order_due ON deliveries (next_attempt_at)
    WHERE state = 'pending' AND order_entity IS NOT NULL;
CREATE INDEX deliveries_order_head ON deliveries (destination, order_entity, order_version, id)
    WHERE state = 'pending' AND order_entity IS NOT NULL;

-- Per (destination, entity): the highest version delivered, and the
-- delivery in flight. Kept until the last delivered event's window ends.
CREATE TABLE order_heads (
    destination    TEXT    NOT NULL,
    entity         TEXT    NOT NULL,
    version        INTEGER,
    version_text   TEXT,
    inflight_id    INTEGER,
    inflight_until INTEGER, -- unix ms
    expires_at     INTEGER NOT NULL DEFAULT 0, -- unix ms
    PRIMARY KEY (destination, entity)
);
CREATE INDEX order_heads_expires_at ON order_heads (expires_at);

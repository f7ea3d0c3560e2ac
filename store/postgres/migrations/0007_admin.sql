-- The operator surface: the start of each attempt's answer, indexes for
-- listing events per source and dead letters newest first, paused
-- destinations (stored: a pause survives restarts and applies to every
-- replica), and the audit log.
ALTER TABLE attempts ADD COLUMN response TEXT NOT NULL DEFAULT '';
CREATE INDEX events_source_id ON events (source, id);
CREATE INDEX deliveries_dead ON deliveries (destination, id) WHERE state = 'dead';
CREATE TABLE destination_pauses (
    destination TEXT        PRIMARY KEY,
    paused_at   TIMESTAMPTZ NOT NULL
);
CREATE TABLE audit (
    id     BIGSERIAL   PRIMARY KEY,
    at     TIMESTAMPTZ NOT NULL,
    actor  TEXT        NOT NULL,
    action TEXT        NOT NULL,
    target TEXT        NOT NULL,
    count  INTEGER     NOT NULL
);

-- A source's body_retention: the body may go before the key. body_expires_at
-- is when (NULL: with the event); body_dropped_at, when it went (the body is
-- then empty and the key still a barrier). The index holds only the bodies
-- still waiting to go, so the sweep touches nothing else.
ALTER TABLE events ADD COLUMN body_expires_at INTEGER;
ALTER TABLE events ADD COLUMN body_dropped_at INTEGER;
CREATE INDEX events_body_expires_at ON events (body_expires_at) WHERE body_dropped_at IS NULL AND body_expires_at IS NOT NULL;

-- A source's body_retention: the body may go before the key. body_expires_at
-- is when (NULL: with the event); body_dropped_at, when it went (the key is
-- still a barrier). The index holds only the bodies still waiting to go, so
-- the sweep touches nothing else.
ALTER TABLE events ADD COLUMN body_expires_at INTEGER;
ALTER TABLE events ADD COLUMN body_dropped_at INTEGER;
CREATE INDEX events_body_expires_at ON events (body_expires_at) WHERE body_dropped_at IS NULL AND body_expires_at IS NOT NULL;

-- Such an event's body lives here, not in events.body (left empty), so that
-- dropping it deletes a row: SQLite frees and reuses the pages of deleted
-- rows, while a body emptied in place leaves its row's space in its page
-- (new events go to the table's end), and nothing would be saved.
CREATE TABLE bodies (
    event_id INTEGER PRIMARY KEY REFERENCES events (id) ON DELETE CASCADE,
    body     BLOB    NOT NULL
);

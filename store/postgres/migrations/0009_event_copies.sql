-- How many duplicate copies of an event arrived, and when the last did:
-- counted by intake and committed with the rollups, about once a second.
ALTER TABLE events ADD COLUMN copies BIGINT NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN last_copy_at TIMESTAMPTZ;

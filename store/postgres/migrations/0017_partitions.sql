-- Bodies and attempts live in tables partitioned by the day their event's
-- body may go (drop_at: the body_retention's end, else the key's), so that
-- expiring a day is dropping a partition instead of deleting its rows one by
-- one (see partitions.go). The claim stays where it was: events keeps its
-- unique (source, key), unpartitioned, so one index decides every duplicate
-- (a unique constraint of a partitioned table must hold its partition key,
-- and would then only be unique within a day).
--
-- Each table's DEFAULT partition ("kept") holds what no day partition does:
-- the bodies and attempts of events a delivery still needs past their day
-- (pending, or dead and the operator's to replay; moved there, drop_at
-- 'infinity', before their day is dropped), and rows that arrived before
-- their day's partition was made (moved into it when it is). Only the kept
-- partitions reference their event or delivery: they are deleted with it.
-- A day partition's rows outlive their event by at most the rest of the day.

-- body_at is the body's drop_at (NULL: an event stored before this
-- migration, whose body is still events.body); body_size its length.
ALTER TABLE events ADD COLUMN body_at TIMESTAMPTZ;
ALTER TABLE events ADD COLUMN body_size INTEGER;

CREATE TABLE event_bodies (
    event_id BIGINT      NOT NULL,
    drop_at  TIMESTAMPTZ NOT NULL,
    body     BYTEA       NOT NULL
) PARTITION BY RANGE (drop_at);
CREATE INDEX event_bodies_event ON event_bodies (event_id);
CREATE TABLE event_bodies_kept PARTITION OF event_bodies DEFAULT;
ALTER TABLE event_bodies_kept ADD CONSTRAINT event_bodies_kept_event
    FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE;
CREATE INDEX event_bodies_kept_drop_at ON event_bodies_kept (drop_at);

-- The attempts recorded so far become the attempts' kept partition, as they
-- are (their drop_at 'infinity': they go with their delivery, as before).
ALTER TABLE attempts RENAME TO attempts_kept;
ALTER TABLE attempts_kept ADD COLUMN drop_at TIMESTAMPTZ NOT NULL DEFAULT 'infinity';
CREATE TABLE attempts (LIKE attempts_kept INCLUDING DEFAULTS) PARTITION BY RANGE (drop_at);
ALTER TABLE attempts ATTACH PARTITION attempts_kept DEFAULT;
CREATE INDEX attempts_by_delivery ON attempts (delivery_id);
CREATE INDEX attempts_kept_drop_at ON attempts_kept (drop_at);

-- Every body with a finite body_at before this instant is gone: the day
-- partitions before it were dropped. It only moves forward, in the
-- transaction that drops them; a replay reads it FOR SHARE.
INSERT INTO oncehook_meta (name, value) VALUES ('bodies_dropped_before', '-infinity');

-- What the drop looks for first: the deliveries that keep their event's body.
CREATE INDEX deliveries_keeping ON deliveries (event_id) WHERE state IN ('pending', 'dead');

-- The source's destinations that did not want the event (their types or
-- filter did not match), comma-separated (a destination's name holds no
-- comma): why an event went nowhere, or not to one of them.
ALTER TABLE events ADD COLUMN filtered TEXT NOT NULL DEFAULT '';

-- The W3C traceparent of the intake span that stored the event (empty when
-- not traced): its deliveries continue that trace.
ALTER TABLE events ADD COLUMN trace TEXT NOT NULL DEFAULT '';

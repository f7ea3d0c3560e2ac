-- A delivery whose first attempt succeeds (the common case) records that
-- attempt on its own row, in the same UPDATE that marks it delivered,
-- instead of inserting an attempt row: one write per event fewer on the
-- single writer (#30). Every other attempt (a retry, a failure, a replay,
-- a first success after a replay) is still a row in attempts; readers put
-- both together (store/internal/sqlstore.History). NULL: no such attempt.
-- Rows written before this migration keep their attempt rows and read the
-- same.
ALTER TABLE deliveries ADD COLUMN first_started_at INTEGER; -- unix ms
ALTER TABLE deliveries ADD COLUMN first_duration_ms INTEGER;
ALTER TABLE deliveries ADD COLUMN first_status INTEGER;
ALTER TABLE deliveries ADD COLUMN first_response TEXT;
ALTER TABLE deliveries ADD COLUMN first_script_digest TEXT;
ALTER TABLE deliveries ADD COLUMN first_sent_digest TEXT;

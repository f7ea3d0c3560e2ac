-- UNIQUE (event_id, destination) already indexes deliveries by event_id (its
-- leading column): this second index cost every delivery one more B-tree
-- insert on the single writer, for nothing.
DROP INDEX IF EXISTS deliveries_event;

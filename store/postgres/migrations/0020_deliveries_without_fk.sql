-- A delivery's foreign key to its event cost every claim a referential
-- check per delivery (a trigger running a locking lookup of the event it
-- was inserted beside, in the same statement): a fifth of the claim
-- statement's time (#30). Deliveries are only ever inserted with their
-- event, or for an event held FOR UPDATE (AddDelivery); the sweep, which
-- alone deletes events, deletes their deliveries in the same statement
-- (sweepEvents), so no delivery outlives its event.
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_event_id_fkey;

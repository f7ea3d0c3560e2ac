-- The provider's event type (invoice.paid, PURCHASE_APPROVED), which
-- destinations filter on; empty for an untyped event (and for every event
-- stored before this migration). Not indexed: intake pays for every index
-- on every insert, and the operator's type filter reads the id index,
-- newest first, until a page is full.
ALTER TABLE events ADD COLUMN type TEXT NOT NULL DEFAULT '';

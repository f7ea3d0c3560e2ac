-- The provider's headers worth forwarding (X-GitHub-Event, X-Shopify-Topic,
-- ...), as JSON: a destination routes on them, and the body alone does not
-- carry them. Credentials are never stored.
ALTER TABLE events ADD COLUMN headers TEXT NOT NULL DEFAULT '{}';

-- The dashboard's sessions: a digest of the cookie's random id, the API
-- token's name, the session's CSRF token, and when it ends.
CREATE TABLE sessions (
    id_hash    TEXT    PRIMARY KEY,
    token      TEXT    NOT NULL,
    csrf       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX sessions_expires ON sessions (expires_at);

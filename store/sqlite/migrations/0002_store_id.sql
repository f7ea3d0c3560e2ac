-- A random identity for this database's events, made once. Layers that
-- cache what the store committed (Redis) namespace their keys with it, so a
-- cache left over from another database can never answer for this one.
CREATE TABLE oncehook_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO oncehook_meta (name, value) VALUES ('store_id', lower(hex(randomblob(16))));

-- The effects ledger: one record per business key (see store/effect.go).
-- A pending record is leased to the owner holding token until
-- lease_expires_at; a released one has no lease and is claimable at once.
-- Final records (done, failed, expired) are swept after expires_at.
CREATE TABLE effects (
    key              TEXT        PRIMARY KEY,
    state            TEXT        NOT NULL,            -- pending | done | failed | expired
    token            TEXT        NOT NULL DEFAULT '',
    attempt          INTEGER     NOT NULL,
    lease_expires_at TIMESTAMPTZ,                     -- NULL when not leased
    fingerprint      TEXT        NOT NULL DEFAULT '',
    deadline         TIMESTAMPTZ,
    result           BYTEA,                           -- the owner's JSON, byte for byte
    error            TEXT        NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    expires_at       TIMESTAMPTZ                      -- when a final record is swept
);
CREATE INDEX effects_state ON effects (state, key);
CREATE INDEX effects_expires ON effects (expires_at) WHERE expires_at IS NOT NULL;

-- Every claim that took the lease, and how it ended.
CREATE TABLE effect_attempts (
    key        TEXT        NOT NULL REFERENCES effects (key) ON DELETE CASCADE,
    attempt    INTEGER     NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL,
    ended_at   TIMESTAMPTZ,
    outcome    TEXT        NOT NULL DEFAULT '',
    error      TEXT        NOT NULL DEFAULT '',
    PRIMARY KEY (key, attempt)
);

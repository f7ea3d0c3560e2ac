-- Flow control shared by every replica: the sends granted per destination
-- and window (a rate limit), and the circuit breakers that are not closed.
CREATE TABLE rate_windows (
    destination  TEXT    NOT NULL,
    window_start INTEGER NOT NULL, -- unix milliseconds
    used         INTEGER NOT NULL,
    PRIMARY KEY (destination, window_start)
);
CREATE TABLE breakers (
    destination TEXT    PRIMARY KEY,
    state       TEXT    NOT NULL,
    opened_at   INTEGER NOT NULL,
    until       INTEGER NOT NULL,
    opens       INTEGER NOT NULL,
    reason      TEXT    NOT NULL DEFAULT ''
);

-- A rate limit spaces sends evenly instead of counting them per window: a
-- window's count let a burst at its end meet one at the next one's start
-- (twice the rate within a second). next_at is when the next send may go.
DROP TABLE rate_windows;
CREATE TABLE rate_slots (
    destination TEXT        PRIMARY KEY,
    next_at     TIMESTAMPTZ NOT NULL
);

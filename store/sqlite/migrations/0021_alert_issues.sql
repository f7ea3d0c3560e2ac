-- The alerts' issues (store.AlertIssues): one row per issue, and its
-- timeline. At most one issue is active (open or acknowledged) per kind,
-- scope and name: the partial unique index is what makes two replicas that
-- see a condition begin at once open one issue (invariant 27). notices
-- counts the notices sent, the compare and set that marks each once.
CREATE TABLE alert_issues (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT    NOT NULL,
    scope            TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    opened_at        INTEGER NOT NULL, -- unix milliseconds, as every time here
    acknowledged_at  INTEGER,
    acknowledged_by  TEXT    NOT NULL DEFAULT '',
    resolved_at      INTEGER,
    resolved_by      TEXT    NOT NULL DEFAULT '',
    figures          TEXT    NOT NULL DEFAULT '{}', -- store.IssueFigures as JSON
    notified         TEXT    NOT NULL DEFAULT '',
    notices          INTEGER NOT NULL DEFAULT 0,
    last_notified_at INTEGER
);
CREATE UNIQUE INDEX alert_issues_active ON alert_issues (kind, scope, name) WHERE state <> 'resolved';
CREATE INDEX alert_issues_state ON alert_issues (state, id);
CREATE TABLE alert_issue_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    issue_id INTEGER NOT NULL REFERENCES alert_issues (id) ON DELETE CASCADE,
    at       INTEGER NOT NULL,
    event    TEXT    NOT NULL,
    actor    TEXT    NOT NULL DEFAULT '',
    detail   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX alert_issue_events_issue ON alert_issue_events (issue_id, id);

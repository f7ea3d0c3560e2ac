package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/internal/sqlstore"
)

// OpenIssue implements store.AlertIssues: the active issue's figures
// brought up to date, or, when there is none, the insert that the
// partial unique index alert_issues_active arbitrates.
func (s *Store) OpenIssue(ctx context.Context, o store.NewIssue) (store.AlertIssue, bool, error) {
	figures, err := json.Marshal(o.Figures)
	if err != nil {
		return store.AlertIssue{}, false, err
	}
	tx, done, err := s.begin(ctx, "open issue")
	if err != nil {
		return store.AlertIssue{}, false, err
	}
	defer done()
	defer tx.Rollback()
	// The active issue's figures first: a condition that goes on (every
	// check) costs no insert, and burns no id. The write lock makes the
	// two steps one; the index would refuse a second active issue anyway.
	res, err := tx.ExecContext(ctx, `UPDATE alert_issues SET figures = ? WHERE kind = ? AND scope = ? AND name = ? AND state <> ?`,
		string(figures), o.Kind, o.Scope, o.Name, store.IssueResolved)
	if err != nil {
		return store.AlertIssue{}, false, failed("issue figures", err)
	}
	var opened int64
	if n, _ := res.RowsAffected(); n == 0 {
		res, err := tx.ExecContext(ctx, `INSERT INTO alert_issues (kind, scope, name, state, opened_at, figures)
			SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM alert_issues
				WHERE kind = ? AND scope = ? AND name = ? AND state = 'resolved' AND resolved_by = '' AND resolved_at >= ?)
			ON CONFLICT DO NOTHING`, o.Kind, o.Scope, o.Name, store.IssueOpen, ms(o.At), string(figures), o.Kind, o.Scope, o.Name, ms(o.At))
		if err != nil {
			return store.AlertIssue{}, false, failed("open issue", err)
		}
		if opened, _ = res.RowsAffected(); opened == 1 {
			id, _ := res.LastInsertId()
			if err := issueEvent(ctx, tx, id, o.At, store.IssueEventOpened, "", ""); err != nil {
				return store.AlertIssue{}, false, err
			}
		}
	}
	is, err := scanIssue(tx.QueryRowContext(ctx, `SELECT `+sqlstore.IssueColumns+` FROM alert_issues
		WHERE kind = ? AND scope = ? AND name = ? AND state <> ?`, o.Kind, o.Scope, o.Name, store.IssueResolved))
	if errors.Is(err, sql.ErrNoRows) {
		return store.AlertIssue{}, false, nil // a later check saw the condition end
	}
	if err != nil {
		return is, false, unavailable("read issue", err)
	}
	if err := tx.Commit(); err != nil {
		return is, false, unavailable("commit", err)
	}
	return is, opened == 1, nil
}

// AcknowledgeIssue implements store.AlertIssues.
func (s *Store) AcknowledgeIssue(ctx context.Context, id int64, a store.AuditEntry) (store.AlertIssue, bool, error) {
	return s.issueChange(ctx, id, a, func(tx *sql.Tx, is store.AlertIssue) (bool, error) {
		switch is.State {
		case store.IssueAcknowledged:
			return false, nil
		case store.IssueResolved:
			return false, store.ErrIssueResolved
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_issues SET state = ?, acknowledged_at = ?, acknowledged_by = ? WHERE id = ?`,
			store.IssueAcknowledged, ms(a.At), a.Actor, id); err != nil {
			return false, failed("acknowledge issue", err)
		}
		return true, issueEvent(ctx, tx, id, a.At, store.IssueEventAcknowledged, a.Actor, "")
	})
}

// ResolveIssue implements store.AlertIssues.
func (s *Store) ResolveIssue(ctx context.Context, id int64, at time.Time, by string, a store.AuditEntry) (store.AlertIssue, bool, error) {
	return s.issueChange(ctx, id, a, func(tx *sql.Tx, is store.AlertIssue) (bool, error) {
		if is.State == store.IssueResolved {
			return false, nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_issues SET state = ?, resolved_at = ?, resolved_by = ? WHERE id = ?`,
			store.IssueResolved, ms(at), by, id); err != nil {
			return false, failed("resolve issue", err)
		}
		return true, issueEvent(ctx, tx, id, at, store.IssueEventResolved, by, "")
	})
}

// issueChange reads issue id in a write transaction, lets change change
// it, and audits a change (when a.Action is set) in the same
// transaction; it returns the issue as it is after.
func (s *Store) issueChange(ctx context.Context, id int64, a store.AuditEntry, change func(*sql.Tx, store.AlertIssue) (bool, error)) (store.AlertIssue, bool, error) {
	tx, done, err := s.begin(ctx, "issue")
	if err != nil {
		return store.AlertIssue{}, false, err
	}
	defer done()
	defer tx.Rollback()
	read := func() (store.AlertIssue, error) {
		is, err := scanIssue(tx.QueryRowContext(ctx, `SELECT `+sqlstore.IssueColumns+` FROM alert_issues WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return is, store.ErrNotFound
		}
		if err != nil {
			return is, unavailable("read issue", err)
		}
		return is, nil
	}
	is, err := read()
	if err != nil {
		return is, false, err
	}
	changed, err := change(tx, is)
	if err != nil || !changed {
		return is, false, err
	}
	a.Count = 1
	if err := audit(ctx, tx, a, a.At); err != nil {
		return is, false, err
	}
	if is, err = read(); err != nil {
		return is, false, err
	}
	if err := tx.Commit(); err != nil {
		return is, false, unavailable("commit", err)
	}
	return is, true, nil
}

// MarkIssueNotified implements store.AlertIssues.
func (s *Store) MarkIssueNotified(ctx context.Context, id int64, event string, seq int, at time.Time) (bool, error) {
	tx, done, err := s.begin(ctx, "mark notice")
	if err != nil {
		return false, err
	}
	defer done()
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE alert_issues SET notified = ?, notices = ?, last_notified_at = ? WHERE id = ? AND notices = ?`,
		event, seq, ms(at), id, seq-1)
	if err != nil {
		return false, failed("mark notice", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if err := issueEvent(ctx, tx, id, at, store.IssueEventNotified, "", event); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, unavailable("commit", err)
	}
	return true, nil
}

// Issues implements store.AlertIssues.
func (s *Store) Issues(ctx context.Context, q store.IssueQuery) ([]store.AlertIssue, error) {
	f := sqlstore.IssueFilter(q, dialect)
	query := `SELECT ` + sqlstore.IssueColumns + ` FROM alert_issues WHERE ` + f.Where() + ` ORDER BY id DESC`
	if q.Limit > 0 {
		query += ` LIMIT ` + f.Arg(q.Limit)
	}
	rows, err := s.read.QueryContext(ctx, query, f.Args()...)
	if err != nil {
		return nil, unavailable("list issues", err)
	}
	defer rows.Close()
	var out []store.AlertIssue
	for rows.Next() {
		is, err := scanIssue(rows)
		if err != nil {
			return nil, unavailable("list issues", err)
		}
		out = append(out, is)
	}
	return out, rows.Err()
}

// Issue implements store.AlertIssues.
func (s *Store) Issue(ctx context.Context, id int64) (store.AlertIssue, error) {
	is, err := scanIssue(s.read.QueryRowContext(ctx, `SELECT `+sqlstore.IssueColumns+` FROM alert_issues WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return is, store.ErrNotFound
	}
	if err != nil {
		return is, unavailable("read issue", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT at, event, actor, detail FROM alert_issue_events WHERE issue_id = ? ORDER BY id`, id)
	if err != nil {
		return is, unavailable("read timeline", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e store.IssueEvent
		var at int64
		if err := rows.Scan(&at, &e.Event, &e.By, &e.Detail); err != nil {
			return is, unavailable("read timeline", err)
		}
		e.At = fromMS(at)
		is.Timeline = append(is.Timeline, e)
	}
	return is, rows.Err()
}

// issueEvent adds a line to issue id's timeline.
func issueEvent(ctx context.Context, tx *sql.Tx, id int64, at time.Time, event, by, detail string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO alert_issue_events (issue_id, at, event, actor, detail) VALUES (?, ?, ?, ?, ?)`,
		id, ms(at), event, by, detail); err != nil {
		return failed("issue timeline", err)
	}
	return nil
}

// scanIssue reads sqlstore.IssueColumns.
func scanIssue(row interface{ Scan(...any) error }) (store.AlertIssue, error) {
	var is store.AlertIssue
	var opened int64
	var acked, resolved, notified sql.NullInt64
	var figures string
	err := row.Scan(&is.ID, &is.Kind, &is.Scope, &is.Name, &is.State, &opened, &acked, &is.AcknowledgedBy, &resolved, &is.ResolvedBy,
		&figures, &is.Notified, &is.Notices, &notified)
	if err != nil {
		return is, err
	}
	is.OpenedAt = fromMS(opened)
	if acked.Valid {
		is.AcknowledgedAt = fromMS(acked.Int64)
	}
	if resolved.Valid {
		is.ResolvedAt = fromMS(resolved.Int64)
	}
	if notified.Valid {
		is.LastNotifiedAt = fromMS(notified.Int64)
	}
	_ = json.Unmarshal([]byte(figures), &is.Figures) // written by OpenIssue; a figure unread is only shown less
	return is, nil
}

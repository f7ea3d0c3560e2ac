package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

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
	var is store.AlertIssue
	var opened bool
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The active issue's figures first: a condition that goes on
		// (every check) costs no insert, and burns no id of the sequence.
		tag, err := tx.Exec(ctx, `UPDATE alert_issues SET figures = $1 WHERE kind = $2 AND scope = $3 AND name = $4 AND state <> 'resolved'`,
			string(figures), o.Kind, o.Scope, o.Name)
		if err != nil || tag.RowsAffected() > 0 {
			if err == nil {
				is, err = s.scanIssue(tx.QueryRow(ctx, `SELECT `+sqlstore.IssueColumns+` FROM alert_issues
					WHERE kind = $1 AND scope = $2 AND name = $3 AND state <> 'resolved'`, o.Kind, o.Scope, o.Name))
			}
			return err
		}
		// None active: the insert the index arbitrates. A replica that
		// inserted at the same moment wins; this one's ON CONFLICT waits
		// for its commit, does nothing, and reads its issue (READ
		// COMMITTED: the next statement sees it).
		var id int64
		err = tx.QueryRow(ctx, `INSERT INTO alert_issues (kind, scope, name, state, opened_at, figures)
			SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM alert_issues
				WHERE kind = $1 AND scope = $2 AND name = $3 AND state = 'resolved' AND resolved_by = '' AND resolved_at >= $5)
			ON CONFLICT (kind, scope, name) WHERE state <> 'resolved' DO NOTHING RETURNING id`,
			o.Kind, o.Scope, o.Name, store.IssueOpen, s.toDB(o.At), string(figures)).Scan(&id)
		switch {
		case err == nil:
			opened = true
			if err := s.issueEvent(ctx, tx, id, o.At, store.IssueEventOpened, "", ""); err != nil {
				return err
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		is, err = s.scanIssue(tx.QueryRow(ctx, `SELECT `+sqlstore.IssueColumns+` FROM alert_issues
			WHERE kind = $1 AND scope = $2 AND name = $3 AND state <> 'resolved'`, o.Kind, o.Scope, o.Name))
		if errors.Is(err, pgx.ErrNoRows) {
			is = store.AlertIssue{} // a later check saw the condition end
			return nil
		}
		return err
	})
	if err != nil {
		return is, false, failed("open issue", err)
	}
	return is, opened, nil
}

// AcknowledgeIssue implements store.AlertIssues.
func (s *Store) AcknowledgeIssue(ctx context.Context, id int64, a store.AuditEntry) (store.AlertIssue, bool, error) {
	return s.issueChange(ctx, id, a, func(tx pgx.Tx, is store.AlertIssue) (bool, error) {
		switch is.State {
		case store.IssueAcknowledged:
			return false, nil
		case store.IssueResolved:
			return false, store.ErrIssueResolved
		}
		if _, err := tx.Exec(ctx, `UPDATE alert_issues SET state = $1, acknowledged_at = $2, acknowledged_by = $3 WHERE id = $4`,
			store.IssueAcknowledged, s.toDB(a.At), a.Actor, id); err != nil {
			return false, err
		}
		return true, s.issueEvent(ctx, tx, id, a.At, store.IssueEventAcknowledged, a.Actor, "")
	})
}

// ResolveIssue implements store.AlertIssues.
func (s *Store) ResolveIssue(ctx context.Context, id int64, at time.Time, by string, a store.AuditEntry) (store.AlertIssue, bool, error) {
	return s.issueChange(ctx, id, a, func(tx pgx.Tx, is store.AlertIssue) (bool, error) {
		if is.State == store.IssueResolved {
			return false, nil
		}
		if _, err := tx.Exec(ctx, `UPDATE alert_issues SET state = $1, resolved_at = $2, resolved_by = $3 WHERE id = $4`,
			store.IssueResolved, s.toDB(at), by, id); err != nil {
			return false, err
		}
		return true, s.issueEvent(ctx, tx, id, at, store.IssueEventResolved, by, "")
	})
}

// issueChange locks issue id's row (FOR UPDATE: an acknowledgement and a
// resolution by another replica wait for each other, and the second sees
// the first's state), lets change change it, and audits a change (when
// a.Action is set) in the same transaction; it returns the issue as it
// is after.
func (s *Store) issueChange(ctx context.Context, id int64, a store.AuditEntry, change func(pgx.Tx, store.AlertIssue) (bool, error)) (store.AlertIssue, bool, error) {
	var is store.AlertIssue
	var changed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		is, err = s.scanIssue(tx.QueryRow(ctx, `SELECT `+sqlstore.IssueColumns+` FROM alert_issues WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if changed, err = change(tx, is); err != nil || !changed {
			return err
		}
		if a.Action != "" {
			if _, err := tx.Exec(ctx, `INSERT INTO audit (at, actor, action, target, count) VALUES ($1, $2, $3, $4, 1)`,
				s.toDB(a.At), a.Actor, a.Action, a.Target); err != nil {
				return err
			}
		}
		is, err = s.scanIssue(tx.QueryRow(ctx, `SELECT `+sqlstore.IssueColumns+` FROM alert_issues WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrIssueResolved) {
		return is, false, err
	}
	if err != nil {
		return is, false, failed("issue", err)
	}
	return is, changed, nil
}

// MarkIssueNotified implements store.AlertIssues.
func (s *Store) MarkIssueNotified(ctx context.Context, id int64, event string, seq int, at time.Time) (bool, error) {
	var marked bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE alert_issues SET notified = $1, notices = $2, last_notified_at = $3 WHERE id = $4 AND notices = $5`,
			event, seq, s.toDB(at), id, seq-1)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		marked = true
		return s.issueEvent(ctx, tx, id, at, store.IssueEventNotified, "", event)
	})
	if err != nil {
		return false, failed("mark notice", err)
	}
	return marked, nil
}

// Issues implements store.AlertIssues.
func (s *Store) Issues(ctx context.Context, q store.IssueQuery) ([]store.AlertIssue, error) {
	f := sqlstore.IssueFilter(q, s.dialect())
	query := `SELECT ` + sqlstore.IssueColumns + ` FROM alert_issues WHERE ` + f.Where() + ` ORDER BY id DESC`
	if q.Limit > 0 {
		query += ` LIMIT ` + f.Arg(q.Limit)
	}
	rows, err := s.pool.Query(ctx, query, f.Args()...)
	if err != nil {
		return nil, unavailable("list issues", err)
	}
	defer rows.Close()
	var out []store.AlertIssue
	for rows.Next() {
		is, err := s.scanIssue(rows)
		if err != nil {
			return nil, unavailable("list issues", err)
		}
		out = append(out, is)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list issues", err)
	}
	return out, nil
}

// Issue implements store.AlertIssues.
func (s *Store) Issue(ctx context.Context, id int64) (store.AlertIssue, error) {
	is, err := s.scanIssue(s.pool.QueryRow(ctx, `SELECT `+sqlstore.IssueColumns+` FROM alert_issues WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return is, store.ErrNotFound
	}
	if err != nil {
		return is, unavailable("read issue", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT at, event, actor, detail FROM alert_issue_events WHERE issue_id = $1 ORDER BY id`, id)
	if err != nil {
		return is, unavailable("read timeline", err)
	}
	var e store.IssueEvent
	_, err = pgx.ForEachRow(rows, []any{&e.At, &e.Event, &e.By, &e.Detail}, func() error {
		e.At = s.fromDB(e.At)
		is.Timeline = append(is.Timeline, e)
		return nil
	})
	if err != nil {
		return is, unavailable("read timeline", err)
	}
	return is, nil
}

// issueEvent adds a line to issue id's timeline.
func (s *Store) issueEvent(ctx context.Context, tx pgx.Tx, id int64, at time.Time, event, by, detail string) error {
	_, err := tx.Exec(ctx, `INSERT INTO alert_issue_events (issue_id, at, event, actor, detail) VALUES ($1, $2, $3, $4, $5)`,
		id, s.toDB(at), event, by, detail)
	return err
}

// scanIssue reads sqlstore.IssueColumns.
func (s *Store) scanIssue(row pgx.Row) (store.AlertIssue, error) {
	var is store.AlertIssue
	var acked, resolved, notified *time.Time
	var figures string
	err := row.Scan(&is.ID, &is.Kind, &is.Scope, &is.Name, &is.State, &is.OpenedAt, &acked, &is.AcknowledgedBy, &resolved, &is.ResolvedBy,
		&figures, &is.Notified, &is.Notices, &notified)
	if err != nil {
		return is, err
	}
	is.OpenedAt = s.fromDB(is.OpenedAt)
	if acked != nil {
		is.AcknowledgedAt = s.fromDB(*acked)
	}
	if resolved != nil {
		is.ResolvedAt = s.fromDB(*resolved)
	}
	if notified != nil {
		is.LastNotifiedAt = s.fromDB(*notified)
	}
	_ = json.Unmarshal([]byte(figures), &is.Figures) // written by OpenIssue; a figure unread is only shown less
	return is, nil
}

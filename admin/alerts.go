package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/store"
)

// The alerts' issues, as an operator sees and acts on them: an issue
// opens when an alert's condition begins and resolves when it ends (see
// internal/alert); an operator acknowledges one (its channels are told
// nothing more until it resolves) or resolves it by hand (its channels
// are told, naming who; if the condition still holds, a new issue opens
// at the next check). Both are audited.

// IssueFilter selects issues.
type IssueFilter struct {
	// State is open, acknowledged or resolved; empty: every issue.
	State  string `json:"state,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// IssueRef names one issue.
type IssueRef struct {
	ID int64 `json:"-" path:"id"`
}

// IssueView is an issue: what was measured last, and its life.
type IssueView struct {
	ID        int64    `json:"id"`
	Kind      string   `json:"kind"`
	Scope     string   `json:"scope"` // source or destination
	Name      string   `json:"name"`
	State     string   `json:"state"`
	Message   string   `json:"message"`
	Value     float64  `json:"value"`
	Threshold float64  `json:"threshold"`
	Baseline  *float64 `json:"baseline,omitempty"`
	Volume    int64    `json:"volume,omitempty"`

	OpenedAt       time.Time  `json:"opened_at"`
	AcknowledgedAt *time.Time `json:"acknowledged_at,omitempty"`
	AcknowledgedBy string     `json:"acknowledged_by,omitempty"`
	ResolvedAt     *time.Time `json:"resolved_at,omitempty"`
	// ResolvedBy names the operator who resolved it by hand; absent when
	// its condition ended by itself.
	ResolvedBy string `json:"resolved_by,omitempty"`
	// Notified is the last notice its channels were told (opened,
	// reminder, resolved), Notices how many, LastNotifiedAt when.
	Notified       string     `json:"notified,omitempty"`
	Notices        int        `json:"notices"`
	LastNotifiedAt *time.Time `json:"last_notified_at,omitempty"`
	// Timeline is its events, oldest first (one issue, not a list).
	Timeline []IssueEventView `json:"timeline,omitempty"`
}

// IssueEventView is one line of an issue's timeline: opened,
// acknowledged, resolved, or notified (Detail the notice).
type IssueEventView struct {
	At     time.Time `json:"at"`
	Event  string    `json:"event"`
	By     string    `json:"by,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// IssuePage is a page of issues, newest first.
type IssuePage struct {
	Issues     []IssueView `json:"issues"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// Issues implements Operator.
func (s *Service) Issues(ctx context.Context, f IssueFilter) (IssuePage, error) {
	q := store.IssueQuery{Limit: f.Limit}
	if f.State != "" {
		if !slices.Contains(store.IssueStates(), f.State) {
			return IssuePage{}, invalid("state", "want one of %s", strings.Join(store.IssueStates(), ", "))
		}
		q.States = []string{f.State}
	}
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 1 || q.Limit > maxLimit {
		return IssuePage{}, invalid("limit", "want 1 to %d", maxLimit)
	}
	before, err := parseCursor(f.Cursor)
	if err != nil {
		return IssuePage{}, err
	}
	q.Before = before
	q.Limit++ // one more says whether there is a next page
	list, err := s.opts.Store.Issues(ctx, q)
	if err != nil {
		return IssuePage{}, err
	}
	page := IssuePage{Issues: []IssueView{}}
	for i, is := range list {
		if i == q.Limit-1 {
			page.NextCursor = cursorOf(list[i-1].ID)
			break
		}
		page.Issues = append(page.Issues, issueView(is))
	}
	return page, nil
}

// Issue implements Operator.
func (s *Service) Issue(ctx context.Context, id int64) (IssueView, error) {
	is, err := s.opts.Store.Issue(ctx, id)
	if err != nil {
		return IssueView{}, issueErr(err, id)
	}
	return issueView(is), nil
}

// AcknowledgeIssue implements Operator.
func (s *Service) AcknowledgeIssue(ctx context.Context, id int64) (IssueView, error) {
	target, err := s.issueTarget(ctx, id)
	if err != nil {
		return IssueView{}, err
	}
	_, _, err = s.opts.Store.AcknowledgeIssue(ctx, id, s.audit(ctx, ActAcknowledgeIssue, target))
	if err != nil {
		return IssueView{}, issueErr(err, id)
	}
	return s.Issue(ctx, id)
}

// ResolveIssue implements Operator.
func (s *Service) ResolveIssue(ctx context.Context, id int64) (IssueView, error) {
	target, err := s.issueTarget(ctx, id)
	if err != nil {
		return IssueView{}, err
	}
	a := s.audit(ctx, ActResolveIssue, target)
	if _, _, err := s.opts.Store.ResolveIssue(ctx, id, a.At, a.Actor, a); err != nil {
		return IssueView{}, issueErr(err, id)
	}
	return s.Issue(ctx, id)
}

// issueTarget is an issue's audit target, "issue 7", prefixed with the
// tenant of the source or destination it is about (tenantTarget), so
// that its tenant's audit shows who acknowledged or resolved it.
func (s *Service) issueTarget(ctx context.Context, id int64) (string, error) {
	is, err := s.opts.Store.Issue(ctx, id)
	if err != nil {
		return "", issueErr(err, id)
	}
	owner, _ := s.TenantOf(is.Scope, is.Name)
	return tenantTarget(owner, fmt.Sprintf("issue %d", id)), nil
}

// issueErr is the store's error as the API answers it.
func issueErr(err error, id int64) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("issue %d: %w", id, ErrNotFound)
	case errors.Is(err, store.ErrIssueResolved):
		return fmt.Errorf("issue %d is resolved: nothing to acknowledge: %w", id, ErrConflict)
	}
	return err
}

func issueView(is store.AlertIssue) IssueView {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	v := IssueView{ID: is.ID, Kind: is.Kind, Scope: is.Scope, Name: is.Name, State: is.State, Message: is.Figures.Message,
		Value: is.Figures.Value, Threshold: is.Figures.Threshold, Baseline: is.Figures.Baseline, Volume: is.Figures.Volume,
		OpenedAt: is.OpenedAt, AcknowledgedAt: at(is.AcknowledgedAt), AcknowledgedBy: is.AcknowledgedBy,
		ResolvedAt: at(is.ResolvedAt), ResolvedBy: is.ResolvedBy,
		Notified: is.Notified, Notices: is.Notices, LastNotifiedAt: at(is.LastNotifiedAt)}
	for _, e := range is.Timeline {
		v.Timeline = append(v.Timeline, IssueEventView{At: e.At, Event: e.Event, By: e.By, Detail: e.Detail})
	}
	return v
}

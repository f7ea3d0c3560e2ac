package store

import (
	"context"
	"errors"
	"time"
)

// AlertIssues keeps the alerts' issues: a condition that begins (a
// source's duplicates spiking, a destination's dead letters, ...) opens
// an issue, an operator may acknowledge it, and it resolves when the
// condition ends or an operator says so. The store is the arbiter of an
// issue's life across replicas and restarts (invariant 27): at most one
// issue is active (open or acknowledged) per kind, scope and name, by a
// unique index, and each notice of it is marked once it was sent, so
// that neither a second replica nor a restart sends it again. It is part
// of Store.
type AlertIssues interface {
	// OpenIssue opens an issue for o's kind, scope and name, with o's
	// figures, unless one is active: then it returns that one with
	// opened false (its figures updated to o's). One atomic step (an
	// insert that a unique partial index arbitrates), so two replicas
	// that see the condition begin at once open one issue. A condition
	// whose last issue resolved by itself at or after o.At is not opened
	// again (a replica whose check measured later saw it end, and this
	// one's measure is older): it returns a zero issue, opened false.
	OpenIssue(ctx context.Context, o NewIssue) (issue AlertIssue, opened bool, err error)
	// AcknowledgeIssue marks an open issue acknowledged by a.Actor at
	// a.At, audited in the same transaction. An issue acknowledged
	// already is returned as it is, changed false; a resolved one is
	// ErrIssueResolved; an unknown id ErrNotFound.
	AcknowledgeIssue(ctx context.Context, id int64, a AuditEntry) (issue AlertIssue, changed bool, err error)
	// ResolveIssue resolves an active issue at at, by by ("" when its
	// condition ended by itself), audited in the same transaction when
	// a.Action is set. A resolved issue is returned as it is, changed
	// false; an unknown id ErrNotFound.
	ResolveIssue(ctx context.Context, id int64, at time.Time, by string, a AuditEntry) (issue AlertIssue, changed bool, err error)
	// MarkIssueNotified records that the notice event (NoticeOpened,
	// NoticeReminder, NoticeResolved) of issue id was sent at at, as its
	// seq-th notice: its Notified, Notices and LastNotifiedAt, and a
	// line of its timeline, only if its Notices is seq-1 (a compare and
	// set: of two replicas that both saw a notice through, one marks
	// it). marked says whether this call did.
	MarkIssueNotified(ctx context.Context, id int64, event string, seq int, at time.Time) (marked bool, err error)
	// Issues lists the issues q selects, newest first, with no timeline.
	Issues(ctx context.Context, q IssueQuery) ([]AlertIssue, error)
	// Issue returns one issue with its timeline, oldest first, or
	// ErrNotFound.
	Issue(ctx context.Context, id int64) (AlertIssue, error)
}

// ErrIssueResolved is an acknowledgement of an issue that is resolved
// already.
var ErrIssueResolved = errors.New("the issue is resolved")

// An issue's states.
const (
	IssueOpen         = "open"
	IssueAcknowledged = "acknowledged"
	IssueResolved     = "resolved"
)

// IssueStates are the states an issue can be in, in the order of its life.
func IssueStates() []string { return []string{IssueOpen, IssueAcknowledged, IssueResolved} }

// The events of an issue's timeline. The notices sent are "notified"
// lines, their Detail the notice's event (opened, reminder, resolved).
const (
	IssueEventOpened       = "opened"
	IssueEventAcknowledged = "acknowledged"
	IssueEventResolved     = "resolved"
	IssueEventNotified     = "notified"
)

// The notices of an issue (AlertIssue.Notified, MarkIssueNotified).
const (
	NoticeOpened   = "opened"
	NoticeReminder = "reminder"
	NoticeResolved = "resolved"
)

// IssueFigures are what an alert's check measured, kept with its issue
// (the last check's).
type IssueFigures struct {
	Message   string   `json:"message"`
	Value     float64  `json:"value"`
	Threshold float64  `json:"threshold"`
	Baseline  *float64 `json:"baseline,omitempty"`
	Volume    int64    `json:"volume,omitempty"`
}

// NewIssue is a condition that holds, as OpenIssue takes it.
type NewIssue struct {
	Kind, Scope, Name string
	Figures           IssueFigures
	At                time.Time
}

// AlertIssue is one issue. Times not yet reached are zero.
type AlertIssue struct {
	ID             int64
	Kind           string
	Scope          string
	Name           string
	State          string
	OpenedAt       time.Time
	AcknowledgedAt time.Time
	AcknowledgedBy string
	ResolvedAt     time.Time
	// ResolvedBy names the operator who resolved it by hand; "" when its
	// condition ended by itself.
	ResolvedBy string
	Figures    IssueFigures
	// Notified is the last notice sent (NoticeOpened, ...), "" before
	// the first; Notices how many were sent; LastNotifiedAt when the
	// last was.
	Notified       string
	Notices        int
	LastNotifiedAt time.Time
	// Timeline is the issue's events, oldest first (Issue only).
	Timeline []IssueEvent
}

// IssueEvent is one line of an issue's timeline.
type IssueEvent struct {
	At    time.Time
	Event string // IssueEventOpened, ...
	By    string // the operator, for an acknowledgement or a resolution by hand
	// Detail is the notice's event for a "notified" line.
	Detail string
}

// IssueQuery selects issues. Zero fields select everything.
type IssueQuery struct {
	// States keeps issues in any of these states.
	States []string
	// Unnotified keeps the resolved issues whose opening was notified
	// and whose resolution was not yet (the alerter's to-do after a
	// restart).
	Unnotified bool
	// Before is the cursor: issues with a smaller id.
	Before int64
	Limit  int
}

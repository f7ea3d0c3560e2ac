// Package channel sends an alert issue's notices where people look: a JSON
// POST, Slack, Microsoft Teams and Discord incoming webhooks, and email
// over SMTP. Each kind registers itself; the alerter only sees Channel.
package channel

import (
	"context"
	"time"
)

// Events of an issue's life that are notified.
const (
	EventOpened   = "opened"   // the condition began
	EventReminder = "reminder" // still open after the quiet period
	EventResolved = "resolved" // the condition ended by itself, or an operator resolved it
)

// Notice is what a channel is told: one event of one issue.
type Notice struct {
	Event   string  `json:"event"` // EventOpened, EventReminder, EventResolved
	IssueID string  `json:"issue"`
	Kind    string  `json:"kind"`  // duplicate_rate, dead_letters, ...
	Scope   string  `json:"scope"` // source or destination
	Name    string  `json:"name"`
	Tenant  string  `json:"tenant,omitempty"`
	Message string  `json:"message"` // one line, what happened and where
	Value   float64 `json:"value"`
	// Threshold, Baseline and Volume are the figures behind Value.
	Threshold float64   `json:"threshold"`
	Baseline  *float64  `json:"baseline,omitempty"`
	Volume    int64     `json:"volume,omitempty"`
	Opened    time.Time `json:"opened"`
	At        time.Time `json:"at"` // when this event happened
	// By names the operator who resolved it by hand (empty otherwise).
	By string `json:"by,omitempty"`
	// Link is the dashboard page of the issue, when the gateway knows its
	// public URL (empty otherwise).
	Link string `json:"link,omitempty"`
	// Key is this notice's idempotency key: the same issue and event give
	// the same key, so a receiver that dedups sees it once.
	Key string `json:"-"`
}

// Channel is one place notices go.
type Channel interface {
	// Name is the channel's name in the config (for logs and errors).
	Name() string
	// Send tells n; an error means it was not told (the alerter tries
	// again at its next check).
	Send(ctx context.Context, n Notice) error
}

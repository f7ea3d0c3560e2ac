// Package channel sends an alert issue's notices where people look: a JSON
// POST, Slack, Microsoft Teams and Discord incoming webhooks, and email
// over SMTP. Each kind registers itself; the alerter only sees Channel.
package channel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/config"
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

// Deps are what the kinds are built with.
type Deps struct {
	// Client sends the webhooks' POSTs; nil: one with a 10s timeout that
	// follows no redirect (a 3xx is the URL's misconfiguration, and
	// following it would send the notice somewhere nobody configured).
	Client *http.Client
	// TLS, when set, is the base of the email channels' STARTTLS (its
	// RootCAs: a relay with a private CA, and the tests'); its ServerName
	// is always the SMTP host.
	TLS *tls.Config
}

// kind is one channel kind: what it checks in its block, and how it is
// built from it.
type kind struct {
	// check reports what the kind needs and what it does not read (f is
	// the channel's field, "alerts.channels[0]").
	check func(f string, c config.AlertChannel, fail config.FailFunc)
	build func(c config.AlertChannel, d Deps) Channel
}

// kinds are the channel kinds, each in its own file; a new kind is one
// line here.
var kinds = map[string]kind{
	"json":    jsonKind,
	"slack":   slackKind,
	"teams":   teamsKind,
	"discord": discordKind,
	"email":   emailKind,
}

// Kinds names the channel kinds.
func Kinds() []string { return slices.Sorted(maps.Keys(kinds)) }

// LegacyName is the name of the json channel alerts.url makes.
const LegacyName = "url"

// channels are a's channels as configured: alerts.url (with
// alerts.headers) first, as the json channel "url", then alerts.channels.
func channels(a config.Alerts) []config.AlertChannel {
	out := make([]config.AlertChannel, 0, len(a.Channels)+1)
	if a.URL != "" {
		out = append(out, config.AlertChannel{Name: LegacyName, Kind: "json", URL: a.URL, Headers: a.Headers})
	}
	return append(out, a.Channels...)
}

// Check reports, through fail, each of a's channels whose kind is unknown
// or whose block lacks what its kind needs (or sets what it does not
// read); config checks each field's form.
func Check(a config.Alerts, fail config.FailFunc) {
	for i, c := range a.Channels {
		f := fmt.Sprintf("alerts.channels[%d]", i)
		k, ok := kinds[c.Kind]
		if !ok {
			if c.Kind != "" { // config says it is required
				fail(f+".kind", "%q: want %s", c.Kind, strings.Join(Kinds(), ", "))
			}
			continue
		}
		k.check(f, c, fail)
	}
}

// FromConfig builds a's channels, in the config's order (alerts.url
// first); a config Check passed builds without error.
func FromConfig(a config.Alerts, d Deps) ([]Channel, error) {
	if d.Client == nil {
		d.Client = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	var errs []error
	Check(a, func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []Channel
	for _, c := range channels(a) {
		out = append(out, kinds[c.Kind].build(c, d))
	}
	return out, nil
}

// requireURL is the webhooks' kinds' check: a URL, and no smtp block.
func requireURL(f string, c config.AlertChannel, fail config.FailFunc) {
	if c.URL == "" {
		fail(f+".url", "required for a %s channel", c.Kind)
	}
	if !reflect.ValueOf(c.SMTP).IsZero() {
		fail(f+".smtp", "a %s channel sends no email", c.Kind)
	}
}

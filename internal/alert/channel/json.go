package channel

import (
	"context"
	"time"

	"github.com/oncehook/oncehook/config"
)

// jsonKind POSTs the notice as JSON to any URL, with the configured
// headers: the alerts' first channel (alerts.url), kept.
var jsonKind = kind{
	check: requireURL,
	build: func(c config.AlertChannel, d Deps) Channel {
		return jsonChannel{poster{name: c.Name, url: c.URL, headers: c.Headers, client: d.Client}}
	},
}

type jsonChannel struct{ p poster }

// jsonBody is the notice, and every field of the Alert JSON that
// alerts.url received before issues (kind, scope, name, hour, value,
// threshold, baseline, volume, message, resolved), so that a receiver
// written for that shape keeps working.
type jsonBody struct {
	Kind      string    `json:"kind"`
	Scope     string    `json:"scope"`
	Name      string    `json:"name"`
	Hour      time.Time `json:"hour"` // the hour the issue opened in
	Value     float64   `json:"value"`
	Threshold float64   `json:"threshold"`
	Baseline  *float64  `json:"baseline,omitempty"`
	Volume    int64     `json:"volume,omitempty"`
	Message   string    `json:"message"`
	Resolved  bool      `json:"resolved,omitempty"`

	Event  string    `json:"event"`
	Issue  string    `json:"issue"`
	Tenant string    `json:"tenant,omitempty"`
	Opened time.Time `json:"opened"`
	At     time.Time `json:"at"`
	By     string    `json:"by,omitempty"`
	Link   string    `json:"link,omitempty"`
}

func (c jsonChannel) Name() string { return c.p.name }

func (c jsonChannel) Send(ctx context.Context, n Notice) error {
	return c.p.post(ctx, n.Key, jsonBody{
		Kind: n.Kind, Scope: n.Scope, Name: n.Name, Hour: n.Opened.UTC().Truncate(time.Hour),
		Value: n.Value, Threshold: n.Threshold, Baseline: n.Baseline, Volume: n.Volume,
		Message: n.Message, Resolved: n.Event == EventResolved,
		Event: n.Event, Issue: n.IssueID, Tenant: n.Tenant, Opened: n.Opened, At: n.At, By: n.By, Link: n.Link,
	})
}

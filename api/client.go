package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// Client is the admin.Operator over a running gateway's API.
type Client struct{ api *jsonhttp.Client }

var _ admin.Operator = (*Client)(nil)

// NewClient returns a Client for the API at base (e.g.
// http://127.0.0.1:8081) with a token from api.tokens. hc may be nil.
func NewClient(base, token string, hc *http.Client) *Client {
	return &Client{api: jsonhttp.NewClient(base, token, hc)}
}

// do calls route (its wildcards filled with args) and decodes a success
// into out; an error answer is an *Error.
func (c *Client) do(ctx context.Context, route jsonhttp.Route, args []string, q url.Values, body, out any) error {
	return c.doHeader(ctx, route, args, q, nil, body, out)
}

// doHeader is do with the request's headers h (an If-Match).
func (c *Client) doHeader(ctx context.Context, route jsonhttp.Route, args []string, q url.Values, h http.Header, body, out any) error {
	status, data, err := c.api.DoHeader(ctx, route.Method, route.With(args...), q, h, body)
	if err != nil {
		return err
	}
	if status >= 300 {
		e := &Error{Status: status}
		if json.Unmarshal(data, &e.Body) != nil || e.Body.Error == "" {
			e.Body = jsonhttp.Error{Error: strings.TrimSpace(string(data)), Reason: http.StatusText(status)}
		} else {
			var fields struct {
				Errors []FieldError `json:"errors"`
			}
			if json.Unmarshal(data, &fields) == nil {
				e.Fields = fields.Errors
			}
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", route.Method, route.Path, err)
	}
	return nil
}

// call takes action a through the API: in travels as the table says (see
// encode), and the answer decodes into the action's answer type.
func call[In, Out any](ctx context.Context, c *Client, a admin.Act[In, Out], in In) (Out, error) {
	var out Out
	args, q, body := encode(a.Route.Method, in)
	err := c.do(ctx, a.Route, args, q, body, &out)
	return out, err
}

// Sources implements admin.Operator.
func (c *Client) Sources(ctx context.Context) ([]admin.SourceView, error) {
	out, err := call(ctx, c, admin.ActSources, admin.None{})
	return out.Sources, err
}

// Stats implements admin.Operator.
func (c *Client) Stats(ctx context.Context, q admin.StatsQuery) (admin.StatsView, error) {
	return call(ctx, c, admin.ActStats, admin.StatsArgsOf(q))
}

// Events implements admin.Operator.
func (c *Client) Events(ctx context.Context, f admin.EventFilter) (admin.EventPage, error) {
	return call(ctx, c, admin.ActEvents, f)
}

// Event implements admin.Operator.
func (c *Client) Event(ctx context.Context, id int64) (admin.EventDetail, error) {
	return call(ctx, c, admin.ActEvent, admin.EventRef{ID: id})
}

// ReplayEvent implements admin.Operator.
func (c *Client) ReplayEvent(ctx context.Context, id int64) (admin.Count, error) {
	return call(ctx, c, admin.ActReplayEvent, admin.EventRef{ID: id})
}

// ReplayEvents implements admin.Operator.
func (c *Client) ReplayEvents(ctx context.Context, f admin.EventFilter, dryRun bool) (admin.Count, error) {
	return call(ctx, c, admin.ActReplayEvents, admin.EventsBulk{EventFilter: f, DryRun: dryRun})
}

// DeliverEvents implements admin.Operator.
func (c *Client) DeliverEvents(ctx context.Context, f admin.EventFilter, dryRun bool) (admin.Count, error) {
	return call(ctx, c, admin.ActDeliverEvents, admin.EventsBulk{EventFilter: f, DryRun: dryRun})
}

// DeliverEvent implements admin.Operator.
func (c *Client) DeliverEvent(ctx context.Context, id int64, destination string) (admin.Count, error) {
	return call(ctx, c, admin.ActDeliverEvent, admin.DeliveryRef{ID: id, Destination: destination})
}

// SkipEvent implements admin.Operator.
func (c *Client) SkipEvent(ctx context.Context, id int64, destination string) (admin.Count, error) {
	return call(ctx, c, admin.ActSkipEvent, admin.DeliveryRef{ID: id, Destination: destination})
}

// ResetOrder implements admin.Operator.
func (c *Client) ResetOrder(ctx context.Context, source, entity, destination string) (admin.Count, error) {
	return call(ctx, c, admin.ActResetOrder, admin.OrderRef{Source: source, Entity: entity, Destination: destination})
}

// DeadLetters implements admin.Operator.
func (c *Client) DeadLetters(ctx context.Context, f admin.DeadFilter) (admin.DeadPage, error) {
	return call(ctx, c, admin.ActDeadLetters, f)
}

// RetryDeadLetters implements admin.Operator.
func (c *Client) RetryDeadLetters(ctx context.Context, f admin.DeadFilter, dryRun bool) (admin.Count, error) {
	return call(ctx, c, admin.ActRetryDead, admin.DeadBulk{DeadFilter: f, DryRun: dryRun})
}

// PurgeDeadLetters implements admin.Operator.
func (c *Client) PurgeDeadLetters(ctx context.Context, f admin.DeadFilter, dryRun bool) (admin.Count, error) {
	return call(ctx, c, admin.ActPurgeDead, admin.DeadPurge{Destination: f.Destination, Source: f.Source, All: f.All, DryRun: dryRun})
}

// Destinations implements admin.Operator.
func (c *Client) Destinations(ctx context.Context) ([]admin.DestinationView, error) {
	out, err := call(ctx, c, admin.ActDestinations, admin.None{})
	return out.Destinations, err
}

// SetPaused implements admin.Operator.
func (c *Client) SetPaused(ctx context.Context, destination string, paused bool) (admin.DestinationView, error) {
	a := admin.ActResume
	if paused {
		a = admin.ActPause
	}
	return call(ctx, c, a, admin.DestinationRef{Name: destination})
}

// SetBreaker implements admin.Operator.
func (c *Client) SetBreaker(ctx context.Context, destination string, open bool) (admin.DestinationView, error) {
	a := admin.ActCloseBreaker
	if open {
		a = admin.ActOpenBreaker
	}
	return call(ctx, c, a, admin.DestinationRef{Name: destination})
}

// Audit implements admin.Operator.
func (c *Client) Audit(ctx context.Context, cursor string, limit int) (admin.AuditPage, error) {
	return call(ctx, c, admin.ActAudit, admin.AuditArgs{Cursor: cursor, Limit: limit})
}

// Doctor implements admin.Operator.
func (c *Client) Doctor(ctx context.Context, source string) (admin.DoctorReport, error) {
	return call(ctx, c, admin.ActDoctor, admin.DoctorArgs{Source: source})
}

// Reload implements admin.Operator.
func (c *Client) Reload(ctx context.Context) (admin.ReloadView, error) {
	return call(ctx, c, admin.ActReload, admin.None{})
}

// ResetEffect implements admin.Operator.
func (c *Client) ResetEffect(ctx context.Context, key string) error {
	_, err := call(ctx, c, admin.ActResetEffect, admin.EffectRef{Key: key})
	return err
}

// Issues implements admin.Operator.
func (c *Client) Issues(ctx context.Context, f admin.IssueFilter) (admin.IssuePage, error) {
	return call(ctx, c, admin.ActIssues, f)
}

// Issue implements admin.Operator.
func (c *Client) Issue(ctx context.Context, id int64) (admin.IssueView, error) {
	return call(ctx, c, admin.ActIssue, admin.IssueRef{ID: id})
}

// AcknowledgeIssue implements admin.Operator.
func (c *Client) AcknowledgeIssue(ctx context.Context, id int64) (admin.IssueView, error) {
	return call(ctx, c, admin.ActAcknowledgeIssue, admin.IssueRef{ID: id})
}

// ResolveIssue implements admin.Operator.
func (c *Client) ResolveIssue(ctx context.Context, id int64) (admin.IssueView, error) {
	return call(ctx, c, admin.ActResolveIssue, admin.IssueRef{ID: id})
}

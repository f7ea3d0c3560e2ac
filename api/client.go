package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/effect"
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
	status, data, err := c.api.Do(ctx, route.Method, route.With(args...), q, body)
	if err != nil {
		return err
	}
	if status >= 300 {
		e := &Error{Status: status}
		if json.Unmarshal(data, &e.Body) != nil || e.Body.Error == "" {
			e.Body = jsonhttp.Error{Error: strings.TrimSpace(string(data)), Reason: http.StatusText(status)}
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

func setTime(q url.Values, k string, t time.Time) {
	if !t.IsZero() {
		q.Set(k, t.UTC().Format(time.RFC3339))
	}
}

func setString(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

// Sources implements admin.Operator.
func (c *Client) Sources(ctx context.Context) ([]admin.SourceView, error) {
	var out struct {
		Sources []admin.SourceView `json:"sources"`
	}
	err := c.do(ctx, routeSources, nil, nil, nil, &out)
	return out.Sources, err
}

// Stats implements admin.Operator.
func (c *Client) Stats(ctx context.Context, sq admin.StatsQuery) (admin.StatsView, error) {
	q := url.Values{}
	setString(q, "source", sq.Source)
	setString(q, "destination", sq.Destination)
	setTime(q, "from", sq.From)
	setTime(q, "to", sq.To)
	if sq.Granularity == admin.Daily {
		q.Set("granularity", "1d")
	}
	var out admin.StatsView
	err := c.do(ctx, routeStats, nil, q, nil, &out)
	return out, err
}

// Events implements admin.Operator.
func (c *Client) Events(ctx context.Context, f admin.EventFilter) (admin.EventPage, error) {
	q := url.Values{}
	setString(q, "source", f.Source)
	setString(q, "key", f.Key)
	setString(q, "type", f.Type)
	setString(q, "state", f.State)
	setString(q, "key_prefix", f.KeyPrefix)
	setTime(q, "from", f.From)
	setTime(q, "to", f.To)
	setString(q, "cursor", f.Cursor)
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out admin.EventPage
	err := c.do(ctx, routeEvents, nil, q, nil, &out)
	return out, err
}

// Event implements admin.Operator.
func (c *Client) Event(ctx context.Context, id int64) (admin.EventDetail, error) {
	var out admin.EventDetail
	err := c.do(ctx, routeEvent, []string{strconv.FormatInt(id, 10)}, nil, nil, &out)
	return out, err
}

// ReplayEvent implements admin.Operator.
func (c *Client) ReplayEvent(ctx context.Context, id int64) (admin.Count, error) {
	var out admin.Count
	err := c.do(ctx, routeReplayEvent, []string{strconv.FormatInt(id, 10)}, nil, nil, &out)
	return out, err
}

// SkipEvent implements admin.Operator.
func (c *Client) SkipEvent(ctx context.Context, id int64, destination string) (admin.Count, error) {
	var out admin.Count
	err := c.do(ctx, routeSkipEvent, []string{strconv.FormatInt(id, 10)}, nil, deliverBody{Destination: destination}, &out)
	return out, err
}

// ResetOrder implements admin.Operator.
func (c *Client) ResetOrder(ctx context.Context, source, entity, destination string) (admin.Count, error) {
	var out admin.Count
	err := c.do(ctx, routeResetOrder, []string{source}, nil, resetOrderBody{Entity: entity, Destination: destination}, &out)
	return out, err
}

// Reload implements admin.Operator.
func (c *Client) Reload(ctx context.Context) (admin.ReloadView, error) {
	var out admin.ReloadView
	err := c.do(ctx, routeReload, nil, nil, struct{}{}, &out)
	return out, err
}

// DeliverEvent implements admin.Operator.
func (c *Client) DeliverEvent(ctx context.Context, id int64, destination string) (admin.Count, error) {
	var out admin.Count
	err := c.do(ctx, routeDeliverEvent, []string{strconv.FormatInt(id, 10)}, nil, deliverBody{Destination: destination}, &out)
	return out, err
}

// ReplayEvents implements admin.Operator.
func (c *Client) ReplayEvents(ctx context.Context, f admin.EventFilter, dryRun bool) (admin.Count, error) {
	var out admin.Count
	err := c.do(ctx, routeReplayEvents, nil, nil, bulkEvents{EventFilter: f, DryRun: dryRun}, &out)
	return out, err
}

// DeadLetters implements admin.Operator.
func (c *Client) DeadLetters(ctx context.Context, f admin.DeadFilter) (admin.DeadPage, error) {
	q := url.Values{}
	setString(q, "destination", f.Destination)
	setString(q, "source", f.Source)
	setString(q, "cursor", f.Cursor)
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out admin.DeadPage
	err := c.do(ctx, routeDeadLetters, nil, q, nil, &out)
	return out, err
}

// RetryDeadLetters implements admin.Operator.
func (c *Client) RetryDeadLetters(ctx context.Context, f admin.DeadFilter, dryRun bool) (admin.Count, error) {
	var out admin.Count
	err := c.do(ctx, routeRetryDead, nil, nil, bulkDead{DeadFilter: f, DryRun: dryRun}, &out)
	return out, err
}

// PurgeDeadLetters implements admin.Operator.
func (c *Client) PurgeDeadLetters(ctx context.Context, f admin.DeadFilter, dryRun bool) (admin.Count, error) {
	q := url.Values{}
	setString(q, "destination", f.Destination)
	setString(q, "source", f.Source)
	if f.All {
		q.Set("all", "true")
	}
	if dryRun {
		q.Set("dry_run", "true")
	}
	var out admin.Count
	err := c.do(ctx, routePurgeDead, nil, q, nil, &out)
	return out, err
}

// Destinations implements admin.Operator.
func (c *Client) Destinations(ctx context.Context) ([]admin.DestinationView, error) {
	var out struct {
		Destinations []admin.DestinationView `json:"destinations"`
	}
	err := c.do(ctx, routeDestinations, nil, nil, nil, &out)
	return out.Destinations, err
}

// SetPaused implements admin.Operator.
func (c *Client) SetPaused(ctx context.Context, destination string, paused bool) (admin.DestinationView, error) {
	route := routeResume
	if paused {
		route = routePause
	}
	var out admin.DestinationView
	err := c.do(ctx, route, []string{destination}, nil, nil, &out)
	return out, err
}

// SetBreaker implements admin.Operator.
func (c *Client) SetBreaker(ctx context.Context, destination string, open bool) (admin.DestinationView, error) {
	route := routeBreakerClose
	if open {
		route = routeBreakerOpen
	}
	var out admin.DestinationView
	err := c.do(ctx, route, []string{destination}, nil, nil, &out)
	return out, err
}

// Audit implements admin.Operator.
func (c *Client) Audit(ctx context.Context, cursor string, limit int) (admin.AuditPage, error) {
	q := url.Values{}
	setString(q, "cursor", cursor)
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out admin.AuditPage
	err := c.do(ctx, routeAudit, nil, q, nil, &out)
	return out, err
}

// Doctor implements admin.Operator.
func (c *Client) Doctor(ctx context.Context, source string) (admin.DoctorReport, error) {
	q := url.Values{}
	setString(q, "source", source)
	var out admin.DoctorReport
	err := c.do(ctx, routeDoctor, nil, q, nil, &out)
	return out, err
}

// ResetEffect implements admin.Operator.
func (c *Client) ResetEffect(ctx context.Context, key string) error {
	return c.do(ctx, effect.ResetRoute, []string{key}, nil, nil, nil)
}

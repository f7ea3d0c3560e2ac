package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client is the Operator over a running gateway's API.
type Client struct {
	base  string
	token string
	http  *http.Client
}

var _ Operator = (*Client)(nil)

// NewClient returns a Client for the API at base (e.g.
// http://127.0.0.1:8081) with a token from api.tokens.
func NewClient(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, http: hc}
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Err == "" {
			e.Err, e.Reason = strings.TrimSpace(string(data)), http.StatusText(resp.StatusCode)
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
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

// Sources implements Operator.
func (c *Client) Sources(ctx context.Context) ([]SourceView, error) {
	var out struct {
		Sources []SourceView `json:"sources"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/sources", nil, nil, &out)
	return out.Sources, err
}

// Stats implements Operator.
func (c *Client) Stats(ctx context.Context, sq StatsQuery) (StatsView, error) {
	q := url.Values{}
	setString(q, "source", sq.Source)
	setString(q, "destination", sq.Destination)
	setTime(q, "from", sq.From)
	setTime(q, "to", sq.To)
	if sq.Granularity == Daily {
		q.Set("granularity", "1d")
	}
	var out StatsView
	err := c.do(ctx, http.MethodGet, "/v1/stats", q, nil, &out)
	return out, err
}

// Events implements Operator.
func (c *Client) Events(ctx context.Context, f EventFilter) (EventPage, error) {
	q := url.Values{}
	setString(q, "source", f.Source)
	setString(q, "key", f.Key)
	setString(q, "state", f.State)
	setString(q, "key_prefix", f.KeyPrefix)
	setTime(q, "from", f.From)
	setTime(q, "to", f.To)
	setString(q, "cursor", f.Cursor)
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out EventPage
	err := c.do(ctx, http.MethodGet, "/v1/events", q, nil, &out)
	return out, err
}

// Event implements Operator.
func (c *Client) Event(ctx context.Context, id int64) (EventDetail, error) {
	var out EventDetail
	err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/events/%d", id), nil, nil, &out)
	return out, err
}

// ReplayEvent implements Operator.
func (c *Client) ReplayEvent(ctx context.Context, id int64) (Count, error) {
	var out Count
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/v1/events/%d/replay", id), nil, nil, &out)
	return out, err
}

// ReplayEvents implements Operator.
func (c *Client) ReplayEvents(ctx context.Context, f EventFilter, dryRun bool) (Count, error) {
	var out Count
	err := c.do(ctx, http.MethodPost, "/v1/events/replay", nil, bulkEvents{EventFilter: f, DryRun: dryRun}, &out)
	return out, err
}

// DeadLetters implements Operator.
func (c *Client) DeadLetters(ctx context.Context, f DeadFilter) (DeadPage, error) {
	q := url.Values{}
	setString(q, "destination", f.Destination)
	setString(q, "source", f.Source)
	setString(q, "cursor", f.Cursor)
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out DeadPage
	err := c.do(ctx, http.MethodGet, "/v1/dead-letters", q, nil, &out)
	return out, err
}

// RetryDeadLetters implements Operator.
func (c *Client) RetryDeadLetters(ctx context.Context, f DeadFilter, dryRun bool) (Count, error) {
	var out Count
	err := c.do(ctx, http.MethodPost, "/v1/dead-letters/retry", nil, bulkDead{DeadFilter: f, DryRun: dryRun}, &out)
	return out, err
}

// PurgeDeadLetters implements Operator.
func (c *Client) PurgeDeadLetters(ctx context.Context, f DeadFilter, dryRun bool) (Count, error) {
	q := url.Values{}
	setString(q, "destination", f.Destination)
	setString(q, "source", f.Source)
	if f.All {
		q.Set("all", "true")
	}
	if dryRun {
		q.Set("dry_run", "true")
	}
	var out Count
	err := c.do(ctx, http.MethodDelete, "/v1/dead-letters", q, nil, &out)
	return out, err
}

// Destinations implements Operator.
func (c *Client) Destinations(ctx context.Context) ([]DestinationView, error) {
	var out struct {
		Destinations []DestinationView `json:"destinations"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/destinations", nil, nil, &out)
	return out.Destinations, err
}

// SetPaused implements Operator.
func (c *Client) SetPaused(ctx context.Context, destination string, paused bool) (DestinationView, error) {
	action := "resume"
	if paused {
		action = "pause"
	}
	var out DestinationView
	err := c.do(ctx, http.MethodPost, "/v1/destinations/"+url.PathEscape(destination)+"/"+action, nil, nil, &out)
	return out, err
}

// Audit implements Operator.
func (c *Client) Audit(ctx context.Context, cursor string, limit int) (AuditPage, error) {
	q := url.Values{}
	setString(q, "cursor", cursor)
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out AuditPage
	err := c.do(ctx, http.MethodGet, "/v1/audit", q, nil, &out)
	return out, err
}

// Doctor implements Operator.
func (c *Client) Doctor(ctx context.Context, source string) (DoctorReport, error) {
	q := url.Values{}
	setString(q, "source", source)
	var out DoctorReport
	err := c.do(ctx, http.MethodGet, "/v1/doctor", q, nil, &out)
	return out, err
}

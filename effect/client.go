package effect

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// Client is the ledger over HTTP: a running gateway's API, reached with a
// bearer token. It behaves as the in-process ledger does, with one
// difference: it cannot join your database transaction (see NewTx).
type Client struct{ api *jsonhttp.Client }

var _ Ledger = (*Client)(nil)

// NewClient returns a client of the gateway API at baseURL (for example
// http://127.0.0.1:8081), authenticated with token. httpClient may be nil.
func NewClient(baseURL, token string, httpClient *http.Client) *Client {
	c := jsonhttp.NewClient(baseURL, token, httpClient)
	// A result may be 16 MiB (effects.max_result's bound), and a claim's or
	// a record's answer holds it and more.
	c.MaxAnswer = 32 << 20
	return &Client{api: c}
}

// answer is what any endpoint may answer.
type answer struct {
	State          string          `json:"state"`
	Token          string          `json:"token"`
	Attempt        int             `json:"attempt"`
	Reclaimed      bool            `json:"reclaimed"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	Result         json.RawMessage `json:"result"`
	RetryAfter     time.Time       `json:"retry_after"`
	Error          string          `json:"error"`
	Reason         string          `json:"reason"`
	Field          string          `json:"field"`
}

func (c *Client) do(ctx context.Context, route jsonhttp.Route, key string, body any) (int, answer, []byte, error) {
	status, raw, err := c.api.Do(ctx, route.Method, route.With(key), nil, body)
	if err != nil {
		return 0, answer{}, nil, fmt.Errorf("effect: %w", err)
	}
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil && status < 300 {
		// A success must read whole: a result taken as empty would be
		// another result than the one stored.
		return 0, answer{}, nil, fmt.Errorf("effect: the API's answer (%d) is not the JSON it should be: %w", status, err)
	}
	return status, a, raw, nil
}

// errorFor maps an answer that is not a success to the ledger's errors.
func errorFor(status int, a answer) error {
	switch {
	case status == http.StatusBadRequest:
		// The API's error is an InvalidError's text already: keep its
		// reason alone, or it would read "effect: result: effect: result: ...".
		reason := strings.TrimPrefix(a.Error, "effect: ")
		if a.Field != "" {
			reason = strings.TrimPrefix(reason, a.Field+": ")
		}
		return &InvalidError{Field: a.Field, Reason: reason}
	case status == http.StatusConflict && a.Reason == "busy":
		return &BusyError{RetryAfter: a.RetryAfter}
	case status == http.StatusConflict && a.Reason == "failed":
		return &FailedError{Reason: a.Error}
	case status == http.StatusConflict && a.Reason == "stale_token":
		return ErrStaleToken
	case status == http.StatusConflict:
		return ErrConflict
	case status == http.StatusUnprocessableEntity:
		return ErrFingerprint
	case status == http.StatusGone:
		return ErrExpired
	case status == http.StatusNotFound:
		return ErrNotFound
	}
	return fmt.Errorf("effect: the API answered %d: %s (%s)", status, a.Error, a.Reason)
}

type claimBody struct {
	Lease       string     `json:"lease,omitempty"`
	Fingerprint string     `json:"fingerprint,omitempty"`
	Deadline    *time.Time `json:"deadline,omitempty"`
}

// Claim implements Ledger.
func (c *Client) Claim(ctx context.Context, key string, opts ClaimOptions) (Claim, error) {
	if err := ValidKey(key); err != nil {
		return Claim{}, err
	}
	body := claimBody{Fingerprint: opts.Fingerprint}
	if opts.Lease != 0 {
		body.Lease = opts.Lease.String()
	}
	if !opts.Deadline.IsZero() {
		body.Deadline = &opts.Deadline
	}
	status, a, _, err := c.do(ctx, routeClaim, key, body)
	if err != nil {
		return Claim{}, err
	}
	switch status {
	case http.StatusCreated:
		return Claim{Token: a.Token, Attempt: a.Attempt, Reclaimed: a.Reclaimed, LeaseExpiresAt: a.LeaseExpiresAt}, nil
	case http.StatusOK:
		return Claim{AlreadyDone: true, Result: a.Result}, nil
	}
	return Claim{}, errorFor(status, a)
}

// Complete implements Ledger.
func (c *Client) Complete(ctx context.Context, key, token string, result json.RawMessage) error {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	if !json.Valid(result) {
		return &InvalidError{"result", "not JSON"}
	}
	// Built by hand: an encoder would compact the result, which is stored
	// and given back byte for byte.
	tok, _ := json.Marshal(token)
	body := make([]byte, 0, len(result)+len(tok)+24)
	body = append(append(append(append(body, `{"token":`...), tok...), `,"result":`...), result...)
	return c.post(ctx, routeComplete, key, jsonhttp.Raw(append(body, '}')))
}

// Release implements Ledger.
func (c *Client) Release(ctx context.Context, key, token, reason string) error {
	return c.post(ctx, routeRelease, key, map[string]any{"token": token, "error": reason})
}

// Fail implements Ledger.
func (c *Client) Fail(ctx context.Context, key, token, reason string) error {
	return c.post(ctx, routeFail, key, map[string]any{"token": token, "error": reason})
}

// Reset reopens a failed or expired record (an operator's action).
func (c *Client) Reset(ctx context.Context, key string) error {
	return c.post(ctx, ResetRoute, key, nil)
}

func (c *Client) post(ctx context.Context, route jsonhttp.Route, key string, body any) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	status, a, _, err := c.do(ctx, route, key, body)
	if err != nil {
		return err
	}
	if status == http.StatusOK {
		return nil
	}
	return errorFor(status, a)
}

// Renew implements Ledger.
func (c *Client) Renew(ctx context.Context, key, token string, lease time.Duration) (time.Time, error) {
	if err := ValidKey(key); err != nil {
		return time.Time{}, err
	}
	if lease == 0 {
		lease = DefaultLease // as the in-process ledger takes it
	}
	status, a, _, err := c.do(ctx, routeRenew, key, map[string]any{"token": token, "lease": lease.String()})
	if err != nil {
		return time.Time{}, err
	}
	if status != http.StatusOK {
		return time.Time{}, errorFor(status, a)
	}
	return a.LeaseExpiresAt, nil
}

// Get implements Ledger.
func (c *Client) Get(ctx context.Context, key string) (Record, error) {
	if err := ValidKey(key); err != nil {
		return Record{}, err
	}
	status, a, raw, err := c.do(ctx, routeGet, key, nil)
	if err != nil {
		return Record{}, err
	}
	if status != http.StatusOK {
		return Record{}, errorFor(status, a)
	}
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return Record{}, fmt.Errorf("effect: the API's record: %w", err)
	}
	return r, nil
}

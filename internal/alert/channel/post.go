package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/internal/redact"
)

// poster POSTs JSON to a webhook's URL, for the kinds that are webhooks.
type poster struct {
	name    string
	url     string // may hold a secret (Slack's, Discord's): never in an error
	headers map[string]string
	client  *http.Client
}

// post sends body; an answer other than 2xx is an error that quotes the
// status and the start of the answer (Slack's "no_text", Discord's
// field errors), never the URL.
func (p poster) post(ctx context.Context, key string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("channel %s: %w", p.name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("channel %s: its URL does not parse", p.name)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "oncehook-alerts")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// Slack's and Discord's secret is the URL's path, which redact
		// keeps: the error says what failed without the URL at all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("POST: %w", ue.Err)
		}
		return fmt.Errorf("channel %s: %w", p.name, redact.Error(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		msg := strings.TrimSpace(string(answer))
		if msg != "" {
			msg = ": " + truncate(strings.Join(strings.Fields(msg), " "), 200)
		}
		return fmt.Errorf("channel %s: %s%s", p.name, resp.Status, p.scrub(msg))
	}
	return nil
}

// scrub takes out of a receiver's answer every secret the request carried,
// which a receiver may echo (a proxy's error page quoting the path, an API
// quoting its api_key or the Authorization it refused): the URL's path
// segments, its user's password, its query's values and the headers'
// values. The error reaches the log, the alert's effect record (listed to
// read-only tokens) and the dashboard.
func (p poster) scrub(msg string) string {
	var secrets []string
	add := func(v string) {
		if len(v) >= 6 {
			secrets = append(secrets, v)
		}
	}
	if u, err := url.Parse(p.url); err == nil {
		add(u.Path)
		add(u.EscapedPath())
		for _, seg := range strings.Split(u.Path, "/") {
			add(seg)
		}
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
		add(u.RawQuery)
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
				add(url.QueryEscape(v))
			}
		}
	}
	for _, v := range p.headers {
		add(v)
		for _, part := range strings.Fields(v) {
			add(part)
		}
	}
	// Longest first, so that a path is taken out whole before its parts.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, secret := range secrets {
		msg = strings.ReplaceAll(msg, secret, "[redacted]")
	}
	return msg
}

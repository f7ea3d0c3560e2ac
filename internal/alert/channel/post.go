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
		return fmt.Errorf("channel %s: %s%s", p.name, resp.Status, msg)
	}
	return nil
}

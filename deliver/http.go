package deliver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/provider"
)

// HTTPSender POSTs each delivery to a URL: the destination kind every
// destination with a url: is.
type HTTPSender struct {
	URL *url.URL
	// SigningKey, when set, signs each delivery the Standard Webhooks way
	// (webhook-id, webhook-timestamp, webhook-signature).
	SigningKey []byte
	Client     *http.Client
	Now        func() time.Time

	// base is URL's text, as NewHTTPSender made it from parsed: most
	// sends go to URL as it is, and need not write it out each time.
	base   string
	parsed *url.URL
}

// NewHTTPSender is the sender of a destination at rawURL (validated by the
// config), over client.
func NewHTTPSender(rawURL string, signingKey []byte, client *http.Client, now func() time.Time) (*HTTPSender, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("destination url: %w", redact.Error(err))
	}
	if now == nil {
		now = time.Now
	}
	return &HTTPSender{URL: u, SigningKey: signingKey, Client: client, Now: now, base: u.String(), parsed: u}, nil
}

// TargetURL is where m goes over HTTP: base, with the path and query a
// transformation set in their place.
func TargetURL(base *url.URL, m *Message) *url.URL {
	if m.Path == "" && m.Query == nil {
		return base
	}
	c := *base
	if m.Path != "" {
		c.Path, c.RawPath = m.Path, ""
	}
	if m.Query != nil {
		c.RawQuery = m.Query.Encode()
	}
	return &c
}

// snippets are Send's buffers for the start of an answer (and the
// draining of the rest).
var snippets = sync.Pool{New: func() any { return new([responseSnippet]byte) }}

// Close does nothing: the worker's client is shared.
func (s *HTTPSender) Close() error { return nil }

// Send POSTs m and classifies the answer: 2xx delivered; 400, 401, 403,
// 404, 410 and 422 permanent (IsPermanent); a redirect permanent too (a
// misconfigured URL no retry fixes, and following it would POST the event
// somewhere nobody configured); anything else, and no answer, a retry,
// with Retry-After honoured on 429 and 503.
func (s *HTTPSender) Send(ctx context.Context, m *Message) Result {
	target := s.base
	if u := TargetURL(s.URL, m); u != s.parsed || s.base == "" {
		target = u.String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(m.Body))
	if err != nil {
		return Result{Kind: Permanent, After: -1, Error: redact.Error(err).Error()}
	}
	// The Message is this attempt's own (Sender's contract): its headers
	// become the request's as they are, not copied into a second map.
	if m.Header != nil {
		req.Header = m.Header
	}
	SignHeader(req.Header, m, s.SigningKey, s.Now)
	resp, err := s.Client.Do(req)
	if err != nil {
		// (A timeout is said by the worker, which knows the deadline.)
		// net/http quotes the whole URL, and a destination's query may
		// hold its API key: this text is stored and shown.
		return Result{Kind: Retry, After: -1, Error: redact.Error(err).Error()}
	}
	defer resp.Body.Close()
	// Keep the start of the answer for the operator; drain a little more so
	// the connection can be reused. The rest is not ours.
	buf := snippets.Get().(*[responseSnippet]byte)
	n, _ := io.ReadFull(resp.Body, buf[:])
	res := Result{Status: resp.StatusCode, After: -1, Response: string(buf[:n]), Control: resp.Header.Get("Webhook-Delivery")}
	for drained := 0; drained < 64<<10; {
		k, err := resp.Body.Read(buf[:min(len(buf), 64<<10-drained)])
		drained += k
		if err != nil {
			break
		}
	}
	snippets.Put(buf)
	var after time.Duration = -1
	if ra, ok := retryAfter(resp, s.Now()); ok {
		after = ra
	}
	location := ""
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		location = resp.Header.Get("Location")
	}
	classify(&res, after, location)
	return res
}

// SignHeader puts on h what every attempt of m carries beside the
// event's own headers, whichever way it travels (HTTP's POST, a pull):
// its Content-Type, oncehook's User-Agent and, with signingKey, the
// Standard Webhooks signature (webhook-id, webhook-timestamp,
// webhook-signature) over m's body as it is sent.
func SignHeader(h http.Header, m *Message, signingKey []byte, now func() time.Time) {
	own := ownHeaders{h: h, vals: make([]string, 0, 2)}
	if m.ContentType != "" {
		own.set("Content-Type", m.ContentType)
	}
	own.set("User-Agent", "oncehook")
	if signingKey != nil {
		id := MessageID(m.Source, m.Key)
		t := now()
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(t.Unix(), 10))
		h.Set("webhook-signature", provider.SignStandard(signingKey, id, t, m.Body))
	}
}

// ClassifyStatus is what an HTTP answer of status means for a delivery,
// as the HTTP sender classifies its destination's: 2xx delivered; 400,
// 401, 403, 404, 410 and 422 permanent; a redirect permanent (location
// is where it pointed); anything else a retry, after retryAfter when the
// answer (a 429 or a 503) said how long (-1: it did not). A pull
// consumer's ack reports its local app's status, and is classified here
// too, so both kinds of destination follow one rule.
func ClassifyStatus(status int, retryAfter time.Duration, location string) Result {
	res := Result{Status: status, After: -1}
	classify(&res, retryAfter, location)
	return res
}

// classify sets res's kind (and error) from res.Status.
func classify(res *Result, after time.Duration, location string) {
	switch status := res.Status; {
	case status >= 200 && status < 300:
		res.Kind = Delivered
	case IsPermanent(status):
		res.Kind, res.Error = Permanent, fmt.Sprintf("permanent failure: HTTP %d", status)
	case status >= 300 && status < 400:
		res.Kind = Permanent
		res.Error = fmt.Sprintf("redirected (HTTP %d to %q): fix the destination's url", status, storable(redact.URL(location), 256))
	default:
		res.Kind, res.Error = Retry, fmt.Sprintf("HTTP %d", status)
		if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && after >= 0 {
			res.After = after
		}
	}
}

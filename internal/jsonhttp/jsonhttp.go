// Package jsonhttp is what every oncehook endpoint and client share on the
// wire: one way to answer JSON, one error shape, routes written once for
// both the handler that serves them and the client that calls them, and
// the client's request loop. The admin API (package api), the effects
// ledger's API (package effect), intake (package receive) and the token
// check all answer through it, so that a caller parses one shape whatever
// it called.
package jsonhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Error is the body of every error answer: a message for people, a
// reason for programs (stable, snake_case), and the field at fault when
// there is one.
type Error struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
	Field  string `json:"field,omitempty"`
}

// WriteJSON answers v as JSON with status. Answers may echo what the
// caller sent (a source's name in a 404), so a browser is never let sniff
// them into something else; none is cached (they describe a moving
// state); HTML is left unescaped (a result stored as JSON comes back as
// it was given).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// WriteRaw answers b, JSON already encoded, with status and WriteJSON's
// headers: for an answer that holds JSON to give back byte for byte, which
// an encoder would compact.
func WriteRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

// WriteError answers the error shape.
func WriteError(w http.ResponseWriter, status int, reason, msg string) {
	WriteJSON(w, status, Error{Error: msg, Reason: reason})
}

// WriteFieldError answers the error shape for a field at fault (400).
func WriteFieldError(w http.ResponseWriter, field, msg string) {
	WriteJSON(w, http.StatusBadRequest, Error{Error: msg, Reason: "invalid", Field: field})
}

// Route is one endpoint: its method and its path pattern, as
// http.ServeMux reads it ("/v1/events/{id}"). The handler registers
// Pattern(); the client fills Path(...) in: the path is written once.
type Route struct {
	Method string
	Path   string
}

// Pattern is r as a ServeMux pattern.
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// With fills r's wildcards in order with args, each path-escaped.
func (r Route) With(args ...string) string {
	p := r.Path
	for _, a := range args {
		i := strings.IndexByte(p, '{')
		j := strings.IndexByte(p, '}')
		if i < 0 || j < i {
			panic(fmt.Sprintf("jsonhttp: route %s takes %d arguments", r.Path, strings.Count(r.Path, "{")))
		}
		seg := url.PathEscape(a)
		if a == "." || a == ".." {
			// PathEscape keeps dots, and a "." or ".." segment is a
			// relative path: a server cleans it away (ServeMux redirects
			// /v1/effects/./claim to /v1/effects/claim).
			seg = strings.ReplaceAll(a, ".", "%2E")
		}
		p = p[:i] + seg + p[j+1:]
	}
	return p
}

// Client calls an oncehook API with a bearer token.
type Client struct {
	base  string
	token string
	http  *http.Client
	// MaxAnswer bounds how much of an answer is read.
	MaxAnswer int64
}

// NewClient returns a client of the API at base (e.g.
// http://127.0.0.1:8081), with a token from api.tokens. hc may be nil (a
// client with a 30 s timeout).
func NewClient(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, http: hc, MaxAnswer: 64 << 20}
}

// Raw is a request body already encoded as JSON.
type Raw []byte

// Do sends one request: body (nil for none) as JSON, or as it is when it
// is Raw. It returns the answer's status and body; an error only when no
// answer came.
func (c *Client) Do(ctx context.Context, method, path string, q url.Values, body any) (int, []byte, error) {
	return c.DoHeader(ctx, method, path, q, nil, body)
}

// DoHeader is Do with the request's headers h added (an If-Match).
func (c *Client) DoHeader(ctx context.Context, method, path string, q url.Values, h http.Header, body any) (int, []byte, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case Raw:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.MaxAnswer+1))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if int64(len(data)) > c.MaxAnswer {
		// Cut, it would read as another answer (or none): say so instead.
		return 0, nil, fmt.Errorf("%s %s: the answer is over %d bytes, more than this client reads", method, path, c.MaxAnswer)
	}
	return resp.StatusCode, data, nil
}

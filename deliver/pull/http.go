package pull

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/duration"
	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// The two routes of the pull protocol, on the API listener.
const (
	PullRoute = "POST /v1/destinations/{name}/pull"
	AckRoute  = "POST /v1/deliveries/{id}/ack"
)

// PullBody is a pull's request body: durations as "30s", "500ms".
type PullBody struct {
	Max      int    `json:"max,omitempty"`
	Lease    string `json:"lease,omitempty"`
	Wait     string `json:"wait,omitempty"`
	Consumer string `json:"consumer,omitempty"`
}

// PullAnswer is a pull's answer.
type PullAnswer struct {
	Deliveries []WireDelivery `json:"deliveries"`
}

// WireDelivery is one delivery as a pull answers it: what a push delivery
// carries (its headers, its body byte for byte, base64 in JSON) and the
// lease to ack it under.
type WireDelivery struct {
	ID             string      `json:"id"`
	Source         string      `json:"source"`
	Key            string      `json:"key"`
	Type           string      `json:"type,omitempty"`
	Attempt        int         `json:"attempt"`
	Token          string      `json:"token"`
	LeaseExpiresAt time.Time   `json:"lease_expires_at"`
	ReceivedAt     time.Time   `json:"received_at"`
	Headers        http.Header `json:"headers"`
	Body           []byte      `json:"body"`
	// Path and Query, when the destination's transformation set them,
	// replace the consumer's URL's path and query, as they replace an HTTP
	// destination's (Query encoded, "a=1&b=2"; ForwardURL does it).
	Path  string `json:"path,omitempty"`
	Query string `json:"query,omitempty"`
}

// ForwardURL is base (a consumer's own URL) with d's path and query in
// place of its own, as an HTTP destination's URL gets them.
func (d WireDelivery) ForwardURL(base *url.URL) *url.URL {
	if d.Path == "" && d.Query == "" {
		return base
	}
	c := *base
	if d.Path != "" {
		c.Path, c.RawPath = d.Path, ""
	}
	if d.Query != "" {
		c.RawQuery = d.Query
	}
	return &c
}

// AckBody is an ack's request body: the lease token and the consumer's
// outcome (its local app's status, or the error when there was none).
type AckBody struct {
	Token      string `json:"token"`
	Status     int    `json:"status,omitempty"`
	Latency    string `json:"latency,omitempty"`
	Error      string `json:"error,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
	Response   string `json:"response,omitempty"`
}

// AckAnswer says how the ack was classified: delivered, retry or
// permanent (the worker may still make a retry a dead letter, when the
// destination's attempts are spent).
type AckAnswer struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
}

// maxBody bounds a pull's and an ack's request body.
const maxBody = 64 << 10

// ServePull answers PullRoute (behind apiauth.WrapPull).
func (h *Hub) ServePull(w http.ResponseWriter, r *http.Request) {
	var b PullBody
	if !readBody(w, r, &b) {
		return
	}
	req := Request{Max: b.Max, Lease: DefaultLease}
	if b.Max < 0 || b.Max > MaxBatch {
		jsonhttp.WriteFieldError(w, "max", fmt.Sprintf("from 1 to %d", MaxBatch))
		return
	}
	var err error
	if b.Lease != "" {
		if req.Lease, err = duration.Parse(b.Lease); err != nil || req.Lease < minLease {
			jsonhttp.WriteFieldError(w, "lease", "a duration of at least 1s, e.g. 30s")
			return
		}
	}
	if b.Wait != "" {
		if req.Wait, err = duration.Parse(b.Wait); err != nil || req.Wait > MaxWait {
			jsonhttp.WriteFieldError(w, "wait", fmt.Sprintf("a duration up to %s, e.g. 20s", MaxWait))
			return
		}
	}
	req.Consumer = consumer(r, b.Consumer)
	ds, err := h.Take(r.Context(), r.PathValue("name"), req)
	if err != nil {
		answer(w, err)
		return
	}
	out := PullAnswer{Deliveries: make([]WireDelivery, len(ds))}
	for i, d := range ds {
		if d.Body == nil {
			d.Body = []byte{} // "", not null
		}
		if d.Header == nil {
			d.Header = http.Header{}
		}
		out.Deliveries[i] = WireDelivery{
			ID: d.ID, Source: d.Source, Key: d.Key, Type: d.Type, Attempt: d.Attempt, Token: d.Token,
			LeaseExpiresAt: d.LeaseExpiry.UTC(), ReceivedAt: d.ReceivedAt.UTC(), Headers: d.Header, Body: d.Body,
			Path: d.Path,
		}
		if d.Query != nil {
			out.Deliveries[i].Query = d.Query.Encode()
		}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, out)
}

// AckDestination is the destination whose lease an ack names, for
// WrapPull to authorize: "" when no lease here has that delivery id.
func (h *Hub) AckDestination(r *http.Request) string { return h.Destination(r.PathValue("id")) }

// ServeAck answers AckRoute (behind apiauth.WrapPull, with
// AckDestination).
func (h *Hub) ServeAck(w http.ResponseWriter, r *http.Request) {
	var b AckBody
	if !readBody(w, r, &b) {
		return
	}
	if b.Token == "" {
		jsonhttp.WriteFieldError(w, "token", "the lease token the pull handed out with the delivery")
		return
	}
	out := Outcome{Status: b.Status, Error: b.Error, Response: b.Response}
	var err error
	if b.Latency != "" {
		if out.Latency, err = duration.Parse(b.Latency); err != nil || out.Latency < 0 {
			jsonhttp.WriteFieldError(w, "latency", "a duration of 0 or more, e.g. 12ms")
			return
		}
	}
	if b.RetryAfter != "" {
		if out.RetryAfter, err = duration.Parse(b.RetryAfter); err != nil || out.RetryAfter < 0 {
			jsonhttp.WriteFieldError(w, "retry_after", "a duration of 0 or more, e.g. 30s")
			return
		}
	}
	id := r.PathValue("id")
	var kind deliver.ResultKind
	if dest := h.Destination(id); dest != "" {
		kind, err = h.Ack(dest, id, b.Token, out)
	} else {
		// Handed out by another replica, or not leased at all: the store says.
		c, _ := apiauth.CallerOf(r.Context())
		kind, err = h.AckStored(r.Context(), c.MayPull, consumer(r, ""), id, b.Token, out)
	}
	if err != nil {
		answer(w, err)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, AckAnswer{ID: id, Outcome: kind.String()})
}

// consumer names who pulls: the token's name, and what the consumer says
// of itself.
func consumer(r *http.Request, said string) string {
	name := "?"
	if c, ok := apiauth.CallerOf(r.Context()); ok {
		name = c.Name
	}
	if said != "" {
		if len(said) > 64 {
			said = said[:64]
		}
		name += "/" + said
	}
	return name
}

func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		jsonhttp.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "the request body is over 64KiB")
		return false
	}
	if len(data) == 0 {
		return true
	}
	if err := json.Unmarshal(data, v); err != nil {
		jsonhttp.WriteError(w, http.StatusBadRequest, "invalid", "the body is not the JSON this endpoint takes: "+err.Error())
		return false
	}
	return true
}

// answer answers one of the named errors.
func answer(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrUnknown):
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, ErrNoLease):
		jsonhttp.WriteError(w, http.StatusConflict, "lease_unknown", err.Error())
	case errors.Is(err, ErrStaleToken):
		jsonhttp.WriteError(w, http.StatusConflict, "stale_token", err.Error())
	case errors.Is(err, ErrInvalid):
		jsonhttp.WriteError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, ErrForbidden):
		jsonhttp.WriteError(w, http.StatusForbidden, "not_consumer", err.Error())
	case errors.Is(err, ErrUnavailable):
		jsonhttp.WriteError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	default:
		jsonhttp.WriteError(w, http.StatusInternalServerError, "internal", "the ack could not be taken")
	}
}

package receive

// The events of an envelope, whatever transport brought it: each one's
// key (or a keyless one), type, deliveries and place in its entity's
// order, and what of the envelope travels with it. Accept (accept.go)
// runs these steps; nothing here knows HTTP.

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/store"
)

// newEvents makes an envelope's items into events: each with its key
// (or a keyless one), its type, and the deliveries its source's routes
// pick (package route decides). keyless is the index of the first item
// that has no key when the source rejects such events (then there are no
// events), else -1. The items' filters share one budget, the request's
// (route.Budget); over is how many events it ran out on, whose routes
// that filter on the body passed over them.
func newEvents(src *Source, items []provider.Item, header http.Header, u *url.URL, contentType, traceparent string, now time.Time) (_ []store.NewEvent, keyless, over int) {
	forward := forwardHeaders(src.traits.Forward, header)
	events := make([]store.NewEvent, len(items))
	var query url.Values // read once, when a route asks for it
	var budget *route.Budget
	for i, it := range items {
		e := store.NewEvent{
			Source:       src.Name,
			Key:          provider.SafeKey(it.Key),
			Type:         it.Type,
			ContentType:  contentType,
			Header:       forward,
			Body:         it.Body,
			ReceivedAt:   now,
			ExpiresAt:    now.Add(src.Window),
			Destinations: src.all,
			Trace:        traceparent,
		}
		if src.BodyRetention > 0 {
			e.BodyExpiresAt = now.Add(src.BodyRetention)
		}
		if src.routed {
			if query == nil {
				query = u.Query()
			}
			if budget == nil {
				n := 0
				for _, it := range items {
					n += len(it.Body)
				}
				budget = route.NewBudget(n)
			}
			in := &route.Input{Body: it.Body, Header: header, Query: query, Path: u.Path, Budget: budget}
			e.Destinations, e.Filtered = src.plan.Pick(it.Type, in)
			if in.Over() {
				over++
			}
		}
		if src.Order != nil {
			e.Order = src.Order.place(header, it.Body, now)
		}
		if it.Key == "" {
			if src.RejectMissingKey {
				return nil, i, 0
			}
			e.Key, e.Keyless = keylessKey(), true
		}
		events[i] = e
	}
	return events, -1, over
}

// keylessKey names an event that has no provider key. It is unique, so the
// event is never deduplicated, and stored, so its deliveries still carry one
// stable Idempotency-Key.
func keylessKey() string {
	var b [16]byte
	rand.Read(b[:])
	return "keyless:" + strings.ToLower(hex.EncodeToString(b[:]))
}

// place reads an event's place among its entity's events; the zero Order
// (not ordered) when it has none. The entity is stored as every store
// can hold it (store.StorableEntity): an id with a NUL, bytes that are not
// UTF-8 or a megabyte of text still orders its events.
func (o *Order) place(h http.Header, body []byte, now time.Time) store.Order {
	p, ok := o.Rule.Read(h, body, now)
	if !ok {
		return store.Order{}
	}
	return store.Order{Entity: store.StorableEntity(p.Entity), Mode: o.Mode, Version: p.Version, Versioned: p.Versioned, VersionText: p.VersionText, DeliverStale: o.DeliverStale}
}

// forwardHeaders picks the preset's routing headers (names) out of the
// envelope's.
// A value that is long, not UTF-8 or not a valid header value is left
// out: it travels with every delivery, and a destination (or the store,
// or Go's HTTP client) could refuse it.
func forwardHeaders(names []string, h http.Header) http.Header {
	var out http.Header
	for _, name := range names {
		for _, v := range h.Values(name) {
			if !sendable(v, maxForwardValue) {
				continue
			}
			if out == nil {
				out = http.Header{}
			}
			k := http.CanonicalHeaderKey(name)
			out[k] = append(out[k], v)
		}
	}
	return out
}

// bounded cuts a message that may quote the request (an id, a header) to
// maxDetail bytes, so that neither a log line nor an answer grows with what
// a client sends.
func bounded(msg string) string {
	if len(msg) <= maxDetail {
		return msg
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "… (" + strconv.Itoa(len(msg)-cut) + " more bytes)"
}

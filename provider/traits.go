package provider

import "time"

// Traits is what a preset does beyond Preset's methods: each optional
// interface below (Forwarder, PathSecreter, Handshaker, GetAccepter,
// ContentTyper, Orderer) as a field. Describe reads them once, when a
// source loads, from the preset itself: intake then asks a struct on every
// request rather than the preset's type, and New's wrapper (which replaces
// key and type rules) forwards nothing by hand, so a new capability cannot
// be dropped on its way.
type Traits struct {
	// Forward lists the headers stored with each event and sent with each
	// delivery (Forwarder).
	Forward []string
	// PathSecret reports whether the source's secret may travel in the
	// path, /in/{source}/{secret} (PathSecreter).
	PathSecret bool
	// Handshake, when set, answers the provider's endpoint checks
	// (Handshaker).
	Handshake func(r *Request, now time.Time) (reply *Reply, ok bool, err error)
	// AcceptsGet, when set, reports whether a GET carries events
	// (GetAccepter).
	AcceptsGet func(r *Request) bool
	// ContentType, when set, is what the stored body is, where it is not
	// what the request carried (ContentTyper).
	ContentType func(r *Request) string
	// Order is the entity and version the provider names, when it names
	// one (Orderer); its Entity is empty otherwise.
	Order OrderDefault
}

// OrderDefault is a preset's entity and version rules (see
// ParseOrderRule): Version is empty where the provider sends none
// reliable, and Unit says what an integer version counts.
type OrderDefault struct {
	Entity, Version string
	Unit            VersionUnit
}

// Orderer is implemented by presets whose provider names the entity an
// event is about (see providers.md, "Event types and entities"), so that
// `order: {}` needs no rule of the user's.
type Orderer interface {
	DefaultOrder() OrderDefault
}

// Describe reads p's traits. p may be what New returns or a preset's own
// value: a wrapper's traits are its preset's.
func Describe(p Preset) Traits {
	if k, ok := p.(keyed); ok {
		p = k.Preset
	}
	var t Traits
	if f, ok := p.(Forwarder); ok {
		t.Forward = f.ForwardHeaders()
	}
	if ps, ok := p.(PathSecreter); ok {
		t.PathSecret = ps.AcceptsPathSecret()
	}
	if h, ok := p.(Handshaker); ok {
		t.Handshake = h.Handshake
	}
	if ga, ok := p.(GetAccepter); ok {
		t.AcceptsGet = ga.AcceptsGet
	}
	if ct, ok := p.(ContentTyper); ok {
		t.ContentType = ct.ContentType
	}
	if o, ok := p.(Orderer); ok {
		t.Order = o.DefaultOrder()
	}
	return t
}

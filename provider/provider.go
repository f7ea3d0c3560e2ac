// Package provider holds oncehook's presets: for each webhook provider, how
// its requests are verified (over the raw bytes, in constant time, against
// every configured secret), how a request splits into events, which stable
// key identifies each event, and how long keys must be kept to cover the
// provider's retry horizon.
//
// Presets are looked up by name with New. Each one lives in a file named
// after its provider. Every preset can also sign a request exactly as its
// provider does (Sign), which is what `oncehook send` uses to reproduce a
// provider's retry storm locally.
package provider

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"
)

// ErrSignature means the request is not authentic: a missing or wrong
// signature, or a signed timestamp outside the tolerance. Intake answers 401.
var ErrSignature = errors.New("signature rejected")

// ErrSignatureAge means the signature matched, but the timestamp it signs
// is outside the tolerance (too old, or too far ahead): the request is the
// provider's, made then. It wraps ErrSignature, so HTTP intake answers it
// 401 as any other (the provider signs each retry anew); a queue's message
// that waited in a backlog is nobody's to sign again, and intake takes it
// (receive.Envelope.Queued). Every preset checks the signature before the
// timestamp, so a forged request never gets this error.
var ErrSignatureAge = errors.New("signature too old or too far ahead")

// ErrMalformed means the body cannot be read as the preset requires (for
// example invalid JSON where the key is in the body). Intake answers 400.
var ErrMalformed = errors.New("malformed body")

// ErrTooLarge means the events a request splits into would add up to more
// than Request.MaxItemBytes: the preset stopped before building them all.
// Intake answers 413.
var ErrTooLarge = errors.New("the events would be too large")

func signatureError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSignature, fmt.Sprintf(format, args...))
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Request is what a preset sees of an inbound request. Body is the raw bytes
// exactly as received.
type Request struct {
	Method string
	URL    *url.URL
	Header http.Header
	Body   []byte
	// PathToken is what follows the source in the path (/in/{source}/{token}):
	// a secret carried in the URL, for providers that can send no header.
	PathToken string
	// MaxItemBytes, when set, is the most the bodies a preset builds for
	// its items (beyond slices of Body) may add up to. A preset that
	// builds them (WhatsApp rebuilds Meta's envelope around each update)
	// counts each before building it, and stops with ErrTooLarge: memory
	// stays bounded by the request however its items would multiply it.
	MaxItemBytes int64
}

// Reply is what a handshake answers.
type Reply struct {
	Status      int
	ContentType string
	Body        []byte
}

// Forwarder is implemented by presets whose provider puts what a
// destination routes on in headers rather than the body (X-GitHub-Event,
// X-Shopify-Topic, ...). Those headers are stored with the event and sent
// with each delivery. Credentials are never on such a list.
type Forwarder interface {
	ForwardHeaders() []string
}

// Handshaker is implemented by presets whose provider checks the endpoint
// before (or besides) sending events: WhatsApp's GET hub.challenge, Slack's
// url_verification. A handshake is answered and creates no event.
type Handshaker interface {
	// Handshake reports whether r is a handshake and, if so, the reply. An
	// error means it is a handshake that fails verification (401).
	Handshake(r *Request, now time.Time) (reply *Reply, ok bool, err error)
}

// PathSecreter is implemented by presets whose provider can send no header,
// so that a secret travels in the URL: POST /in/{source}/{secret}. For
// every other preset, a path under /in/{source}/ is not found.
type PathSecreter interface {
	AcceptsPathSecret() bool
}

// GetAccepter is implemented by presets whose provider may send events by
// GET, its parameters in the query (Twilio's status callbacks, when the
// callback method is set to GET). AcceptsGet reports whether r is one.
type GetAccepter interface {
	AcceptsGet(r *Request) bool
}

// ContentTyper is implemented by presets whose stored body is not what the
// request carried as is (a GET's query, kept as a form body): ContentType is
// what that body is.
type ContentTyper interface {
	ContentType(r *Request) string
}

// Item is one event of a request. A request carries one item unless the
// provider batches.
type Item struct {
	Key  string // the provider's stable event key; empty when none was found
	Body []byte // what is delivered for this event
	// Type is the provider's name for what happened (Stripe's
	// invoice.paid, Hotmart's PURCHASE_APPROVED), which destinations filter
	// on; empty when the provider says none (see eventType).
	Type string
}

// Preset is one provider's contract.
type Preset interface {
	// Name is the preset's name in configuration.
	Name() string
	// Verify checks the request's authenticity over its raw body.
	Verify(r *Request, now time.Time) error
	// Items splits the request into events and extracts each one's key.
	Items(r *Request) ([]Item, error)
	// DefaultWindow covers the provider's retry horizon.
	DefaultWindow() time.Duration
	// Sign makes r what the provider would send for r.Body, signed with
	// secret at now: it sets headers and, for providers that sign in the URL,
	// query parameters. id is the provider's delivery id where the provider
	// sends one (GitHub, Standard Webhooks, Twilio, ...).
	Sign(r *Request, secret string, now time.Time, id string) error
}

// SignHTTP signs req (whose body is body) as preset p's provider would.
func SignHTTP(p Preset, req *http.Request, body []byte, secret string, now time.Time, id string) error {
	if req.URL == nil {
		req.URL = &url.URL{}
	}
	return p.Sign(&Request{Method: req.Method, URL: req.URL, Header: req.Header, Body: body}, secret, now, id)
}

// Options configure a preset for one source.
type Options struct {
	Secrets []string
	// Tolerance is how far a signed timestamp may be from now, both ways.
	// Zero takes the preset's default.
	Tolerance time.Duration
	// Generic describes the generic preset's signature.
	Generic GenericOptions
	// Key, when set, replaces the preset's key extraction with rules of the
	// form "header:Name" or "json:path.to.field"; several make a composite.
	Key []string
	// Type, when set, replaces the preset's event type with rules of the
	// same form; the parts found are joined with ".".
	Type []string
	// Unsigned lets a generic source accept requests without a signature.
	Unsigned bool
	// VerifyToken answers WhatsApp's GET handshake.
	VerifyToken string
	// PublicURL is the source's URL as the provider calls it, for presets
	// that sign the URL (Twilio) when a proxy rewrites it. Empty: rebuilt
	// from the request (X-Forwarded-Proto and X-Forwarded-Host honoured).
	PublicURL string
}

type constructor func(Options) (Preset, error)

var presets = map[string]constructor{
	"generic":           newGeneric,
	"standard-webhooks": newStandardWebhooks,
	"stripe":            newStripe,
	"github":            newGitHub,
	"shopify":           newShopify,
	"whatsapp":          newWhatsApp,
	"evolution":         newEvolution,
	"hotmart":           newHotmart,
	"mercadopago":       newMercadoPago,
	"asaas":             newAsaas,
	"slack":             newSlack,
	"paddle":            newPaddle,
	"twilio":            newTwilio,
	"kiwify":            newKiwify,
	"eduzz":             newEduzz,
	"pagarme":           newPagarme,
	"svix":              newSvix,
}

// Names lists the known presets.
func Names() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Known reports whether name is a preset: a map lookup, where Names
// sorts a new list (a config's check asks for each source).
func Known(name string) bool {
	_, ok := presets[name]
	return ok
}

// New builds the named preset. Every preset's body first meets the rules
// all bodies meet (oneJSONValue); when opts.Key is set, the preset's own
// key extraction is replaced by those rules.
func New(name string, opts Options) (Preset, error) {
	c, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("unknown preset %q (known: %v)", name, Names())
	}
	p, err := c(opts)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", name, err)
	}
	k := keyed{Preset: p}
	if len(opts.Key) > 0 {
		if k.key, err = ParseKeyRule(opts.Key); err != nil {
			return nil, fmt.Errorf("preset %s: %w", name, err)
		}
	}
	if len(opts.Type) > 0 {
		if k.typ, err = ParseKeyRule(opts.Type); err != nil {
			return nil, fmt.Errorf("preset %s: type: %w", name, err)
		}
	}
	return k, nil
}

// ErrNoSecrets is New's error for a preset that verifies signatures
// given no secret: the config names the field (secrets) by it.
var ErrNoSecrets = errors.New("at least one secret is required")

func requireSecrets(opts Options) error {
	if len(opts.Secrets) == 0 {
		return ErrNoSecrets
	}
	for i, s := range opts.Secrets {
		if s == "" {
			return fmt.Errorf("secrets[%d] is empty", i)
		}
	}
	return nil
}

// keyed is every preset as New returns it: the body first meets the rules
// every body meets, whichever the preset (oneJSONValue), so that the same
// bytes are never an event at one source and malformed at another; then
// the preset splits it, and configured rules replace its key extraction,
// its event type, or both (an empty rule leaves the preset's own). It
// forwards none of the preset's optional interfaces: Describe reads them
// from the preset inside.
type keyed struct {
	Preset
	key, typ KeyRule
}

// wholeBodyDecoder is a preset whose Items decodes the whole body as one
// JSON value (decodeJSON, json.Unmarshal), which already refuses bytes after
// it: oneJSONValue would scan every body of the busiest presets a second
// time, on intake's hot path, to say the same.
type wholeBodyDecoder interface{ decodesWholeBody() }

func (k keyed) Items(r *Request) ([]Item, error) {
	if _, ok := k.Preset.(wholeBodyDecoder); !ok {
		if err := oneJSONValue(r.Body); err != nil {
			return nil, err
		}
	}
	items, err := k.Preset.Items(r)
	if err != nil {
		return nil, err
	}
	for i := range items {
		if len(k.key.parts) > 0 {
			key, err := k.key.Extract(r.Header, items[i].Body)
			if err != nil {
				return nil, err
			}
			items[i].Key = key
		}
		if len(k.typ.parts) > 0 {
			parts, err := k.typ.Values(r.Header, items[i].Body)
			if err != nil {
				return nil, err
			}
			items[i].Type = eventType(parts...)
		}
	}
	return items, nil
}

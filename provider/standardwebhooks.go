package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// standardWebhooks implements the Standard Webhooks spec (also Svix's
// scheme, under svix-* header names): webhook-signature holds space-separated
// "v1,<base64>" entries, each an HMAC-SHA256 of "<id>.<timestamp>.<raw body>"
// keyed by the secret's bytes (whsec_ stripped, then base64-decoded). The
// timestamp must be within 5 minutes of now, both ways.
//
// The key is webhook-id, which the spec keeps the same across retries.
type standardWebhooks struct {
	macs      keyedHMACs
	tolerance time.Duration
}

// DecodeStandardSecret turns a "whsec_<base64>" secret into its key bytes.
// A secret without the prefix is taken as base64 too, as the spec's
// libraries do. A secret with no key after the prefix is refused: an
// HMAC keyed with no bytes is one anybody can compute, so "whsec_" (what
// "whsec_${SECRET:-}" becomes when SECRET is empty) verified forgeries,
// where an empty secret is refused by the config.
func DecodeStandardSecret(secret string) ([]byte, error) {
	raw := strings.TrimPrefix(secret, "whsec_")
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, errors.New("secret is not whsec_<base64>")
	}
	if len(key) == 0 {
		return nil, errors.New("secret is empty after whsec_: anybody could sign with it")
	}
	return key, nil
}

// SignStandard returns the "v1,<base64>" signature of a Standard Webhooks
// message. oncehook also uses it to sign its own deliveries.
func SignStandard(key []byte, id string, ts time.Time, body []byte) string {
	sig := hmacWith(sha256.New, key, []byte(id), []byte("."), []byte(strconv.FormatInt(ts.Unix(), 10)), []byte("."), body)
	return "v1," + base64.StdEncoding.EncodeToString(sig)
}

func newStandardWebhooks(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	p := &standardWebhooks{tolerance: opts.Tolerance}
	if p.tolerance == 0 {
		p.tolerance = 5 * time.Minute
	}
	keys := make([][]byte, len(opts.Secrets))
	for i, s := range opts.Secrets {
		key, err := DecodeStandardSecret(s)
		if err != nil {
			return nil, errors.New("secrets[" + strconv.Itoa(i) + "]: " + err.Error())
		}
		keys[i] = key
	}
	p.macs = newKeyedHMACs(sha256.New, keys)
	return p, nil
}

func (*standardWebhooks) Name() string { return "standard-webhooks" }

// The spec's example schedule spans about 75.5 hours; 4 days covers it.
func (*standardWebhooks) DefaultWindow() time.Duration { return 4 * 24 * time.Hour }

// headers returns id, timestamp and signature, from webhook-* or svix-*.
// The names are written canonical (Webhook-Id for webhook-id): Get would
// allocate to canonicalise a lower-case one, on every request.
func standardHeaders(h http.Header) (id, ts, sig string) {
	id, ts, sig = h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature")
	if id == "" && ts == "" && sig == "" {
		id, ts, sig = h.Get("Svix-Id"), h.Get("Svix-Timestamp"), h.Get("Svix-Signature")
	}
	return id, ts, sig
}

func (p *standardWebhooks) Verify(r *Request, now time.Time) error {
	id, ts, header := standardHeaders(r.Header)
	if id == "" || ts == "" || header == "" {
		return signatureError("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sigs := p.macs.offered()
	for entry := range strings.FieldsSeq(header) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue // v1a (ed25519) and unknown versions are not ours to check
		}
		sigs.addBase64(sig)
	}
	if err := sigs.lacking("webhook-signature", "", "", "v1 entry", "base64"); err != nil {
		return err
	}
	if !p.macs.matchAny(&sigs, r.Body, id, ".", ts, ".") {
		return signatureError("no v1 signature matches")
	}
	return checkTimestamp(ts, now, p.tolerance)
}

func (*standardWebhooks) Items(r *Request) ([]Item, error) {
	id, _, _ := standardHeaders(r.Header)
	var body struct {
		Type keyText `json:"type"`
	}
	json.Unmarshal(r.Body, &body) // the spec's payloads are JSON with a type; anything else is untyped
	return one(id, string(body.Type), r.Body), nil
}

func (*standardWebhooks) Sign(r *Request, secret string, now time.Time, id string) error {
	h := r.Header
	key, err := DecodeStandardSecret(secret)
	if err != nil {
		return err
	}
	if id == "" {
		return errors.New("standard-webhooks needs a message id")
	}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", SignStandard(key, id, now, r.Body))
	setDefault(h, "Content-Type", "application/json")
	return nil
}

// svix is Standard Webhooks under Svix's header names (svix-id,
// svix-timestamp, svix-signature). Verification reads either set.
type svix struct{ *standardWebhooks }

func newSvix(opts Options) (Preset, error) {
	p, err := newStandardWebhooks(opts)
	if err != nil {
		return nil, err
	}
	return svix{p.(*standardWebhooks)}, nil
}

func (svix) Name() string { return "svix" }

func (s svix) Sign(r *Request, secret string, now time.Time, id string) error {
	if err := s.standardWebhooks.Sign(r, secret, now, id); err != nil {
		return err
	}
	for _, h := range []string{"id", "timestamp", "signature"} {
		r.Header.Set("svix-"+h, r.Header.Get("webhook-"+h))
		r.Header.Del("webhook-" + h)
	}
	return nil
}

package provider

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"
)

// twilio verifies X-Twilio-Signature: base64(HMAC-SHA1(auth token, URL +
// every POST parameter as name+value, sorted by name)). The URL is the full
// URL Twilio called, query string included, so behind a proxy that rewrites
// it, set the source's public_url. Twilio's SDKs accept the URL with and
// without the default port (:443, :80); so does this.
//
// JSON bodies: the URL carries bodySHA256=<hex sha256(raw body)>, the
// signature covers the URL alone, and the hash must match the body.
//
// The key is I-Twilio-Idempotency-Token when sent, else the status callback's
// SID plus its status (MessageSid+MessageStatus, CallSid+CallStatus): a
// callback fires once per status, so the SID alone would swallow the later
// ones.
type twilio struct {
	secrets   [][]byte
	publicURL string
}

func newTwilio(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &twilio{secrets: secretBytes(opts.Secrets), publicURL: strings.TrimSuffix(opts.PublicURL, "/")}, nil
}

func (*twilio) Name() string { return "twilio" }

// ForwardHeaders: Twilio's own idempotency token.
func (*twilio) ForwardHeaders() []string { return []string{"I-Twilio-Idempotency-Token"} }

// Twilio retries once by default (up to 5 with #rc=); a day covers it.
func (*twilio) DefaultWindow() time.Duration { return 24 * time.Hour }

// signedURL is the URL Twilio signed: the configured public URL with this
// request's path and query, or the request's own absolute URL.
func (p *twilio) signedURL(r *Request) string {
	if p.publicURL != "" {
		return p.publicURL + r.URL.RequestURI()
	}
	return r.URL.String()
}

// portVariants returns u as given, plus the same URL with the default port
// added or removed.
func portVariants(u string) []string {
	parsed, err := url.Parse(u)
	if err != nil {
		return []string{u}
	}
	def := map[string]string{"https": "443", "http": "80"}[parsed.Scheme]
	if def == "" {
		return []string{u}
	}
	alt := *parsed
	if host, port, err := net.SplitHostPort(parsed.Host); err == nil {
		if port != def {
			return []string{u}
		}
		alt.Host = host
	} else {
		alt.Host = parsed.Host + ":" + def
	}
	return []string{u, alt.String()}
}

// twilioData is what Twilio signs for a request to u with body.
func twilioData(u string, body []byte, jsonBody bool) (string, error) {
	if jsonBody {
		return u, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(u)
	for _, k := range names {
		vals := append([]string(nil), form[k]...)
		sort.Strings(vals)
		for _, v := range vals {
			b.WriteString(k + v)
		}
	}
	return b.String(), nil
}

func (p *twilio) Verify(r *Request, _ time.Time) error {
	sig := decodeBase64(r.Header.Get("X-Twilio-Signature"))
	if sig == nil {
		return signatureError("missing or malformed X-Twilio-Signature")
	}
	signed := p.signedURL(r)
	bodyHash := r.URL.Query().Get("bodySHA256")
	if bodyHash != "" {
		sum := sha256.Sum256(r.Body)
		if !tokenMatches(strings.ToLower(bodyHash), [][]byte{[]byte(hex.EncodeToString(sum[:]))}) {
			return signatureError("bodySHA256 does not match the body")
		}
	}
	var expected [][]byte
	for _, u := range portVariants(signed) {
		data, err := twilioData(u, r.Body, bodyHash != "")
		if err != nil {
			return signatureError("form body does not parse: %v", err)
		}
		for _, s := range p.secrets {
			expected = append(expected, hmacWith(sha1.New, s, []byte(data)))
		}
	}
	if !anyMatch(expected, [][]byte{sig}) {
		return signatureError("X-Twilio-Signature does not match %s", signed)
	}
	return nil
}

func (*twilio) Items(r *Request) ([]Item, error) {
	if token := r.Header.Get("I-Twilio-Idempotency-Token"); token != "" {
		return single(token, r.Body), nil
	}
	if r.URL.Query().Get("bodySHA256") != "" {
		return single("", r.Body), nil
	}
	form, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return nil, malformed("form body: %v", err)
	}
	for _, pair := range [][2]string{{"MessageSid", "MessageStatus"}, {"SmsSid", "SmsStatus"}, {"CallSid", "CallStatus"}} {
		if sid := form.Get(pair[0]); sid != "" {
			if status := form.Get(pair[1]); status != "" {
				return single(sid+":"+status, r.Body), nil
			}
			return single(sid, r.Body), nil
		}
	}
	return single("", r.Body), nil
}

// Sign signs for r.URL as given (send the request to the URL Twilio would
// call). A body that is JSON is signed the bodySHA256 way.
func (*twilio) Sign(r *Request, secret string, _ time.Time, id string) error {
	jsonBody := strings.HasPrefix(strings.TrimSpace(string(r.Body)), "{")
	if jsonBody {
		sum := sha256.Sum256(r.Body)
		q := r.URL.Query()
		q.Set("bodySHA256", hex.EncodeToString(sum[:]))
		r.URL.RawQuery = q.Encode()
		r.Header.Set("Content-Type", "application/json")
	} else {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	data, err := twilioData(r.URL.String(), r.Body, jsonBody)
	if err != nil {
		return err
	}
	r.Header.Set("X-Twilio-Signature", base64.StdEncoding.EncodeToString(hmacWith(sha1.New, []byte(secret), []byte(data))))
	if id != "" {
		r.Header.Set("I-Twilio-Idempotency-Token", id)
	}
	return nil
}

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
// URL Twilio called, query string included. Behind a proxy that rewrites the
// URL, set the source's public_url to the URL configured at Twilio (the one
// Twilio calls, e.g. https://hooks.example.com/in/twilio); the request's
// query string is added to it. Twilio's SDKs accept the URL with and without
// the default port (:443, :80); so does this.
//
// Status callbacks can be sent by GET (the callback method is set per
// number): their parameters are in the query, signed as part of the URL,
// and the event's body is that query, kept as a form body.
//
// JSON bodies: the URL carries bodySHA256=<hex sha256(raw body)>, the
// signature covers the URL alone, and the hash must match the body.
//
// The key is I-Twilio-Idempotency-Token when sent, else the status callback's
// SID plus its status (MessageSid+MessageStatus, CallSid+CallStatus): a
// callback fires once per status, so the SID alone would swallow the later
// ones.
type twilio struct {
	macs      keyedHMACs
	publicURL string
}

func newTwilio(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &twilio{macs: newKeyedHMACs(sha1.New, secretBytes(opts.Secrets)), publicURL: strings.TrimSuffix(opts.PublicURL, "/")}, nil
}

func (*twilio) Name() string { return "twilio" }

// ForwardHeaders: Twilio's own idempotency token.
func (*twilio) ForwardHeaders() []string { return []string{"I-Twilio-Idempotency-Token"} }

// Twilio retries once by default (up to 5 with #rc=); a day covers it.
func (*twilio) DefaultWindow() time.Duration { return 24 * time.Hour }

// signedURL is the URL Twilio signed: the configured public URL (the one
// Twilio calls) with this request's query string, or the request's own
// absolute URL.
func (p *twilio) signedURL(r *Request) string {
	if p.publicURL != "" {
		if r.URL.RawQuery != "" {
			return p.publicURL + "?" + r.URL.RawQuery
		}
		return p.publicURL
	}
	return r.URL.String()
}

// AcceptsGet: a status callback whose method is set to GET.
func (*twilio) AcceptsGet(r *Request) bool { return r.Method == "GET" && r.URL.RawQuery != "" }

// ContentType: a GET callback's parameters are stored as a form body.
func (*twilio) ContentType(r *Request) string {
	if r.Method == "GET" {
		return "application/x-www-form-urlencoded"
	}
	return r.Header.Get("Content-Type")
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
	sig := p.macs.offered()
	if !sig.addBase64(r.Header.Get("X-Twilio-Signature")) {
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
	ok := false
	for _, u := range portVariants(signed) {
		// A GET carries its parameters in the signed URL; a JSON body is
		// covered by bodySHA256, in the URL too.
		data, err := twilioData(u, r.Body, bodyHash != "" || r.Method == "GET")
		if err != nil {
			return signatureError("form body does not parse: %v", err)
		}
		if p.macs.matchAny(&sig, nil, data) {
			ok = true // every variant is still computed: no early exit
		}
	}
	if !ok {
		return signatureError("X-Twilio-Signature does not match %s", signed)
	}
	return nil
}

func (*twilio) Items(r *Request) ([]Item, error) {
	body := r.Body
	if r.Method == "GET" {
		body = []byte(r.URL.RawQuery)
	}
	if token := r.Header.Get("I-Twilio-Idempotency-Token"); token != "" {
		return single(joinKey(token), body), nil
	}
	if r.Method != "GET" && r.URL.Query().Get("bodySHA256") != "" {
		// A JSON callback without Twilio's idempotency token: Twilio
		// documents no event id in these bodies, so it is stored keyless
		// (never deduplicated). A source's key: rules can name one.
		return single("", body), nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, malformed("form parameters: %v", err)
	}
	for _, pair := range [][3]string{{"MessageSid", "MessageStatus", "message"}, {"SmsSid", "SmsStatus", "message"}, {"CallSid", "CallStatus", "call"}} {
		if sid := form.Get(pair[0]); sid != "" {
			if status := form.Get(pair[1]); status != "" {
				return one(joinKey(sid, status), eventType(pair[2], status), body), nil
			}
			return one(joinKey(sid), pair[2], body), nil
		}
	}
	return single("", body), nil
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
		setDefault(r.Header, "Content-Type", "application/json")
	} else {
		setDefault(r.Header, "Content-Type", "application/x-www-form-urlencoded")
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

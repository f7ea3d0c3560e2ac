package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// slack verifies X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret,
// "v0:" + X-Slack-Request-Timestamp + ":" + raw body)>, with the timestamp
// within 5 minutes of now either way. Slash commands and interactivity post
// form-encoded bodies; those raw bytes are signed the same way.
//
// The url_verification challenge is answered (after verification) with the
// challenge and creates no event. The key is the Events API envelope's
// event_id, identical on Slack's retries; a form post (slash command,
// interaction) is keyed on its trigger_id.
type slack struct {
	macs      keyedHMACs
	tolerance time.Duration
}

func newSlack(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	p := &slack{macs: newKeyedHMACs(sha256.New, secretBytes(opts.Secrets)), tolerance: opts.Tolerance}
	if p.tolerance == 0 {
		p.tolerance = 5 * time.Minute
	}
	return p, nil
}

func (*slack) Name() string { return "slack" }

// ForwardHeaders: why Slack retried, for the destination's logs.
func (*slack) ForwardHeaders() []string { return []string{"X-Slack-Retry-Num", "X-Slack-Retry-Reason"} }

// Slack retries 3 times within about 5 minutes.
func (*slack) DefaultWindow() time.Duration { return 24 * time.Hour }

func (p *slack) Verify(r *Request, now time.Time) error {
	ts := r.Header.Get("X-Slack-Request-Timestamp")
	hexSig, ok := strings.CutPrefix(r.Header.Get("X-Slack-Signature"), "v0=")
	sig := p.macs.offered()
	switch header := r.Header.Get("X-Slack-Signature"); {
	case ts == "" || header == "":
		return signatureError("missing X-Slack-Request-Timestamp or X-Slack-Signature")
	case !ok || !sig.addHex(hexSig):
		return signatureError("X-Slack-Signature is not v0=<hex>")
	}
	if !p.macs.matchAny(&sig, r.Body, "v0:", ts, ":") {
		return signatureError("X-Slack-Signature does not match")
	}
	return checkTimestamp(ts, now, p.tolerance)
}

type slackEnvelope struct {
	Type      string  `json:"type"`
	Challenge string  `json:"challenge"`
	EventID   keyText `json:"event_id"`
	Event     struct {
		Type keyText `json:"type"`
	} `json:"event"`
}

func (p *slack) Handshake(r *Request, now time.Time) (*Reply, bool, error) {
	if r.Method != http.MethodPost || !strings.Contains(string(r.Body), "url_verification") {
		return nil, false, nil
	}
	var env slackEnvelope
	if json.Unmarshal(r.Body, &env) != nil || env.Type != "url_verification" {
		return nil, false, nil
	}
	if err := p.Verify(r, now); err != nil {
		return nil, true, err
	}
	return &Reply{Status: http.StatusOK, ContentType: "text/plain", Body: []byte(env.Challenge)}, true, nil
}

func (*slack) Items(r *Request) ([]Item, error) {
	body := strings.TrimSpace(string(r.Body))
	if strings.HasPrefix(body, "{") {
		var env slackEnvelope
		if err := decodeJSON(r.Body, &env); err != nil {
			return nil, err
		}
		typ := string(env.Event.Type) // an event_callback's event (message, app_mention)
		if typ == "" {
			typ = env.Type
		}
		return one(string(env.EventID), typ, r.Body), nil
	}
	form, err := url.ParseQuery(body)
	if err != nil {
		return nil, malformed("body is neither JSON nor a form: %v", err)
	}
	key, typ := form.Get("trigger_id"), ""
	if form.Get("command") != "" {
		typ = "command" // a slash command
	}
	if payload := form.Get("payload"); payload != "" {
		var p struct {
			TriggerID keyText `json:"trigger_id"`
			Type      keyText `json:"type"` // block_actions, view_submission, ...
		}
		json.Unmarshal([]byte(payload), &p)
		if key == "" {
			key = string(p.TriggerID)
		}
		typ = string(p.Type)
	}
	return one(key, typ, r.Body), nil
}

func (*slack) Sign(r *Request, secret string, now time.Time, _ string) error {
	ts := strconv.FormatInt(now.Unix(), 10)
	r.Header.Set("X-Slack-Request-Timestamp", ts)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(hmacWith(sha256.New, []byte(secret), []byte("v0:"+ts+":"), r.Body)))
	if strings.HasPrefix(strings.TrimSpace(string(r.Body)), "{") {
		setDefault(r.Header, "Content-Type", "application/json")
	} else {
		setDefault(r.Header, "Content-Type", "application/x-www-form-urlencoded")
	}
	return nil
}

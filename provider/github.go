package provider

import (
	"encoding/json"
	"time"
)

// github verifies X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw)>.
// GitHub signs no timestamp, so a captured request can be replayed; dedup on
// the delivery id is what makes a replay harmless.
//
// The key is the X-GitHub-Delivery header, which GitHub keeps on redelivery.
// The body is not parsed: GitHub can post form-encoded payloads too.
type github struct {
	macs keyedHMACs
}

func newGitHub(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &github{macs: hubMACs(opts)}, nil
}

func (*github) Name() string { return "github" }

// ForwardHeaders: GitHub says what happened only in X-GitHub-Event.
func (*github) ForwardHeaders() []string {
	return []string{"X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID",
		"X-GitHub-Hook-Installation-Target-Type", "X-GitHub-Hook-Installation-Target-ID"}
}

// GitHub does not retry by itself; redeliveries are manual and can come days
// later, so keys are kept for a week.
func (*github) DefaultWindow() time.Duration { return 7 * 24 * time.Hour }

func (p *github) Verify(r *Request, _ time.Time) error {
	return verifyHubSignature(r, p.macs)
}

func (*github) Items(r *Request) ([]Item, error) {
	// The event is the header (pull_request); the action, the body's
	// (opened). A form-encoded delivery (payload=...) has no JSON to read
	// the action from here: its type is the event alone.
	var body struct {
		Action keyText `json:"action"`
	}
	json.Unmarshal(r.Body, &body)
	return one(r.Header.Get("X-GitHub-Delivery"), eventType(r.Header.Get("X-GitHub-Event"), string(body.Action)), r.Body), nil
}

func (*github) Sign(r *Request, secret string, _ time.Time, id string) error {
	h := r.Header
	signHub(r, secret)
	if id != "" {
		h.Set("X-GitHub-Delivery", id)
	}
	if h.Get("X-GitHub-Event") == "" {
		h.Set("X-GitHub-Event", "ping")
	}
	setDefault(h, "Content-Type", "application/json")
	return nil
}

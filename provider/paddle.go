package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// paddle verifies Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>], an
// HMAC-SHA256 of "<ts>:<raw body>" with the notification destination's
// secret. Several h1 appear during a secret rotation; any one may match.
// Paddle's SDKs allow 5 seconds of skew; the check here is both ways, and
// the source's tolerance can widen it.
//
// The key is the body's event_id. The trap: notification_id differs per
// destination and per replay, so it is not the event.
type paddle struct {
	macs      keyedHMACs
	tolerance time.Duration
}

func newPaddle(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	p := &paddle{macs: newKeyedHMACs(sha256.New, secretBytes(opts.Secrets)), tolerance: opts.Tolerance}
	if p.tolerance == 0 {
		p.tolerance = 5 * time.Second
	}
	return p, nil
}

func (*paddle) Name() string { return "paddle" }

// Live mode retries 60 times over 3 days.
func (*paddle) DefaultWindow() time.Duration { return 4 * 24 * time.Hour }

// DefaultOrder: the entity in data, versioned by occurred_at (RFC 3339).
func (*paddle) DefaultOrder() OrderDefault {
	return OrderDefault{Entity: "json:data.id", Version: "json:occurred_at"}
}

func (p *paddle) Verify(r *Request, now time.Time) error {
	var ts string
	sigs := p.macs.offered()
	for part := range strings.SplitSeq(r.Header.Get("Paddle-Signature"), ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "ts":
			ts = v
		case "h1":
			sigs.addHex(v)
		}
	}
	if err := sigs.lacking("Paddle-Signature", ts, "ts=", "h1=", "hex"); err != nil {
		return err
	}
	if !p.macs.matchAny(&sigs, r.Body, ts, ":") {
		return signatureError("no h1 signature matches")
	}
	return checkTimestamp(ts, now, p.tolerance)
}

func (*paddle) Items(r *Request) ([]Item, error) {
	v, err := bodyFields(r.Body, "event_id", "event_type")
	if err != nil {
		return nil, err
	}
	return one(v[0], v[1], r.Body), nil
}

func (*paddle) Sign(r *Request, secret string, now time.Time, _ string) error {
	ts := strconv.FormatInt(now.Unix(), 10)
	r.Header.Set("Paddle-Signature", "ts="+ts+";h1="+hex.EncodeToString(hmacWith(sha256.New, []byte(secret), []byte(ts+":"), r.Body)))
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}

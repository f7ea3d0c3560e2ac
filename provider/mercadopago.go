package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// mercadoPago verifies x-signature: ts=<ts>,v1=<hex>, an HMAC-SHA256 of the
// manifest "id:<data.id>;request-id:<x-request-id>;ts:<ts>;" with the
// application's secret signature. data.id comes from the URL query (not the
// body) and is lowercased when alphanumeric; a segment whose value is
// missing is left out.
//
// The body is not signed. So the body's data.id must equal the signed one
// (otherwise a captured signature could carry any body), and the key is
// type + data.id + action: the body's own id is not known to be stable
// across retries, and payment.created and payment.updated share data.id.
//
// Mercado Pago documents no tolerance for ts and may resend over 15 days,
// so ts is checked only when the source sets a tolerance.
type mercadoPago struct {
	macs      keyedHMACs
	tolerance time.Duration
}

func newMercadoPago(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &mercadoPago{macs: newKeyedHMACs(sha256.New, secretBytes(opts.Secrets)), tolerance: opts.Tolerance}, nil
}

func (*mercadoPago) Name() string { return "mercadopago" }

// ForwardHeaders: the request id, for matching Mercado Pago's support logs.
func (*mercadoPago) ForwardHeaders() []string { return []string{"X-Request-Id"} }

// Retries run 0, 15 min, 30 min, 6 h, 48 h, then 96 h three times: ~15 days.
func (*mercadoPago) DefaultWindow() time.Duration { return 16 * 24 * time.Hour }

func isAlnum(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return s != ""
}

// mpManifest is the signed string.
func mpManifest(dataID, requestID, ts string) string {
	if isAlnum(dataID) {
		dataID = strings.ToLower(dataID)
	}
	var b strings.Builder
	if dataID != "" {
		b.WriteString("id:" + dataID + ";")
	}
	if requestID != "" {
		b.WriteString("request-id:" + requestID + ";")
	}
	if ts != "" {
		b.WriteString("ts:" + ts + ";")
	}
	return b.String()
}

type mpBody struct {
	Type   string `json:"type"`
	Action string `json:"action"`
	Data   struct {
		ID keyText `json:"id"`
	} `json:"data"`
}

func (p *mercadoPago) Verify(r *Request, now time.Time) error {
	header := r.Header.Get("X-Signature") // x-signature; canonical, so Get need not allocate to canonicalise it
	var ts string
	sigs := p.macs.offered()
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "ts":
			ts = v
		case "v1":
			sigs.addHex(v)
		}
	}
	if ts == "" || sigs.decoded == 0 {
		return signatureError("x-signature is missing ts= or v1=")
	}
	dataID := r.URL.Query().Get("data.id")
	manifest := mpManifest(dataID, r.Header.Get("X-Request-Id"), ts)
	if !p.macs.matchAny(&sigs, nil, manifest) {
		return signatureError("x-signature does not match")
	}
	var body mpBody
	if err := decodeJSON(r.Body, &body); err == nil {
		if id := string(body.Data.ID); id != "" && !strings.EqualFold(id, dataID) {
			return signatureError("body data.id %q is not the signed data.id %q", id, dataID)
		}
	}
	if p.tolerance > 0 {
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return signatureError("ts %q is not a number", ts)
		}
		if n > 1e12 { // milliseconds, as current docs send
			n /= 1000
		}
		return checkTimestamp(strconv.FormatInt(n, 10), now, p.tolerance)
	}
	return nil
}

func (*mercadoPago) Items(r *Request) ([]Item, error) {
	var body mpBody
	if err := decodeJSON(r.Body, &body); err != nil {
		return nil, err
	}
	id := string(body.Data.ID)
	if id == "" {
		id = r.URL.Query().Get("data.id")
	}
	key := joinKey(body.Type, id)
	if key != "" && body.Action != "" {
		key = joinKey(body.Type, id, body.Action)
	}
	typ := body.Action // payment.updated; without one, the type alone (payment)
	if typ == "" {
		typ = body.Type
	}
	return one(key, typ, r.Body), nil
}

// Sign puts data.id and type in the query, as Mercado Pago's notification
// URL carries them, and signs the manifest with ts in milliseconds.
func (*mercadoPago) Sign(r *Request, secret string, now time.Time, id string) error {
	var body mpBody
	if err := decodeJSON(r.Body, &body); err != nil {
		return err
	}
	q := r.URL.Query()
	dataID := string(body.Data.ID)
	if dataID != "" {
		q.Set("data.id", dataID)
	}
	if body.Type != "" {
		q.Set("type", body.Type)
	}
	r.URL.RawQuery = q.Encode()
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	if id != "" {
		r.Header.Set("x-request-id", id)
	}
	sig := hmacWith(sha256.New, []byte(secret), []byte(mpManifest(dataID, id, ts)))
	r.Header.Set("x-signature", "ts="+ts+",v1="+hex.EncodeToString(sig))
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}

package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
// type + data.id + action + the body's id: payment.created and
// payment.updated share data.id, and so does every payment.updated of one
// payment (approved, then refunded, then charged back), which only the
// body's id, the notification's own, tells apart. Mercado Pago documents
// it as the event's unique identifier that prevents duplicates; that it
// is kept across retries is not documented, and were it not, a retry would
// be delivered once more, where without it a refund was answered
// "duplicate" and never delivered.
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

// DefaultOrder: the resource, by arrival: the notification has no version
// (fetch the payment for its state).
func (*mercadoPago) DefaultOrder() OrderDefault { return OrderDefault{Entity: "json:data.id"} }

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
	ID     keyText // the notification's own id
	Type   string
	Action string
	Data   struct{ ID keyText }
}

// readMPBody reads type, action and data.id with their names matched
// exactly, as the destination's parser will read them. encoding/json
// matches a struct's fields ignoring case, and the last of several wins:
// decoded that way, {"data":{"id":"999","ID":"123456"}} passed the check
// that the body's data.id is the signed 123456, and was delivered to a
// destination that reads data.id as 999. The body is unsigned, and only
// its data.id binds it to the signature: so ambiguous is set when data or
// its id is given more than once, or spelled in another case (which a Go
// destination would fold), and Verify refuses such a body.
func readMPBody(body []byte) (b mpBody, ambiguous bool, err error) {
	top, amb, err := exactMembers("body", body, "type", "action", "data", "id")
	if err != nil {
		return b, false, err
	}
	for i, f := range []*string{&b.Type, &b.Action} {
		if top[i] != nil {
			if err := json.Unmarshal(top[i], f); err != nil {
				return b, false, jsonError(`body field "`+[]string{"type", "action"}[i]+`"`, err)
			}
		}
	}
	b.ID.UnmarshalJSON(top[3])
	ambiguous = amb[2]
	if d := bytes.TrimSpace(top[2]); len(d) > 0 && string(d) != "null" {
		data, amb, err := exactMembers(`body field "data"`, d, "id")
		if err != nil {
			return b, false, err
		}
		ambiguous = ambiguous || amb[0]
		b.Data.ID.UnmarshalJSON(data[0])
	}
	return b, ambiguous, nil
}

// exactMembers returns the members named names of the JSON object obj
// (what names it in errors), nil for one that is absent, and whether each
// is ambiguous: given more than once, or also spelled in another case (as
// encoding/json folds names). obj must be one JSON value with nothing but
// white space around it. It walks obj with the scanner of jsonscan.go,
// and the values it returns are obj's own bytes: it allocates nothing
// beyond its answer, but to read a name written with escapes.
func exactMembers(what string, obj []byte, names ...string) (vals []json.RawMessage, ambiguous []bool, err error) {
	if !validJSON(obj) {
		var v json.RawMessage
		if err := decodeJSON(obj, &v); err != nil {
			return nil, nil, err
		}
		return nil, nil, malformed("%s is not JSON", what)
	}
	i := skipSpace(obj, 0)
	if obj[i] != '{' {
		return nil, nil, malformed("%s is JSON, but not an object", what)
	}
	vals, ambiguous = make([]json.RawMessage, len(names)), make([]bool, len(names))
	seen := make([]bool, len(names))
	if i = skipSpace(obj, i+1); obj[i] == '}' {
		return vals, ambiguous, nil
	}
	for {
		end := jsonString(obj, i)
		name := obj[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			json.Unmarshal(obj[i:end], &s)
			name = []byte(s)
		}
		i = skipSpace(obj, skipSpace(obj, end)+1) // past the ':'
		vend := jsonValue(obj, i, 1)
		for k, n := range names {
			if !bytes.EqualFold(name, []byte(n)) {
				continue
			}
			exact := string(name) == n
			ambiguous[k] = ambiguous[k] || seen[k] || !exact
			seen[k] = true
			if exact {
				vals[k] = obj[i:vend]
			}
		}
		if i = skipSpace(obj, vend); obj[i] == '}' {
			return vals, ambiguous, nil
		}
		i = skipSpace(obj, i+1) // past the ','
	}
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
	if err := sigs.lacking("x-signature", ts, "ts=", "v1=", "hex"); err != nil {
		return err
	}
	dataID := r.URL.Query().Get("data.id")
	manifest := mpManifest(dataID, r.Header.Get("X-Request-Id"), ts)
	if !p.macs.matchAny(&sigs, nil, manifest) {
		// Mercado Pago signs the data.id of the URL it calls, not the
		// body's: a URL that lost its query on the way (a proxy's rewrite,
		// a test sent by hand) fails every signature, and "does not match"
		// alone sent its user looking at the secret.
		if body, _, err := readMPBody(r.Body); err == nil && dataID == "" && body.Data.ID != "" {
			return signatureError("x-signature does not match: the URL has no ?data.id=, which Mercado Pago signs (the body's data.id is %q): was the query dropped on the way?", string(body.Data.ID))
		}
		return signatureError("x-signature does not match")
	}
	if body, ambiguous, err := readMPBody(r.Body); err == nil {
		if ambiguous {
			return signatureError("body gives data or data.id more than once, or in another case: a destination could read another id than the signed data.id %q", dataID)
		}
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
	body, _, err := readMPBody(r.Body)
	if err != nil {
		return nil, err
	}
	id := string(body.Data.ID)
	if id == "" {
		id = r.URL.Query().Get("data.id")
	}
	// Two, three or four parts, each escaped: a key of one shape never
	// meets a key of another. The body's id is a part only beside an
	// action, as Mercado Pago's webhooks always send both.
	key := joinKey(body.Type, id)
	switch {
	case key == "" || body.Action == "":
	case body.ID != "":
		key = joinKey(body.Type, id, body.Action, string(body.ID))
	default:
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
	body, _, err := readMPBody(r.Body)
	if err != nil {
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

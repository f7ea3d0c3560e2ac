package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// evolution is Evolution API (self-hosted WhatsApp over Baileys). It signs
// no body; a request is authentic when any of these carries a configured
// secret:
//   - Authorization: Bearer <JWT>, HS256-signed with the secret (Evolution's
//     jwt_key webhook header), unexpired;
//   - Authorization: Bearer <secret>, or the header named by signature.header
//     (default apikey) holding the secret (per-instance webhook headers);
//   - the path: POST /in/{source}/{secret}. The global webhook sends no
//     custom headers, so its secret has to travel in the URL.
//
// Keys: there is no delivery id and a retry resends the same body. The
// traps: messages.upsert is keyed on data.key.id, but messages.update
// carries data.keyId plus data.status (each status is its own event), and
// history-sync events carry arrays, split here one event per item.
type evolution struct {
	secrets [][]byte
	header  string
}

func newEvolution(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	header := opts.Generic.Header
	if header == "" {
		header = "apikey"
	}
	return &evolution{secrets: secretBytes(opts.Secrets), header: header}, nil
}

func (*evolution) Name() string { return "evolution" }

// AcceptsPathSecret: the global webhook sends no custom headers.
func (*evolution) AcceptsPathSecret() bool { return true }

// Evolution retries in memory for about 20 minutes (lost on its restart).
func (*evolution) DefaultWindow() time.Duration { return 24 * time.Hour }

// DefaultOrder: the message, by arrival.
func (*evolution) DefaultOrder() OrderDefault { return OrderDefault{Entity: "json:data.key.id"} }

func (p *evolution) Verify(r *Request, now time.Time) error {
	if tokenMatches(r.PathToken, p.secrets) || tokenMatches(r.Header.Get(p.header), p.secrets) {
		return nil
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || bearer == "" {
		return signatureError("no Evolution credential: want Authorization: Bearer, the %s header, or a secret in the path", p.header)
	}
	if tokenMatches(bearer, p.secrets) {
		return nil
	}
	var lastErr error
	for _, secret := range p.secrets {
		_, err := jwt.Parse(bearer, func(*jwt.Token) (any, error) { return secret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(), jwt.WithLeeway(30*time.Second), jwt.WithTimeFunc(func() time.Time { return now }))
		if err == nil {
			return nil
		}
		if errors.Is(err, jwt.ErrTokenExpired) || errors.Is(err, jwt.ErrTokenNotValidYet) || errors.Is(err, jwt.ErrTokenUsedBeforeIssued) {
			// jwt checks the claims only once the signature matched.
			return ageError("bearer token rejected: %v", err)
		}
		lastErr = err
	}
	return signatureError("bearer token rejected: %v", lastErr)
}

type evoEnvelope map[string]json.RawMessage

type evoItem struct {
	ID    keyText `json:"id"`
	KeyID keyText `json:"keyId"`
	Key   struct {
		ID        keyText `json:"id"`
		RemoteJid string  `json:"remoteJid"`
	} `json:"key"`
	Status keyText `json:"status"`
}

// evoKey is the event's key: event and instance, then the message id (and
// the status, for updates).
func evoKey(event, instance string, it evoItem) string {
	switch {
	case string(it.KeyID) != "":
		return joinKey(event, instance, string(it.KeyID), string(it.Status))
	case string(it.Key.ID) != "":
		if string(it.Status) != "" && event != "messages.upsert" {
			return joinKey(event, instance, string(it.Key.ID), string(it.Status))
		}
		return joinKey(event, instance, string(it.Key.ID))
	case string(it.ID) != "":
		return joinKey(event, instance, string(it.ID))
	}
	return ""
}

func (*evolution) Items(r *Request) ([]Item, error) {
	var env evoEnvelope
	if err := decodeJSON(r.Body, &env); err != nil {
		return nil, err
	}
	var ev, in keyText
	json.Unmarshal(env["event"], &ev)
	json.Unmarshal(env["instance"], &in)
	event, instance := string(ev), string(in)
	data := env["data"]
	trimmed := strings.TrimSpace(string(data))
	if !strings.HasPrefix(trimmed, "[") {
		var it evoItem
		if len(trimmed) > 0 && decodeJSON(data, &it) != nil {
			it = evoItem{} // data that is no object: keyless, not malformed
		}
		return one(evoKey(event, instance, it), event, r.Body), nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, jsonError("data (a list)", err)
	}
	items := make([]Item, 0, len(list))
	// Each item repeats the envelope's other fields: counted before it is
	// built, against r.MaxItemBytes (see WhatsApp's Items).
	shared := int64(16)
	for k, v := range env {
		if k != "data" {
			shared += int64(len(k)+len(v)) + 4
		}
	}
	var built int64
	for _, raw := range list {
		if built += shared + int64(len(raw)) + 8; r.MaxItemBytes > 0 && built > r.MaxItemBytes {
			return nil, fmt.Errorf("%w: the batch's events would hold over %d bytes (%d items so far)", ErrTooLarge, r.MaxItemBytes, len(items))
		}
		var it evoItem
		if decodeJSON(raw, &it) != nil {
			it = evoItem{}
		}
		one := make(evoEnvelope, len(env))
		for k, v := range env {
			one[k] = v
		}
		one["data"] = raw
		body, err := json.Marshal(one)
		if err != nil {
			return nil, jsonError("an item of data", err)
		}
		items = append(items, Item{Key: evoKey(event, instance, it), Body: body, Type: eventType(event)})
	}
	return items, nil
}

// Sign sends what Evolution sends for a jwt_key header: a fresh HS256 JWT.
func (*evolution) Sign(r *Request, secret string, now time.Time, _ string) error {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iat": now.Unix(), "exp": now.Add(600 * time.Second).Unix(), "app": "evolution", "action": "webhook",
	}).SignedString([]byte(secret))
	if err != nil {
		return errors.New("sign JWT: " + err.Error())
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}

// decodesWholeBody: Items decodes the body whole (see wholeBodyDecoder).
func (*evolution) decodesWholeBody() {}

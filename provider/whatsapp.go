package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// whatsapp is Meta's WhatsApp Cloud API.
//
// Verification: X-Hub-Signature-256 with the Meta app's secret (not a
// per-number secret), over the raw bytes: Meta escapes non-ASCII as \uXXXX
// in what it signs, so decoding and re-encoding the body breaks the
// signature. The GET handshake (hub.mode=subscribe, hub.verify_token,
// hub.challenge) is answered with the raw challenge when the verify token
// matches.
//
// Batches: one POST carries up to 1000 updates across entry[].changes[];
// each inbound message (value.messages[]) and each status
// (value.statuses[]) is an event of its own, delivered in the same envelope
// shape Meta uses, with just that one update and the contacts of its own
// sender (a message's from, a status's recipient_id, matched on wa_id), so
// a handler written for Meta's payload works unchanged and a batch's
// stored size stays near its own.
//
// Keys: a message's id (wamid...). The trap: a status's id is the outbound
// message's wamid and repeats for sent, delivered, read and failed, so a
// status is keyed on id + status; keying on id alone would drop the later
// transitions as duplicates.
type whatsapp struct {
	macs        keyedHMACs
	verifyToken string
}

func newWhatsApp(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &whatsapp{macs: hubMACs(opts), verifyToken: opts.VerifyToken}, nil
}

func (*whatsapp) Name() string { return "whatsapp" }

// Meta retries for up to 7 days (older docs: 36 hours).
func (*whatsapp) DefaultWindow() time.Duration { return 7 * 24 * time.Hour }

func (p *whatsapp) Verify(r *Request, _ time.Time) error { return verifyHubSignature(r, p.macs) }

func (p *whatsapp) Handshake(r *Request, _ time.Time) (*Reply, bool, error) {
	if r.Method != http.MethodGet {
		return nil, false, nil
	}
	q := r.URL.Query()
	if q.Get("hub.mode") != "subscribe" {
		return nil, true, errors.New("not a subscribe handshake")
	}
	if p.verifyToken == "" {
		return nil, true, errors.New("no verify_token is configured for this source")
	}
	if !tokenMatches(q.Get("hub.verify_token"), [][]byte{[]byte(p.verifyToken)}) {
		return nil, true, signatureError("hub.verify_token does not match")
	}
	return &Reply{Status: http.StatusOK, ContentType: "text/plain", Body: []byte(q.Get("hub.challenge"))}, true, nil
}

type waPayload struct {
	Object json.RawMessage `json:"object"`
	Entry  []struct {
		ID      json.RawMessage `json:"id"`
		Changes []struct {
			Field string                     `json:"field"`
			Value map[string]json.RawMessage `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

type waUpdate struct {
	ID          keyText `json:"id"`
	Status      keyText `json:"status"`
	From        keyText `json:"from"`         // a message's sender
	RecipientID keyText `json:"recipient_id"` // a status's customer
}

// waContactList is a change's value.contacts, each kept raw beside the
// WhatsApp id it describes.
type waContactList struct {
	raw  json.RawMessage
	byID map[string][]json.RawMessage
}

func waContacts(raw json.RawMessage) (waContactList, error) {
	l := waContactList{raw: raw}
	if len(raw) == 0 {
		return l, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return l, jsonError("value.contacts (a list of contacts)", err)
	}
	l.byID = map[string][]json.RawMessage{}
	for _, c := range list {
		var id struct {
			WaID keyText `json:"wa_id"`
		}
		json.Unmarshal(c, &id)
		l.byID[string(id.WaID)] = append(l.byID[string(id.WaID)], c)
	}
	return l, nil
}

// of is the contacts an item carries: those of its party, or the whole
// list for a change that is not split (whole is set).
func (l waContactList) of(party string, whole bool) json.RawMessage {
	if whole || l.byID == nil {
		return l.raw
	}
	mine := l.byID[party]
	if party == "" || len(mine) == 0 {
		return nil
	}
	out := []byte{'['}
	for i, c := range mine {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, c...)
	}
	return append(out, ']')
}

// size is how many bytes of's answer holds, without building it.
func (l waContactList) size(party string, whole bool) int64 {
	if whole || l.byID == nil {
		return int64(len(l.raw)) + 12
	}
	if party == "" {
		return 0
	}
	n := int64(14)
	for _, c := range l.byID[party] {
		n += int64(len(c)) + 1
	}
	return n
}

func (*whatsapp) Items(r *Request) ([]Item, error) {
	var p waPayload
	if err := json.Unmarshal(r.Body, &p); err != nil {
		return nil, jsonError("body (a WhatsApp webhook: {object, entry: [{changes: [...]}]})", err)
	}
	var items []Item
	// built is what the items' bodies add up to; each is counted before it
	// is built, against r.MaxItemBytes.
	var built int64
	within := func(size int64) error {
		built += size
		if r.MaxItemBytes > 0 && built > r.MaxItemBytes {
			return fmt.Errorf("%w: the batch's events would hold over %d bytes (%d items so far)", ErrTooLarge, r.MaxItemBytes, len(items))
		}
		return nil
	}
	for _, entry := range p.Entry {
		for _, change := range entry.Changes {
			contacts, err := waContacts(change.Value["contacts"])
			if err != nil {
				return nil, err
			}
			// shared is what every item of this change repeats: the
			// value's other fields and the envelope around them (an upper
			// bound: keys, quotes and separators included).
			shared := int64(len(p.Object)+len(entry.ID)+len(change.Field)) + 128
			for k, v := range change.Value {
				if k != "messages" && k != "statuses" && k != "contacts" {
					shared += int64(len(k)+len(v)) + 4
				}
			}
			// envelope rebuilds Meta's shape around one update, with the
			// contacts of that update's sender (or recipient) only: a
			// batch's contacts list every sender in it, and copying the
			// whole list into every item multiplied a batch's size by its
			// length (300 messages beside 600 KB of contacts stored 180 MB).
			envelope := func(listName string, update json.RawMessage, party string) ([]byte, error) {
				value := make(map[string]json.RawMessage, len(change.Value))
				for k, v := range change.Value {
					if k != "messages" && k != "statuses" && k != "contacts" {
						value[k] = v
					}
				}
				if listName != "" {
					value[listName] = json.RawMessage("[" + string(update) + "]")
				}
				if mine := contacts.of(party, listName == ""); mine != nil {
					value["contacts"] = mine
				}
				type ch struct {
					Field string                     `json:"field"`
					Value map[string]json.RawMessage `json:"value"`
				}
				type en struct {
					ID      json.RawMessage `json:"id,omitempty"`
					Changes []ch            `json:"changes"`
				}
				return json.Marshal(struct {
					Object json.RawMessage `json:"object,omitempty"`
					Entry  []en            `json:"entry"`
				}{p.Object, []en{{entry.ID, []ch{{change.Field, value}}}}})
			}
			found := false
			for _, list := range []string{"messages", "statuses"} {
				raw, ok := change.Value[list]
				if !ok {
					continue
				}
				var updates []json.RawMessage
				if err := json.Unmarshal(raw, &updates); err != nil {
					return nil, jsonError("value."+list+" (a list of updates)", err)
				}
				for _, u := range updates {
					var id waUpdate
					if err := json.Unmarshal(u, &id); err != nil {
						return nil, jsonError("an item of value."+list+" (an object with id)", err)
					}
					key, party := joinKey(string(id.ID)), string(id.From)
					if list == "statuses" {
						key, party = joinKey(string(id.ID), string(id.Status)), string(id.RecipientID)
					}
					if err := within(shared + int64(len(list)+len(u)) + contacts.size(party, false)); err != nil {
						return nil, err
					}
					body, err := envelope(list, u, party)
					if err != nil {
						return nil, jsonError("an update", err)
					}
					// messages.message, or messages.status.read: the change's
					// field, the update's kind, and a status's value.
					typ := eventType(change.Field, "message")
					if list == "statuses" {
						typ = eventType(change.Field, "status", string(id.Status))
					}
					items = append(items, Item{Key: key, Body: body, Type: typ})
					found = true
				}
			}
			if !found {
				// Another field (account_update, templates, ...): one event,
				// with no stable id Meta documents, so keyless.
				if err := within(shared + contacts.size("", true)); err != nil {
					return nil, err
				}
				body, err := envelope("", nil, "")
				if err != nil {
					return nil, jsonError("a change", err)
				}
				items = append(items, Item{Body: body, Type: eventType(change.Field)})
			}
		}
	}
	return items, nil
}

func (*whatsapp) Sign(r *Request, secret string, _ time.Time, _ string) error {
	signHub(r, secret)
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}

// decodesWholeBody: Items decodes the body whole (see wholeBodyDecoder).
func (*whatsapp) decodesWholeBody() {}

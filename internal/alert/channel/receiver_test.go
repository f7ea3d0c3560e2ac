package channel_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// receiver is an HTTP server that answers each POST as the service its
// path names would, after checking the body against the shape that
// service documents: /slack (an incoming webhook: 400 no_text without
// text, 400 invalid_blocks for a block it would refuse), /teams (a
// Workflows webhook: a message with an Adaptive Card attachment),
// /webhookb2/x/IncomingWebhook/y (a legacy connector: a MessageCard),
// /discord (execute webhook: 400 code 50035 over a limit), /json
// (anything that is JSON). It keeps each body it accepted.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	accepted map[string][]map[string]any
	headers  map[string][]http.Header
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{accepted: map[string][]map[string]any{}, headers: map[string][]http.Header{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) bodies(path string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.accepted[path]...)
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	if req.Method != http.MethodPost || !strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
		http.Error(w, "want a JSON POST", http.StatusBadRequest)
		return
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	path := req.URL.Path
	var status int
	var problem string
	switch {
	case path == "/slack":
		status, problem = slackAnswer(body)
	case path == "/teams":
		status, problem = http.StatusAccepted, adaptiveProblem(body)
	case strings.Contains(path, "/IncomingWebhook/"):
		path = "/connector"
		status, problem = http.StatusOK, messageCardProblem(body)
	case path == "/discord":
		status, problem = http.StatusNoContent, discordProblem(body)
		if problem != "" {
			status, problem = http.StatusBadRequest, fmt.Sprintf(`{"code": 50035, "message": "Invalid Form Body", "errors": %q}`, problem)
		}
	case path == "/json":
		status = http.StatusOK
	default:
		status, problem = http.StatusNotFound, "no such hook"
	}
	if problem != "" && status < 300 {
		status = http.StatusBadRequest
	}
	if status >= 300 {
		http.Error(w, problem, status)
		return
	}
	r.mu.Lock()
	r.accepted[path] = append(r.accepted[path], body)
	r.headers[path] = append(r.headers[path], req.Header.Clone())
	r.mu.Unlock()
	w.WriteHeader(status)
	if path == "/slack" {
		io.WriteString(w, "ok")
	}
}

func str(v any) (string, bool) { s, ok := v.(string); return s, ok }
func list(v any) []any         { l, _ := v.([]any); return l }
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func runes(s string) int       { return utf8.RuneCountInString(s) }

// slackAnswer is an incoming webhook's answer: text is required (400
// no_text), and the blocks must be ones a message takes, in their limits
// (400 invalid_blocks).
func slackAnswer(body map[string]any) (int, string) {
	if t, ok := str(body["text"]); !ok || strings.TrimSpace(t) == "" {
		return http.StatusBadRequest, "no_text"
	}
	blocks := list(body["blocks"])
	if len(blocks) > 50 {
		return http.StatusBadRequest, "invalid_blocks"
	}
	textObj := func(v any, types string, max int) bool {
		o := obj(v)
		t, _ := str(o["type"])
		s, ok := str(o["text"])
		return o != nil && strings.Contains(types, t) && t != "" && ok && s != "" && runes(s) <= max
	}
	for _, v := range blocks {
		b := obj(v)
		ok := true
		switch b["type"] {
		case "header":
			ok = textObj(b["text"], "plain_text", 150)
		case "section":
			fields := list(b["fields"])
			ok = (b["text"] != nil || len(fields) > 0) && len(fields) <= 10
			if b["text"] != nil {
				ok = ok && textObj(b["text"], "plain_text mrkdwn", 3000)
			}
			for _, f := range fields {
				ok = ok && textObj(f, "plain_text mrkdwn", 2000)
			}
		case "context":
			ok = len(list(b["elements"])) > 0 && len(list(b["elements"])) <= 10
		case "actions":
			els := list(b["elements"])
			ok = len(els) > 0 && len(els) <= 25
			for _, e := range els {
				u, _ := str(obj(e)["url"])
				ok = ok && obj(e)["type"] == "button" && textObj(obj(e)["text"], "plain_text", 75) && strings.HasPrefix(u, "http") && len(u) <= 3000
			}
		case "divider":
		default:
			ok = false
		}
		if !ok {
			return http.StatusBadRequest, "invalid_blocks"
		}
	}
	return http.StatusOK, ""
}

// adaptiveProblem says what a Workflows webhook would not post: the
// body must be a message with an Adaptive Card attachment.
func adaptiveProblem(body map[string]any) string {
	if body["type"] != "message" {
		return `type: want "message"`
	}
	att := list(body["attachments"])
	if len(att) == 0 {
		return "attachments: want an Adaptive Card"
	}
	a := obj(att[0])
	if a["contentType"] != "application/vnd.microsoft.card.adaptive" {
		return "attachments[0].contentType"
	}
	card := obj(a["content"])
	if card["type"] != "AdaptiveCard" {
		return "content.type: want AdaptiveCard"
	}
	if v, _ := str(card["version"]); v == "" {
		return "content.version: required"
	}
	items := list(card["body"])
	if len(items) == 0 {
		return "content.body: empty card"
	}
	for _, it := range items {
		e := obj(it)
		switch e["type"] {
		case "TextBlock":
			if t, _ := str(e["text"]); t == "" {
				return "TextBlock.text: required"
			}
		case "FactSet":
			for _, f := range list(e["facts"]) {
				if _, ok := str(obj(f)["title"]); !ok {
					return "Fact.title: required"
				}
				if _, ok := str(obj(f)["value"]); !ok {
					return "Fact.value: required"
				}
			}
		default:
			return fmt.Sprintf("unknown element %v", e["type"])
		}
	}
	for _, act := range list(card["actions"]) {
		a := obj(act)
		if u, _ := str(a["url"]); a["type"] != "Action.OpenUrl" || u == "" {
			return "actions: want Action.OpenUrl with a url"
		}
	}
	return ""
}

// messageCardProblem says what a legacy connector would refuse: a
// MessageCard needs summary or text ("Summary or Text is required").
func messageCardProblem(body map[string]any) string {
	if body["@type"] != "MessageCard" || body["@context"] == nil {
		return "want @type MessageCard with @context"
	}
	s, _ := str(body["summary"])
	t, _ := str(body["text"])
	if s == "" && t == "" {
		return "Summary or Text is required."
	}
	for _, sec := range list(body["sections"]) {
		for _, f := range list(obj(sec)["facts"]) {
			if _, ok := str(obj(f)["name"]); !ok {
				return "fact.name"
			}
		}
	}
	return ""
}

// discordProblem is what Discord refuses (400, code 50035): no content
// and no embed, or a text over its limits.
func discordProblem(body map[string]any) string {
	c, _ := str(body["content"])
	embeds := list(body["embeds"])
	if c == "" && len(embeds) == 0 {
		return "Cannot send an empty message"
	}
	if runes(c) > 2000 {
		return "content: Must be 2000 or fewer in length."
	}
	if len(embeds) > 10 {
		return "embeds: Must be 10 or fewer in length."
	}
	total := 0
	for _, v := range embeds {
		e := obj(v)
		title, _ := str(e["title"])
		desc, _ := str(e["description"])
		footer, _ := str(obj(e["footer"])["text"])
		switch {
		case runes(title) > 256:
			return "embeds.0.title: Must be 256 or fewer in length."
		case runes(desc) > 4096:
			return "embeds.0.description: Must be 4096 or fewer in length."
		case runes(footer) > 2048:
			return "embeds.0.footer.text: Must be 2048 or fewer in length."
		case len(list(e["fields"])) > 25:
			return "embeds.0.fields: Must be 25 or fewer in length."
		}
		total += runes(title) + runes(desc) + runes(footer)
		for _, f := range list(e["fields"]) {
			n, _ := str(obj(f)["name"])
			v, _ := str(obj(f)["value"])
			if n == "" || v == "" || runes(n) > 256 || runes(v) > 1024 {
				return "embeds.0.fields: BASE_TYPE_REQUIRED or BASE_TYPE_MAX_LENGTH"
			}
			total += runes(n) + runes(v)
		}
	}
	if total > 6000 {
		return "embeds: Embed size exceeds maximum size of 6000"
	}
	return ""
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

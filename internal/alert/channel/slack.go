package channel

import (
	"context"
	"strings"

	"github.com/oncehook/oncehook/config"
)

// slackKind posts to a Slack incoming webhook: text (which Slack
// requires: a body without it is answered 400 no_text, and it is what a
// phone's notification shows) and Block Kit blocks for the message
// itself.
var slackKind = kind{
	check: requireURL,
	build: func(c config.AlertChannel, d Deps) Channel {
		return slackChannel{poster{name: c.Name, url: c.URL, headers: c.Headers, client: d.Client}}
	},
}

type slackChannel struct{ p poster }

// Block Kit's limits, in characters.
const (
	slackHeader  = 150  // a header block's plain_text
	slackSection = 3000 // a section's text
	slackField   = 2000 // each of a section's fields
	slackFields  = 10   // fields per section
	slackText    = 4000 // the top-level text (Slack cuts a longer one)
	slackButton  = 75   // a button's label
)

type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks,omitempty"`
}

type slackBlock struct {
	Type     string         `json:"type"`
	Text     *slackTextObj  `json:"text,omitempty"`
	Fields   []slackTextObj `json:"fields,omitempty"`
	Elements []any          `json:"elements,omitempty"`
}

// slackTextObj is a Block Kit text object.
type slackTextObj struct {
	Type  string `json:"type"` // plain_text or mrkdwn
	Text  string `json:"text"`
	Emoji bool   `json:"emoji,omitempty"`
}

type slackButtonObj struct {
	Type string       `json:"type"` // button
	Text slackTextObj `json:"text"`
	URL  string       `json:"url"`
}

func (c slackChannel) Name() string { return c.p.name }

func (c slackChannel) Send(ctx context.Context, n Notice) error {
	return c.p.post(ctx, n.Key, slackBody(summarize(n)))
}

func slackBody(s summary) slackMessage {
	m := slackMessage{Text: truncate(slackEscape(s.Title+": "+s.Message), slackText)}
	m.Blocks = append(m.Blocks,
		slackBlock{Type: "header", Text: &slackTextObj{Type: "plain_text", Text: truncate(s.Title, slackHeader), Emoji: true}},
		slackBlock{Type: "section", Text: &slackTextObj{Type: "mrkdwn", Text: truncate(slackEscape(s.Message), slackSection)}})
	var fields []slackTextObj
	for _, f := range s.Facts {
		if len(fields) == slackFields {
			break
		}
		fields = append(fields, slackTextObj{Type: "mrkdwn", Text: truncate("*"+slackEscape(f.Name)+"*\n"+slackEscape(f.Value), slackField)})
	}
	if len(fields) > 0 {
		m.Blocks = append(m.Blocks, slackBlock{Type: "section", Fields: fields})
	}
	if s.Link != "" {
		m.Blocks = append(m.Blocks, slackBlock{Type: "actions", Elements: []any{
			slackButtonObj{Type: "button", Text: slackTextObj{Type: "plain_text", Text: truncate("Open in the dashboard", slackButton)}, URL: s.Link},
		}})
	}
	return m
}

// slackEscape escapes the three characters Slack's mrkdwn reads as
// control (a name with < or & would otherwise be taken for a link or an
// entity).
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

package channel

import (
	"context"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/config"
)

// teamsKind posts to Microsoft Teams: to a Workflows webhook (the
// "Post to a channel when a webhook request is received" flow) an
// Adaptive Card as a message's attachment, and to a legacy Office 365
// connector's URL (its path has /IncomingWebhook/) a MessageCard, the one
// shape the connectors take.
var teamsKind = kind{
	check: requireURL,
	build: func(c config.AlertChannel, d Deps) Channel {
		return teamsChannel{p: poster{name: c.Name, url: c.URL, headers: c.Headers, client: d.Client},
			connector: strings.Contains(c.URL, "/IncomingWebhook/") || strings.Contains(c.URL, "/webhookb2/")}
	},
}

type teamsChannel struct {
	p         poster
	connector bool // a legacy connector's URL: MessageCard
}

func (c teamsChannel) Name() string { return c.p.name }

func (c teamsChannel) Send(ctx context.Context, n Notice) error {
	s := summarize(n)
	if c.connector {
		return c.p.post(ctx, n.Key, messageCard(s))
	}
	return c.p.post(ctx, n.Key, adaptiveMessage(s))
}

// adaptiveMessage is a Workflows webhook's body: a message whose one
// attachment is the Adaptive Card (version 1.2, which Teams renders on
// its phone apps as well).
func adaptiveMessage(s summary) map[string]any {
	color := "attention"
	switch s.Color {
	case 0x2EB67D:
		color = "good"
	case 0xECB22E:
		color = "warning"
	}
	facts := make([]map[string]string, len(s.Facts))
	for i, f := range s.Facts {
		facts[i] = map[string]string{"title": f.Name, "value": f.Value}
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"type":    "AdaptiveCard",
		"version": "1.2",
		"body": []any{
			map[string]any{"type": "TextBlock", "text": s.Title, "weight": "Bolder", "size": "Medium", "color": color, "wrap": true},
			map[string]any{"type": "TextBlock", "text": s.Message, "wrap": true},
			map[string]any{"type": "FactSet", "facts": facts},
		},
		"msteams": map[string]any{"width": "Full"},
	}
	if s.Link != "" {
		card["actions"] = []any{map[string]any{"type": "Action.OpenUrl", "title": "Open in the dashboard", "url": s.Link}}
	}
	return map[string]any{
		"type": "message",
		"attachments": []any{map[string]any{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"contentUrl":  nil,
			"content":     card,
		}},
	}
}

// messageCard is a legacy connector's body (summary or text is
// required by it; both are set).
func messageCard(s summary) map[string]any {
	facts := make([]map[string]string, len(s.Facts))
	for i, f := range s.Facts {
		facts[i] = map[string]string{"name": f.Name, "value": f.Value}
	}
	card := map[string]any{
		"@type":      "MessageCard",
		"@context":   "https://schema.org/extensions",
		"summary":    s.Title,
		"themeColor": fmt.Sprintf("%06X", s.Color),
		"title":      s.Title,
		"text":       s.Message,
		"sections":   []any{map[string]any{"facts": facts}},
	}
	if s.Link != "" {
		card["potentialAction"] = []any{map[string]any{"@type": "OpenUri", "name": "Open in the dashboard",
			"targets": []any{map[string]string{"os": "default", "uri": s.Link}}}}
	}
	return card
}

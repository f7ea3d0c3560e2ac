package channel

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/config"
)

// discordKind executes a Discord webhook: content (what a phone's
// notification shows) and one embed with the message, the figures as
// fields and the dashboard's link. Discord refuses a message over its
// limits (400, code 50035); every text is cut to its limit instead.
var discordKind = kind{
	check: requireURL,
	build: func(c config.AlertChannel, d Deps) Channel {
		return discordChannel{poster{name: c.Name, url: c.URL, headers: c.Headers, client: d.Client}}
	},
}

type discordChannel struct{ p poster }

// Discord's limits, in characters.
const (
	discordContent     = 2000
	discordTitle       = 256
	discordDescription = 4096
	discordFields      = 25
	discordFieldName   = 256
	discordFieldValue  = 1024
	discordFooterText  = 2048
	discordEmbedTotal  = 6000 // title, description, fields, footer and author of all embeds
)

type discordMessage struct {
	Content string         `json:"content"`
	Embeds  []discordEmbed `json:"embeds,omitempty"`
	// AllowedMentions is empty: a name or message with @everyone pings
	// nobody.
	AllowedMentions struct {
		Parse []string `json:"parse"`
	} `json:"allowed_mentions"`
}

type discordEmbed struct {
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	URL         string         `json:"url,omitempty"`
	Color       int            `json:"color"`
	Fields      []discordField `json:"fields,omitempty"`
	Timestamp   string         `json:"timestamp,omitempty"`
	Footer      *discordFooter `json:"footer,omitempty"`
}

type discordField struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Inline bool   `json:"inline"`
}

type discordFooter struct {
	Text string `json:"text"`
}

func (c discordChannel) Name() string { return c.p.name }

func (c discordChannel) Send(ctx context.Context, n Notice) error {
	m := discordBody(summarize(n))
	if !n.At.IsZero() {
		m.Embeds[0].Timestamp = n.At.UTC().Format(time.RFC3339)
	}
	return c.p.post(ctx, n.Key, m)
}

func discordBody(s summary) discordMessage {
	m := discordMessage{Content: truncate(s.Title, discordContent)}
	m.AllowedMentions.Parse = []string{}
	e := discordEmbed{Title: truncate(s.Title, discordTitle), URL: s.Link, Color: s.Color,
		Footer: &discordFooter{Text: truncate("oncehook", discordFooterText)}}
	budget := discordEmbedTotal - utf8.RuneCountInString(e.Title) - utf8.RuneCountInString(e.Footer.Text)
	for _, f := range s.Facts {
		if len(e.Fields) == discordFields {
			break
		}
		fd := discordField{Name: truncate(f.Name, discordFieldName), Value: truncate(f.Value, discordFieldValue), Inline: true}
		cost := utf8.RuneCountInString(fd.Name) + utf8.RuneCountInString(fd.Value)
		if cost > budget-1 { // keep one character for the description
			break
		}
		budget -= cost
		e.Fields = append(e.Fields, fd)
	}
	// The message is the description, cut last to what the title, the
	// fields and the footer leave of the embed's total.
	e.Description = truncate(s.Message, min(discordDescription, budget))
	m.Embeds = []discordEmbed{e}
	return m
}

package channel

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// summary is a notice as people read it, on a phone first: a title that
// says what happened and where, the one-line message, the figures as
// name/value facts, and the dashboard's link. Each kind lays it out in
// the shape its service documents.
type summary struct {
	Title   string // "Opened: dead letters at destination billing"
	Message string
	Facts   []fact
	Link    string
	// Color is the event's colour, as 0xRRGGBB: red opened, amber
	// reminder, green resolved.
	Color int
}

type fact struct{ Name, Value string }

// summarize lays n out for people.
func summarize(n Notice) summary {
	s := summary{Message: n.Message, Link: n.Link}
	what := strings.ReplaceAll(n.Kind, "_", " ")
	where := strings.TrimSpace(n.Scope + " " + n.Name)
	switch n.Event {
	case EventResolved:
		s.Title, s.Color = "Resolved: "+what+" at "+where, 0x2EB67D
	case EventReminder:
		s.Title, s.Color = "Still open: "+what+" at "+where, 0xECB22E
	default:
		s.Title, s.Color = "Opened: "+what+" at "+where, 0xE01E5A
	}
	if s.Message == "" {
		s.Message = s.Title
	}
	add := func(name, value string) { s.Facts = append(s.Facts, fact{name, value}) }
	if n.Tenant != "" {
		add("Tenant", n.Tenant)
	}
	if n.Event != EventResolved || n.Value != 0 {
		add("Value", figure(n.Kind, n.Value))
		add("Threshold", figure(n.Kind, n.Threshold))
	}
	if n.Baseline != nil {
		add("Baseline", figure(n.Kind, *n.Baseline))
	}
	if n.Volume > 0 {
		add("Events this hour", strconv.FormatInt(n.Volume, 10))
	}
	if !n.Opened.IsZero() {
		add("Opened", n.Opened.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if n.Event == EventResolved && !n.At.IsZero() {
		add("Resolved", n.At.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if n.By != "" {
		add("Resolved by", n.By)
	}
	if n.IssueID != "" {
		add("Issue", n.IssueID)
	}
	return s
}

// figure writes v in the unit of kind's figures: a rate as a percentage,
// an age as a duration, a count as a number.
func figure(kind string, v float64) string {
	switch kind {
	case "duplicate_rate":
		return strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
	case "oldest_pending":
		return (time.Duration(v * float64(time.Second))).Round(time.Second).String()
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// truncate cuts s to at most max characters (runes), ending it with an
// ellipsis when cut: the services count characters, and refuse a message
// over their limits where a cut one would have been read.
func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	if max < 1 {
		return ""
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// text is the summary as plain lines (email's body, and the fallback
// text of the chat kinds).
func (s summary) text() string {
	var b strings.Builder
	b.WriteString(s.Message)
	b.WriteString("\n\n")
	for _, f := range s.Facts {
		fmt.Fprintf(&b, "%s: %s\n", f.Name, f.Value)
	}
	if s.Link != "" {
		fmt.Fprintf(&b, "\n%s\n", s.Link)
	}
	return b.String()
}

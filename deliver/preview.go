package deliver

import (
	"context"
	"net/http"
	"net/url"

	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/internal/transform"
	"github.com/oncehook/oncehook/store"
)

// Preview is what an attempt of a delivery would send after its
// destination's transformation, for an operator to read (`oncehook
// transform test`, the dashboard's event page). Nothing is sent.
type Preview struct {
	// Message is the attempt's message as the transformation left it.
	Message *Message
	Output  *transform.Output
	// URL is where it would go, credentials hidden ("" for a destination
	// without a URL: a queue's); Header, its headers, credentials hidden;
	// Body, its body with the values of the script's env hidden (as they
	// are in URL and Header): what is shown is never the secret a script
	// put in what it sends, though the digest is of what it sends.
	URL    string
	Header http.Header
	Body   []byte
}

// PreviewTransform builds d's message for dest as the worker does and runs
// dest's transformation on it. The error is the script's (*transform.Error)
// or the sandbox's.
func PreviewTransform(ctx context.Context, dest *Destination, d store.LeasedDelivery) (*Preview, error) {
	m := NewMessage(dest, d)
	out, err := Transform(ctx, dest, m)
	if err != nil {
		return nil, err
	}
	p := &Preview{Message: m, Output: out, Header: redact.Header(m.Header), Body: m.Body}
	if dest.URL != "" {
		if u, err := url.Parse(dest.URL); err == nil {
			p.URL = dest.Transform.Hide(redact.URL(TargetURL(u, m).String()))
		}
	}
	for k, vs := range p.Header {
		hidden := make([]string, len(vs))
		for i, v := range vs {
			hidden[i] = dest.Transform.Hide(v)
		}
		p.Header[k] = hidden
	}
	if b := dest.Transform.Hide(string(m.Body)); b != string(m.Body) {
		p.Body = []byte(b)
	}
	return p, nil
}

package oncehook

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/receive"
)

// The README's NATS examples, parsed as written, key a message by what
// their text says it is keyed by: the body's order_id, with or without a
// Nats-Msg-Id header. (They once listed ["header:Nats-Msg-Id",
// "json:order_id"] as "the first that is present": several rules are one
// composite key, so every message published without a Nats-Msg-Id was
// rejected as missing_key and terminated.)
func TestREADMENatsExamplesKeyEveryMessageByItsOrderID(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	text = text[strings.Index(text, "\n## Queues"):]
	text = text[:strings.Index(text, "\n### Kafka")]
	var blocks []string
	for _, part := range strings.Split(text, "```yaml\n")[1:] {
		block := part[:strings.Index(part, "```")]
		if strings.Contains(block, "nats:") && strings.Contains(block, "consume:") {
			blocks = append(blocks, block)
		}
	}
	if len(blocks) != 2 {
		t.Fatalf("found %d NATS consume examples in the README's Queues, want 2", len(blocks))
	}
	for i, block := range blocks {
		cfg, err := config.Parse([]byte("store: sqlite://./x.db\n"+block), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("example %d: %v", i, err)
		}
		p, err := compile(cfg, testKinds())
		if err != nil {
			t.Fatal(err)
		}
		h := receive.New(receive.Options{Sources: p.sources, MaxBodySize: 1 << 20})
		body := []byte(`{"order_id":"ord_1","event":"order.created"}`)
		for _, header := range []http.Header{{}, {"Nats-Msg-Id": {"ord_1"}}} {
			events, err := h.Events(context.Background(), "orders", receive.Envelope{Header: header, Body: body})
			if err != nil {
				t.Fatalf("example %d, header %v: %v", i, header, err)
			}
			if len(events) != 1 || events[0].Key != "ord_1" {
				t.Fatalf("example %d, header %v: events %+v, want one keyed ord_1", i, header, events)
			}
		}
	}
}

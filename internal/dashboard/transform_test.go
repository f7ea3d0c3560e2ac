package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// An event page shows a delivery its transformation skipped as skipped, a
// transformed attempt with the digest of what it sent, and, per
// destination, the transformed request next to the original (as the next
// attempt would send it, the same digest).
func TestEventPageShowsSkippedAndTransformedAttempts(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(sink.Close)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens: [{name: ops, token: `+token+`}]
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app]}
destinations:
  - name: app
    url: `+sink.URL+`
    transform:
      inline: 'addHandler("transform", (r) => r.body.type === "charge.refunded" ? null : { ...r, body: { id: r.body.id } })'
`)
	ids := map[string]int64{}
	for _, typ := range []string{"charge.refunded", "charge.succeeded"} {
		body := fmt.Sprintf(`{"id":"evt_%s","type":%q}`, typ, typ)
		resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", secret, []byte(body), ""))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		page, err := gw.Admin().Events(t.Context(), admin.EventFilter{Source: "stripe"})
		if err != nil {
			return false
		}
		for _, e := range page.Events {
			if e.State != "pending" {
				ids[e.Key] = e.ID
			}
		}
		return len(ids) == 2
	}) {
		t.Fatalf("events not done: %v", ids)
	}
	c, _ := login(t, gw, token)
	_, skipped := get(t, c, fmt.Sprintf("%s/ui/events/%d", gw.APIURL, ids["evt_charge.refunded"]))
	if !strings.Contains(skipped, `class="state skipped"`) || !strings.Contains(skipped, "skipped by the transformation") {
		t.Errorf("the skipped event's page shows no skipped delivery:\n%s", skipped)
	}
	if strings.Contains(skipped, `class="muted small digest"`) {
		t.Errorf("the skipped attempt shows a digest of what it sent, and it sent nothing:\n%s", skipped)
	}
	_, sent := get(t, c, fmt.Sprintf("%s/ui/events/%d", gw.APIURL, ids["evt_charge.succeeded"]))
	if !strings.Contains(sent, "transformed, sent <code>sha256:") {
		t.Errorf("the transformed event's page shows no sent digest:\n%s", sent)
	}
	if !strings.Contains(sent, "Transformed request") || !strings.Contains(sent, "POST "+sink.URL) ||
		!strings.Contains(sent, "{\n  &#34;id&#34;: &#34;evt_charge.succeeded&#34;\n}") {
		t.Errorf("the transformed event's page shows no transformed request:\n%s", sent)
	}
	// The preview's digest is the one its attempt recorded: the same bytes.
	digests := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindAllString(sent, -1)
	if len(digests) < 2 || digests[0] != digests[len(digests)-1] {
		t.Errorf("digests on the page %v: want the preview's and the attempt's the same", digests)
	}
	if !strings.Contains(skipped, "Skipped by the transformation: this destination would not get the event.") {
		t.Errorf("the skipped event's page does not say the transformation skips it:\n%s", skipped)
	}
}

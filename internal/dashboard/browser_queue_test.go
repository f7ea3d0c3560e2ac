package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// Issue 27: a queue source's card says what it consumes and whether its
// broker is reachable, and a queue destination's attempts read like an
// HTTP one's, in both languages. A Kafka topic (franz-go's in-process
// cluster) feeds a source; a Kafka topic is the destination of it and of a
// Stripe webhook source. Then the cluster is cut: the card says the broker
// is unreachable (HTTP intake still answers), and a webhook's publish is a
// failed attempt, held for a retry.
func TestQueueSourceAndDestinationInABrowser(t *testing.T) {
	exe := chromium(t)
	kc := testenv.NewKafka(t, 1, "clicks", "events")
	brokers := strings.Join(kc.Addrs, ", ")
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens: [{name: ops, token: `+token+`}]
sources:
  - name: clicks
    consume: {kafka: {brokers: [`+brokers+`], topic: clicks, group: oncehook}}
    key: json:click_id
    type: json:kind
    destinations: [log]
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [log]}
destinations:
  - name: log
    publish: {kafka: {brokers: [`+brokers+`], topic: events}}
    timeout: 2s
    retry: {base_delay: 1m, max_delay: 1m}
    breaker: {off: true}
`)
	produced := time.Now()
	for _, id := range []string{"c-1", "c-2", "c-3", "c-2"} { // the last a re-published copy
		kc.Produce(t, &kgo.Record{Topic: "clicks", Value: fmt.Appendf(nil, `{"click_id":%q,"kind":"click.made"}`, id)})
	}
	ctx := context.Background()
	if !testenv.WaitFor(20*time.Second, func() bool { s, _ := gw.Store().Stats(ctx); return s.Delivered == 3 }) {
		s, _ := gw.Store().Stats(ctx)
		t.Fatalf("stats %+v: want 3 clicks published to the events topic", s)
	}

	browser, _ := newBrowser(t, exe)
	step, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()
	ui := gw.APIURL + "/ui/"
	card := `section[data-source="clicks"] [data-test="broker"]`
	if err := chromedp.Do(step, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(card))); err != nil {
		t.Fatal(err)
	}
	text, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(card)))
	if !strings.Contains(text, "Kafka") || !strings.Contains(text, "topic clicks") || !strings.Contains(text, "connected") {
		t.Fatalf("the queue source's card says %q: want Kafka, its topic, connected", text)
	}
	// The hour's counts ride the writer's commits about once a second.
	var dup string
	if !testenv.WaitFor(10*time.Second, func() bool {
		chromedp.Do(step, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.CSS(card)))
		dup, _ = chromedp.Run(step, chromedp.Text(chromedp.CSS(`[data-live="clicks.duplicate"]`)))
		// An hour that turned since the copy arrived counts anew from 0
		// (CI failed so at 21:00).
		return dup == "1" || time.Now().Truncate(time.Hour) != produced.Truncate(time.Hour)
	}) {
		t.Fatalf("the card counts %q duplicates this hour, want the 1 re-published copy", dup)
	}
	shots := screenshotDir(t)
	saveShot(t, step, shots, "queue-source.png")

	// The broker goes away: the card says so; intake over HTTP still works,
	// and a webhook's publish fails and waits for its retry.
	kc.Cut()
	if !testenv.WaitFor(30*time.Second, func() bool { st := gw.ConsumerStatus(); return len(st) == 1 && !st[0].Connected }) {
		t.Fatalf("the consumer still says %+v with its cluster cut", gw.ConsumerStatus())
	}
	// Readiness is the store's: the broker is its detail. The doctor finds it.
	resp, err := http.Get(gw.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Status    string `json:"status"`
		Consumers []struct {
			Source    string `json:"source"`
			Connected bool   `json:"connected"`
		} `json:"consumers"`
	}
	json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(ready.Consumers) != 1 || ready.Consumers[0].Source != "clicks" || ready.Consumers[0].Connected {
		t.Fatalf("/readyz %d %+v: want ready, with the clicks consumer not connected", resp.StatusCode, ready)
	}
	rep, err := gw.Admin().Doctor(ctx, "clicks")
	if err != nil || len(rep.Sources) != 1 || len(rep.Sources[0].Findings) != 1 || rep.Sources[0].Findings[0].Kind != admin.FindingBrokerUnreachable {
		t.Fatalf("doctor: %+v %v: want broker_unreachable", rep, err)
	}
	post(t, gw.URL+"/in/stripe", `{"id":"evt_while_cut","object":"event","type":"invoice.paid"}`)
	// Its attempt is the fourth on record (the three clicks' first).
	if !testenv.WaitFor(20*time.Second, func() bool { s, _ := gw.Store().Stats(ctx); return s.Attempts == 4 }) {
		s, _ := gw.Store().Stats(ctx)
		t.Fatalf("stats %+v: the webhook's publish was never attempted with the cluster cut", s)
	}
	page, err := gw.Admin().Events(ctx, admin.EventFilter{Source: "stripe"})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("the webhook's event: %+v %v", page, err)
	}
	id := page.Events[0].ID
	if err := chromedp.Do(step, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.CSS(card+`[data-connected="false"]`))); err != nil {
		t.Fatalf("the card never said the broker was unreachable: %v", err)
	}
	text, _ = chromedp.Run(step, chromedp.Text(chromedp.CSS(card)))
	if !strings.Contains(text, "broker unreachable") || !strings.Contains(text, "HTTP intake is unaffected") {
		t.Fatalf("the card says %q with the broker gone", text)
	}
	saveShot(t, step, shots, "queue-source-unreachable.png")
	for _, lang := range []struct{ code, unreachable, retry string }{{"en", "broker unreachable", "retry"}, {"pt-BR", "broker inacessível", "nova tentativa"}} {
		if err := chromedp.Do(step, chromedp.Navigate(ui+"?lang="+lang.code), chromedp.WaitVisible(chromedp.CSS(card))); err != nil {
			t.Fatal(err)
		}
		if text, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(card))); !strings.Contains(text, lang.unreachable) {
			t.Fatalf("%s card %q", lang.code, text)
		}
		page := fmt.Sprintf("%sevents/%d?lang=%s", ui, id, lang.code)
		row := `.delivery[data-destination="log"] tr.attempt`
		if err := chromedp.Do(step, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
			t.Fatalf("%s: the queue destination's attempts: %v", lang.code, err)
		}
		attempt, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(row)))
		if !strings.Contains(strings.ToLower(attempt), lang.retry) {
			t.Fatalf("%s: the publish's attempt reads %q: want a retry", lang.code, attempt)
		}
		saveShot(t, step, shots, "queue-destination-attempts-"+lang.code+".png")
		if err := chromedp.Do(step, chromedp.Navigate(ui+"destinations?lang="+lang.code), chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="log"] [data-kind="kafka"]`))); err != nil {
			t.Fatalf("%s: the destinations page: %v", lang.code, err)
		}
		if target, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(`tr[data-destination="log"] [data-kind="kafka"]`))); !strings.Contains(target, "topic events") {
			t.Fatalf("%s: the queue destination is described as %q", lang.code, target)
		}
		saveShot(t, step, shots, "queue-destinations-"+lang.code+".png")
	}
	if s, _ := gw.Store().Stats(ctx); s.Dead != 0 || s.Pending != 1 {
		t.Fatalf("stats %+v: the publish that failed must wait, pending, not dead", s)
	}
}

package channel_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/alert/channel"
)

func notice(event string) channel.Notice {
	base := 0.01
	opened := time.Date(2026, 12, 4, 14, 7, 0, 0, time.UTC)
	return channel.Notice{Event: event, IssueID: "iss_42", Kind: "duplicate_rate", Scope: "source", Name: "stripe",
		Message: "source stripe: 31.0% of 812 events this hour were duplicates, above 3.0× its baseline",
		Value:   0.31, Threshold: 0.06, Baseline: &base, Volume: 812,
		Opened: opened, At: opened.Add(20 * time.Minute),
		Link: "https://hooks.example.com/ui/issues/iss_42", Key: "oncehook:issue:iss_42:" + event}
}

func build(t *testing.T, a config.Alerts) []channel.Channel {
	t.Helper()
	chs, err := channel.FromConfig(a, channel.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return chs
}

// Each kind posts what its service documents and accepts, and says on a
// phone what happened, where, the figures and the link: the receiver
// answers each body as Slack, Teams (both webhooks) and Discord would.
func TestWebhookKindsPostTheShapeTheirServiceAccepts(t *testing.T) {
	r := newReceiver(t)
	chs := build(t, config.Alerts{Channels: []config.AlertChannel{
		{Name: "ops-slack", Kind: "slack", URL: r.URL + "/slack"},
		{Name: "ops-teams", Kind: "teams", URL: r.URL + "/teams"},
		{Name: "ops-connector", Kind: "teams", URL: r.URL + "/webhookb2/abc@def/IncomingWebhook/123/456"},
		{Name: "ops-discord", Kind: "discord", URL: r.URL + "/discord"},
	}})
	ctx := context.Background()
	for _, ev := range []string{channel.EventOpened, channel.EventResolved} {
		for _, ch := range chs {
			if err := ch.Send(ctx, notice(ev)); err != nil {
				t.Fatalf("%s %s: %v", ch.Name(), ev, err)
			}
		}
	}
	for _, p := range []string{"/slack", "/teams", "/connector", "/discord"} {
		if n := len(r.bodies(p)); n != 2 {
			t.Fatalf("%s: %d bodies accepted, want 2", p, n)
		}
	}

	slack := r.bodies("/slack")
	if text := slack[0]["text"].(string); !strings.Contains(text, "Opened: duplicate rate at source stripe") || !strings.Contains(text, "31.0%") {
		t.Errorf("slack text (the phone's notification) = %q", text)
	}
	if text := slack[1]["text"].(string); !strings.HasPrefix(text, "Resolved: duplicate rate at source stripe") {
		t.Errorf("slack resolved text = %q", text)
	}
	sj := mustJSON(slack[0])
	for _, want := range []string{`"*Value*\n31.0%"`, `"*Threshold*\n6.0%"`, `"*Baseline*\n1.0%"`, `"*Events this hour*\n812"`, `"url":"https://hooks.example.com/ui/issues/iss_42"`} {
		if !strings.Contains(sj, want) {
			t.Errorf("slack blocks lack %s: %s", want, sj)
		}
	}

	card := obj(list(r.bodies("/teams")[0]["attachments"])[0])["content"]
	cj := mustJSON(card)
	for _, want := range []string{`"text":"Opened: duplicate rate at source stripe"`, `{"title":"Value","value":"31.0%"}`, `"type":"Action.OpenUrl"`, `"url":"https://hooks.example.com/ui/issues/iss_42"`} {
		if !strings.Contains(cj, want) {
			t.Errorf("adaptive card lacks %s: %s", want, cj)
		}
	}
	mc := mustJSON(r.bodies("/connector")[1])
	for _, want := range []string{`"summary":"Resolved: duplicate rate at source stripe"`, `"themeColor":"2EB67D"`, `"uri":"https://hooks.example.com/ui/issues/iss_42"`} {
		if !strings.Contains(mc, want) {
			t.Errorf("message card lacks %s: %s", want, mc)
		}
	}

	d := r.bodies("/discord")[0]
	if d["content"] != "Opened: duplicate rate at source stripe" {
		t.Errorf("discord content = %v", d["content"])
	}
	e := obj(list(d["embeds"])[0])
	if e["url"] != "https://hooks.example.com/ui/issues/iss_42" || !strings.Contains(e["description"].(string), "812 events") || e["timestamp"] != "2026-12-04T14:27:00Z" {
		t.Errorf("discord embed = %s", mustJSON(e))
	}
	if dj := mustJSON(d); !strings.Contains(dj, `"allowed_mentions":{"parse":[]}`) || !strings.Contains(dj, `{"inline":true,"name":"Value","value":"31.0%"}`) {
		t.Errorf("discord body = %s", dj)
	}
}

// A notice over the services' limits (a long message, a long name) is
// cut to fit, not refused: Discord answers 400 to a message over its
// limits, and an alert refused is an alert nobody reads.
func TestLongNoticeIsCutNotRefused(t *testing.T) {
	r := newReceiver(t)
	chs := build(t, config.Alerts{Channels: []config.AlertChannel{
		{Name: "s", Kind: "slack", URL: r.URL + "/slack"},
		{Name: "t", Kind: "teams", URL: r.URL + "/teams"},
		{Name: "d", Kind: "discord", URL: r.URL + "/discord"},
	}})
	n := notice(channel.EventOpened)
	n.Name = strings.Repeat("n", 600)
	n.Message = strings.Repeat("é", 10000)
	n.Tenant = strings.Repeat("t", 3000)
	for _, ch := range chs {
		if err := ch.Send(context.Background(), n); err != nil {
			t.Fatalf("%s: %v", ch.Name(), err)
		}
	}
	e := obj(list(r.bodies("/discord")[0]["embeds"])[0])
	desc := e["description"].(string)
	if runes(desc) < 1000 || !strings.HasSuffix(desc, "…") {
		t.Errorf("discord description: %d characters, ending %q; want the message cut with an ellipsis", runes(desc), desc[len(desc)-8:])
	}
	if runes(e["title"].(string)) != 256 {
		t.Errorf("discord title: %d characters, want cut to 256", runes(e["title"].(string)))
	}
	if got := runes(r.bodies("/slack")[0]["text"].(string)); got > 4000 {
		t.Errorf("slack text: %d characters", got)
	}
}

// The receiver refuses what the services refuse, so that the tests above
// could fail: Slack's 400 no_text for a body without text, which is what
// alerts.url pointed at Slack got before channels, and Discord's 400 over
// a limit. The channel's error quotes the answer, never the URL's secret.
func TestWhatTheServicesRefuseIsAnError(t *testing.T) {
	r := newReceiver(t)
	chs := build(t, config.Alerts{URL: r.URL + "/slack?token=SECRET-T0K3N"})
	if len(chs) != 1 || chs[0].Name() != channel.LegacyName {
		t.Fatalf("alerts.url: %d channels", len(chs))
	}
	err := chs[0].Send(context.Background(), notice(channel.EventOpened))
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "no_text") {
		t.Fatalf("the old JSON shape at Slack: err = %v, want 400 no_text", err)
	}
	resp, err := http.Post(r.URL+"/discord", "application/json", strings.NewReader(`{"content":"`+strings.Repeat("x", 2001)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("discord content of 2001 characters: %d, want 400", resp.StatusCode)
	}
	// A transport error quotes the URL: redacted.
	r.Close()
	for _, kind := range []string{"slack", "discord", "json", "teams"} {
		chs := build(t, config.Alerts{Channels: []config.AlertChannel{{Name: "x", Kind: kind, URL: r.URL + "/services/T0/B0/SECRET-P4TH?token=SECRET-T0K3N"}}})
		err := chs[0].Send(context.Background(), notice(channel.EventOpened))
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s to a closed port: err = %v, want an error without the secret", kind, err)
		}
	}
}

// alerts.url keeps working as it did: the json channel's body has every
// field the Alert JSON had (kind, scope, name, hour, value, threshold,
// baseline, volume, message, resolved), with the issue's fields beside
// them, and the headers and the Idempotency-Key.
func TestJSONChannelKeepsTheAlertShape(t *testing.T) {
	r := newReceiver(t)
	chs := build(t, config.Alerts{URL: r.URL + "/json", Headers: map[string]string{"Authorization": "Bearer k"}})
	for _, ev := range []string{channel.EventOpened, channel.EventResolved} {
		if err := chs[0].Send(context.Background(), notice(ev)); err != nil {
			t.Fatal(err)
		}
	}
	got := r.bodies("/json")
	want := map[string]any{"kind": "duplicate_rate", "scope": "source", "name": "stripe", "hour": "2026-12-04T14:00:00Z",
		"value": 0.31, "threshold": 0.06, "baseline": 0.01, "volume": 812.0, "message": notice("").Message,
		"event": "opened", "issue": "iss_42", "opened": "2026-12-04T14:07:00Z", "link": "https://hooks.example.com/ui/issues/iss_42"}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("%s = %v, want %v", k, got[0][k], v)
		}
	}
	if _, ok := got[0]["resolved"]; ok || got[1]["resolved"] != true {
		t.Errorf("resolved: %v then %v, want absent then true", got[0]["resolved"], got[1]["resolved"])
	}
	h := r.headers["/json"][0]
	if h.Get("Authorization") != "Bearer k" || h.Get("Idempotency-Key") != "oncehook:issue:iss_42:opened" {
		t.Errorf("headers: %v", h)
	}
}

// Each kind checks its own block, naming the field.
func TestCheckNamesTheField(t *testing.T) {
	for _, c := range []struct {
		ch    config.AlertChannel
		field string
	}{
		{config.AlertChannel{Name: "a", Kind: "pager"}, "alerts.channels[0].kind"},
		{config.AlertChannel{Name: "a", Kind: "slack"}, "alerts.channels[0].url"},
		{config.AlertChannel{Name: "a", Kind: "discord", URL: "https://x/", SMTP: config.SMTP{Host: "h"}}, "alerts.channels[0].smtp"},
		{config.AlertChannel{Name: "a", Kind: "email", SMTP: config.SMTP{From: "a@b.c", To: []string{"d@e.f"}}}, "alerts.channels[0].smtp.host"},
		{config.AlertChannel{Name: "a", Kind: "email", SMTP: config.SMTP{Host: "h", To: []string{"d@e.f"}}}, "alerts.channels[0].smtp.from"},
		{config.AlertChannel{Name: "a", Kind: "email", SMTP: config.SMTP{Host: "h", From: "a@b.c"}}, "alerts.channels[0].smtp.to"},
		{config.AlertChannel{Name: "a", Kind: "email", SMTP: config.SMTP{Host: "h", From: "a@b.c", To: []string{"d@e.f"}, Username: "u"}}, "alerts.channels[0].smtp.password"},
		{config.AlertChannel{Name: "a", Kind: "email", URL: "https://x/", SMTP: config.SMTP{Host: "h", From: "a@b.c", To: []string{"d@e.f"}}}, "alerts.channels[0].url"},
	} {
		var fields []string
		channel.Check(config.Alerts{Channels: []config.AlertChannel{c.ch}}, func(field, format string, args ...any) { fields = append(fields, field) })
		if !strings.Contains(strings.Join(fields, " "), c.field) {
			t.Errorf("%+v: fields at fault %v, want %s", c.ch, fields, c.field)
		}
		if _, err := channel.FromConfig(config.Alerts{Channels: []config.AlertChannel{c.ch}}, channel.Deps{}); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("FromConfig(%+v) = %v, want an error naming %s", c.ch, err, c.field)
		}
	}
}

// A receiver that refuses a notice and echoes the request in its answer
// (a proxy's error page quoting the path, an API quoting the api_key or
// the Authorization it refused) does not put the channel's secrets in the
// error, which reaches the log, the alert's effect record and the
// dashboard (found by a tester: Slack's and Discord's paths, a json
// channel's query and header, verbatim in all three).
func TestARefusalThatEchoesTheRequestQuotesNoSecret(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "refused %s %s?%s auth=%q raw=%s", r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.URL.RequestURI())
	}))
	defer echo.Close()
	for _, kind := range []string{"slack", "discord", "json", "teams"} {
		ch := config.AlertChannel{Name: "x", Kind: kind, URL: echo.URL + "/services/T0/B0/SECRETP4TH?api_key=SECRETQU3RY&x=a%2Fb+SECRETESC"}
		if kind == "json" {
			ch.Headers = map[string]string{"Authorization": "Bearer SECRETH3ADER"}
		}
		err := build(t, config.Alerts{Channels: []config.AlertChannel{ch}})[0].Send(context.Background(), notice(channel.EventOpened))
		if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "refused POST") {
			t.Fatalf("%s: err = %v, want the refusal quoted", kind, err)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error quotes a secret: %v", kind, err)
		}
	}
}

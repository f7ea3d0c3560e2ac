package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// Found from outside: in pt-BR, attempt outcomes (delivered, retry, dead),
// rejection reasons (unauthorized), audit actions (effect_reset) and the
// key doctor's findings were shown in English, or as their codes. Every
// page, rendered in pt-BR over a store that holds every outcome, reason,
// action and finding, shows none of them raw.
func TestEveryPageInPortugueseShowsNoRawWord(t *testing.T) {
	app := testenv.NewSink(t)
	var flaky atomic.Int32
	app.Respond = func(w http.ResponseWriter, r *http.Request, n int) {
		switch body := string(app.Deliveries()[n-1].Body); {
		case strings.Contains(body, "gone"):
			w.WriteHeader(http.StatusGone) // straight to the dead letters
		case strings.Contains(body, "flaky") && flaky.Add(1) == 1:
			w.WriteHeader(http.StatusInternalServerError) // a retry, then delivered
		default:
			w.WriteHeader(http.StatusOK)
		}
	}
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens: [{name: ops, token: `+token+`}]
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app]}
  - {name: acme, preset: generic, unsigned: true, key: ["header:X-Id"], destinations: [app]}
destinations:
  - {name: app, url: `+app.URL+`, retry: {max_attempts: 5, base_delay: 10ms, max_delay: 20ms}}
`)
	post(t, gw.URL+"/in/stripe", `{"id":"evt_ok","type":"invoice.paid"}`)
	post(t, gw.URL+"/in/stripe", `{"id":"evt_flaky","type":"flaky"}`)
	post(t, gw.URL+"/in/stripe", `{"id":"evt_gone","type":"gone"}`)
	// Rejections: a forged signature, a malformed body.
	for _, body := range []string{`{"id":"evt_forged"}`, `not json`} {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/stripe", strings.NewReader(body))
		if body == "not json" {
			req = testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", secret, []byte(body), "")
		} else {
			req.Header.Set("Stripe-Signature", "t=1,v1=00")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The doctor's two findings: a key per delivery (identical bodies,
	// distinct header keys), and a key too coarse (a duplicate whose body
	// changed).
	send := func(id, body string) {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/acme", strings.NewReader(body))
		req.Header.Set("X-Id", id)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for i := range 4 {
		send(fmt.Sprint("a-1", i), `{"order":1,"status":"new"}`)
	}
	send("a-3", `{"order":3,"status":"new"}`)
	send("a-3", `{"order":3,"status":"paid"}`)
	if !testenv.WaitFor(10*time.Second, func() bool {
		d, _ := gw.Admin().Destinations(context.Background())
		return len(d) == 1 && d[0].Dead == 1 && d[0].Pending == 0
	}) {
		t.Fatal("the deliveries never settled")
	}
	// Every audit action, and an effect to reset.
	ctx := admin.WithActor(context.Background(), "token:ops")
	svc := gw.Admin()
	if _, err := svc.ReplayEvents(ctx, admin.EventFilter{Source: "stripe", Key: "evt_ok"}, false); err != nil {
		t.Fatal(err)
	}
	svc.SetPaused(ctx, "app", true)
	svc.SetPaused(ctx, "app", false)
	svc.PurgeDeadLetters(ctx, admin.DeadFilter{Source: "acme"}, false)
	svc.RetryDeadLetters(ctx, admin.DeadFilter{Source: "acme"}, false)
	c, err := gw.Effects().Claim(ctx, "pix:1", effect.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gw.Effects().Fail(ctx, "pix:1", c.Token, "no")
	if err := svc.ResetEffect(ctx, "pix:1"); err != nil {
		t.Fatal(err)
	}
	// The rollups ride the writer's next commit or its 10s flush.
	if !testenv.WaitFor(15*time.Second, func() bool {
		src, err := svc.Sources(context.Background())
		return err == nil && src[0].Last24h.RejectedTotal() == 2
	}) {
		t.Fatal("the rollups never showed the rejections")
	}

	c2, _ := login(t, gw, token)
	ui := gw.APIURL + "/ui/"
	pages := []string{"?lang=pt-BR", "sources/stripe", "sources/acme", "sources/new", "destinations/new", "sources/stripe/setup", "events", "dead-letters", "destinations", "effects", "audit", "alerts"}
	list, err := svc.Events(context.Background(), admin.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Events {
		pages = append(pages, fmt.Sprintf("events/%d", e.ID))
	}
	tags := regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]+>`)
	raw := regexp.MustCompile(`\b(delivered|retry|released|unauthorized|malformed|effect_reset|replay|pause|resume|purge|key_per_delivery|key_too_coarse|(outcome|reason|action|target|doctor|state|error)\.[a-z_.]+)\b|recent (events|duplicates)|all dead letters`)
	for _, p := range pages {
		resp, body := get(t, c2, ui+p)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
		text := tags.ReplaceAllString(body, " ")
		if !strings.Contains(body, `lang="pt-BR"`) {
			t.Fatalf("%s is not in pt-BR", p)
		}
		for _, m := range raw.FindAllString(text, -1) {
			t.Errorf("%s shows %q untranslated", p, m)
		}
	}
	// The check can fail: in English the same pages show every outcome,
	// reason, action and finding the store holds.
	english := ""
	for _, p := range pages {
		sep := "?"
		if strings.Contains(p, "?") {
			sep = "&"
		}
		_, body := get(t, c2, ui+strings.TrimPrefix(p, "?lang=pt-BR")+sep+"lang=en")
		english += body
	}
	for _, want := range []string{">delivered<", ">retry<", ">dead<", ">bad signature<", ">malformed body<", ">effect reset<", ">replay<", ">pause<",
		`data-finding="key_per_delivery"`, `data-finding="key_too_coarse"`} {
		if !strings.Contains(english, want) {
			t.Errorf("the English pages lack %s: the store does not hold every value, so the check above proves less", want)
		}
	}
	get(t, c2, ui+"?lang=pt-BR")
}

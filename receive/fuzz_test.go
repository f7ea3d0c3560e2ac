package receive_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/groupcommit"
	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store/sqlite"
)

// FuzzIntake sends attacker-chosen requests through the real handler and a
// real SQLite store, for every preset: none may be answered 200 (or 5xx),
// and nothing may be stored. Invariant 4 under fire.
func FuzzIntake(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","object":"event"}`), "t=1700000000,v1=00", "", "")
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[]}`), "sha256=8f1c69f3c50e172785b483ad84a36a6c64b4e199e23810fbd5e084d9300f6452", "", "")
	f.Add([]byte(`{"type":"url_verification","challenge":"x"}`), "v0=00", "", "")
	f.Add([]byte(`MessageSid=SM1`), "x", "bodySHA256=00", "tok")
	st, err := sqlite.Open(context.Background(), filepath.Join(f.TempDir(), "fuzz.db"), sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	committer := groupcommit.New(st.Commit, groupcommit.Options{})
	f.Cleanup(committer.Close)
	var sources []receive.Source
	for _, name := range provider.Names() {
		p, err := provider.New(name, provider.Options{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Key: []string{"json:id"}, VerifyToken: "vt-secret"})
		if err != nil {
			f.Fatal(err)
		}
		sources = append(sources, receive.Source{Name: name, Preset: p, Window: time.Hour, Routes: route.To("d")})
	}
	h := receive.New(receive.Options{Sources: sources, Claimer: committer, MaxBodySize: 1 << 16})
	mux := http.NewServeMux()
	mux.Handle("/in/{source}", h)
	mux.Handle("/in/{source}/{token}", h)

	f.Fuzz(func(t *testing.T, body []byte, credential, query, pathToken string) {
		for _, s := range sources {
			for _, method := range []string{http.MethodPost, http.MethodGet} {
				target := "/in/" + s.Name
				if pathToken != "" {
					target += "/" + pathToken
				}
				req, err := http.NewRequest(method, "http://hooks.example.com"+target, bytes.NewReader(body))
				if err != nil {
					return // not a URL at all: nothing reaches the handler
				}
				req.URL.RawQuery = query
				for _, name := range []string{"Stripe-Signature", "X-Hub-Signature-256", "X-Hub-Signature", "webhook-id", "webhook-timestamp",
					"webhook-signature", "X-Shopify-Hmac-Sha256", "X-HOTMART-HOTTOK", "x-signature", "asaas-access-token", "X-Slack-Signature",
					"X-Slack-Request-Timestamp", "Paddle-Signature", "X-Twilio-Signature", "Authorization", "apikey", "X-Signature"} {
					req.Header.Set(name, credential)
				}
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, req)
				if rec.Code == http.StatusOK || rec.Code >= 500 {
					t.Fatalf("%s %s: %d %s", method, s.Name, rec.Code, rec.Body)
				}
			}
		}
		if stats, err := st.Stats(context.Background()); err != nil || stats.Events != 0 {
			t.Fatalf("stored %d events from unverified requests (%v)", stats.Events, err)
		}
	})
}

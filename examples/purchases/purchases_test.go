package purchases

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

const (
	hottok = "hotmart-hottok-test"
	kiwify = "kiwify-token-test"
)

// hotmart's postback 2.0.0 for an approved purchase (the fields the script reads, and a few more).
const hotmartApproved = `{"id":"8f0e1c2a-hm-1","creation_date":1764640000000,"event":"PURCHASE_APPROVED","version":"2.0.0",
"data":{"product":{"id":4774438,"name":"Curso Online"},"buyer":{"email":" Maria@Example.com ","name":"Maria Souza","checkout_phone":"+55 (11) 99999-0000"},
"purchase":{"transaction":"HP17715690036014","approved_date":1764640005000,"order_date":1764639990000,"status":"APPROVED","price":{"value":97.0,"currency_value":"BRL"}}}}`

// the same order's next notification, which the destination does not want.
const hotmartComplete = `{"id":"8f0e1c2a-hm-2","creation_date":1764643600000,"event":"PURCHASE_COMPLETE","version":"2.0.0",
"data":{"product":{"id":4774438},"buyer":{"email":"maria@example.com"},"purchase":{"transaction":"HP17715690036014","price":{"value":97.0,"currency_value":"BRL"}}}}`

// kiwify's order_approved (the fields the script reads, and a few more).
const kiwifyApproved = `{"order_id":"b5e7c9d1-kw-42","order_ref":"Kx7Qw2","order_status":"paid","webhook_event_type":"order_approved",
"payment_method":"pix","approved_date":"2025-12-02T01:30:00Z","created_at":"2025-12-02T01:29:00Z",
"Product":{"product_id":"9a1b2c3d","product_name":"Mentoria"},"Customer":{"full_name":"João Lima","email":"joao@example.com","mobile":"+5521988887777"},
"Commissions":{"charge_amount":"19700","currency":"BRL"}}`

type capiEvent struct {
	EventName  string                    `json:"event_name"`
	EventTime  int64                     `json:"event_time"`
	EventID    string                    `json:"event_id"`
	UserData   struct{ Em, Ph []string } `json:"user_data"`
	CustomData struct {
		Currency string  `json:"currency"`
		Value    float64 `json:"value"`
		OrderID  string  `json:"order_id"`
	} `json:"custom_data"`
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Hotmart's and Kiwify's approved purchases reach Meta's Conversions API as
// one Purchase each, in one shape, with event_id = the order id and the
// buyer's email and phone hashed as Meta asks; each is delivered once
// however often its provider resends it, and the notifications the
// destination does not want (Hotmart's PURCHASE_COMPLETE) are skipped.
func TestHotmartAndKiwifyBecomeOneCAPIPurchaseEach(t *testing.T) {
	var mu sync.Mutex
	var got []capiEvent
	var paths []string
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Data []capiEvent }
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil || len(body.Data) != 1 {
			t.Errorf("Meta got %s (%v)", raw, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, body.Data[0])
		paths = append(paths, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Write([]byte(`{"events_received":1}`))
	}))
	t.Cleanup(meta.Close)

	cfg, err := os.ReadFile("oncehook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("transforms/capi.js")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.NewReplacer(
		"sqlite://./purchases.db", "sqlite://$DIR/oncehook.db",
		"${HOTMART_HOTTOK}", hottok, "${KIWIFY_TOKEN}", kiwify,
		"https://graph.facebook.com/v21.0/${META_PIXEL}/events?access_token=${META_TOKEN}", meta.URL+"/v21.0/123/events?access_token=t",
		"transform: transforms/capi.js", "transform: "+script,
	).Replace(string(cfg))
	gw := oncehooktest.Start(t, yaml)

	post := func(source, secret, body string) {
		t.Helper()
		for range 2 { // every provider resends
			resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/"+source, source, secret, []byte(body), ""))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s: %v %v", source, resp, err)
			}
			resp.Body.Close()
		}
	}
	post("hotmart", hottok, hotmartApproved)
	post("hotmart", hottok, hotmartComplete)
	post("kiwify", kiwify, kiwifyApproved)

	if !testenv.WaitFor(10*time.Second, func() bool {
		st, err := gw.Store().Stats(t.Context())
		return err == nil && st.Pending == 0 && st.Events == 3
	}) {
		t.Fatal("the deliveries did not end")
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("Meta got %d Purchases, want 2 (one per order): %+v", len(got), got)
	}
	byID := map[string]capiEvent{}
	for _, e := range got {
		byID[e.EventID] = e
	}
	hm, kw := byID["HP17715690036014"], byID["b5e7c9d1-kw-42"]
	if hm.EventName != "Purchase" || hm.EventTime != 1764640005 || hm.CustomData.Value != 97 || hm.CustomData.Currency != "BRL" ||
		hm.CustomData.OrderID != "HP17715690036014" || len(hm.UserData.Em) != 1 || hm.UserData.Em[0] != hash("maria@example.com") ||
		hm.UserData.Ph[0] != hash("5511999990000") {
		t.Errorf("Hotmart's Purchase: %+v", hm)
	}
	if kw.EventName != "Purchase" || kw.EventTime != 1764639000 || kw.CustomData.Value != 197 || kw.CustomData.Currency != "BRL" ||
		kw.UserData.Em[0] != hash("joao@example.com") || kw.UserData.Ph[0] != hash("5521988887777") {
		t.Errorf("Kiwify's Purchase: %+v", kw)
	}
	for _, p := range paths {
		if p != "/v21.0/123/events?access_token=t" {
			t.Errorf("sent to %s, want the destination's URL as configured", p)
		}
	}
}

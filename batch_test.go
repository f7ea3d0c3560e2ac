package oncehook_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
)

// waStatuses builds a WhatsApp batch of statuses for message ids
// [from, to), each one sent, delivered and read: ids repeat across
// statuses, as Meta sends them.
func waStatuses(from, to int) []byte {
	var st []string
	for i := from; i < to; i++ {
		for _, s := range []string{"sent", "delivered", "read"} {
			st = append(st, fmt.Sprintf(`{"id":"wamid.OUT%05d","status":%q,"timestamp":"1700000001","recipient_id":"5511999990000"}`, i, s))
		}
	}
	return []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"WABA","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"PNID"},"statuses":[%s]}}]}]}`, strings.Join(st, ",")))
}

func postWhatsApp(t *testing.T, url string, body []byte) answer {
	t.Helper()
	p, _ := provider.New("whatsapp", provider.Options{Secrets: []string{"meta_app_secret_test"}})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err := provider.SignHTTP(p, req, body, "meta_app_secret_test", time.Now(), ""); err != nil {
		t.Fatal(err)
	}
	return do(t, http.DefaultClient, req)
}

// Invariant 5: a batch is split before dedup. Each update is claimed on its
// own key; a resent batch is all duplicates; a batch mixing old and new
// stores only the new, with a verdict per item.
func TestWhatsAppBatchIsSplitBeforeDedup(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, sourceConfig("wa", "whatsapp", "meta_app_secret_test", sink.URL, ""))
	url := gw.URL + "/in/wa"
	count := func(a answer, status string) int {
		n := 0
		for _, e := range a.Body.Events {
			if e.Status == status {
				n++
			}
		}
		return n
	}

	first := waStatuses(0, 333) // 999 updates
	a := postWhatsApp(t, url, first)
	if a.Status != 200 || len(a.Body.Events) != 999 || count(a, receive.StatusAccepted) != 999 {
		t.Fatalf("first batch: %d, %d events, %d accepted", a.Status, len(a.Body.Events), count(a, receive.StatusAccepted))
	}
	a = postWhatsApp(t, url, first)
	if a.Status != 200 || a.Body.Status != receive.StatusDuplicate || count(a, receive.StatusDuplicate) != 999 {
		t.Fatalf("resent batch: %d %s, %d duplicates", a.Status, a.Body.Status, count(a, receive.StatusDuplicate))
	}
	mixed := waStatuses(330, 335) // 3 old ids, 2 new: 9 old updates, 6 new
	a = postWhatsApp(t, url, mixed)
	if a.Status != 200 || a.Body.Status != receive.StatusAccepted || count(a, receive.StatusAccepted) != 6 || count(a, receive.StatusDuplicate) != 9 {
		t.Fatalf("mixed batch: %d %+v", a.Status, a.Body)
	}
	for _, e := range a.Body.Events {
		old := e.Key < "wamid.OUT00333"
		if old != (e.Status == receive.StatusDuplicate) {
			t.Errorf("%s: %s", e.Key, e.Status)
		}
	}
	if st := stats(t, gw); st.Events != 1005 {
		t.Fatalf("stored %d events, want 1005", st.Events)
	}
	if !testenv.WaitFor(20*time.Second, func() bool { return len(sink.ByKey()) == 1005 }) {
		t.Fatalf("delivered %d distinct, want 1005", len(sink.ByKey()))
	}
	time.Sleep(100 * time.Millisecond)
	sink.CheckEachOnce(t)
	// A delivered update is Meta's envelope around that one update.
	d := sink.Deliveries()[0]
	if !strings.Contains(string(d.Body), `"statuses":[{`) || strings.Count(string(d.Body), `"status":`) != 1 {
		t.Fatalf("delivered body %s", d.Body)
	}
}

// Evolution's history sync carries arrays: each item is its own event, a
// resend is all duplicates, and an item repeated inside the batch is a
// duplicate of its first copy.
func TestEvolutionHistorySyncIsSplitBeforeDedup(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, sourceConfig("evo", "evolution", "evo_secret", sink.URL, ""))
	var items []string
	for i := range 200 {
		items = append(items, fmt.Sprintf(`{"key":{"id":"MSG%03d","remoteJid":"55@s.whatsapp.net"},"message":{"conversation":"oi"}}`, i))
	}
	items = append(items, items[0]) // Evolution resending one inside the batch
	body := []byte(`{"event":"messages.set","instance":"inst1","data":[` + strings.Join(items, ",") + `]}`)
	post := func() answer {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/evo/evo_secret", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return do(t, http.DefaultClient, req)
	}
	a := post()
	if a.Status != 200 || len(a.Body.Events) != 201 {
		t.Fatalf("first: %d, %d events", a.Status, len(a.Body.Events))
	}
	if last := a.Body.Events[200]; last.Status != receive.StatusDuplicate || last.Key != "messages.set:inst1:MSG000" {
		t.Fatalf("the repeated item: %+v", last)
	}
	a = post()
	for _, e := range a.Body.Events {
		if e.Status != receive.StatusDuplicate {
			t.Fatalf("resent batch: %s is %s", e.Key, e.Status)
		}
	}
	if st := stats(t, gw); st.Events != 200 {
		t.Fatalf("stored %d, want 200", st.Events)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.ByKey()) == 200 }) {
		t.Fatalf("delivered %d", len(sink.ByKey()))
	}
}

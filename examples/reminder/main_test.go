package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store"
)

// messaging is a stand-in of WhatsApp's Cloud API: it sends (counts) every
// message it is asked to, with no dedup of its own, and can say whether a
// message tagged with a key went out.
type messaging struct {
	*httptest.Server
	mu    sync.Mutex
	sends map[string]int // biz_opaque_callback_data → messages sent
	total int
}

func newMessaging(t *testing.T) *messaging {
	m := &messaging{sends: map[string]int{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		switch r.Method {
		case http.MethodPost:
			var msg struct {
				Key string `json:"biz_opaque_callback_data"`
			}
			json.NewDecoder(r.Body).Decode(&msg)
			m.sends[msg.Key]++
			m.total++
			fmt.Fprintf(w, `{"messages":[{"id":"wamid.%d"}]}`, m.total)
		case http.MethodGet:
			key := r.URL.Query().Get("biz_opaque_callback_data")
			if m.sends[key] == 0 {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `{"messages":[{"id":"wamid.found"}],"found":true}`)
		}
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *messaging) count() (total int, keys map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys = map[string]int{}
	for k, v := range m.sends {
		keys[k] = v
	}
	return m.total, keys
}

// End to end through a real gateway: an appointment event sent five times
// by its provider is delivered once and reminded once.
func TestReminderBehindOncehook(t *testing.T) {
	msg := newMessaging(t)
	svc := &Service{Messaging: msg.URL, HTTP: &http.Client{Timeout: 5 * time.Second}, Lease: 10 * time.Second}
	app := httptest.NewServer(svc)
	defer app.Close()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: clinic, preset: generic, unsigned: true, key: ["json:appointment_id", "json:step"], destinations: [reminder]}
destinations:
  - {name: reminder, url: `+app.URL+`, retry: {max_attempts: 5, base_delay: 10ms, max_delay: 50ms}}
`)
	svc.Ledger = effect.NewClient(gw.APIURL, gw.APIToken, nil)
	body := `{"appointment_id":"A-1","step":"24h","phone":"+5511999990000","text":"Lembrete: consulta amanhã"}`
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(gw.URL+"/in/clinic", "application/json", strings.NewReader(body))
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("send: %v %v", resp, err)
			} else {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if !testenv.WaitFor(10*time.Second, func() bool { total, _ := msg.count(); return total == 1 }) {
		t.Fatal("no reminder went out")
	}
	time.Sleep(200 * time.Millisecond)
	if total, _ := msg.count(); total != 1 {
		t.Fatalf("%d reminders for one appointment step", total)
	}
}

// The storm the issue describes: 1,000 appointment events, each delivered
// five times at once, with owners killed at random points (right after
// claiming, or after sending and before completing: a crashed process says
// nothing). While the crashed owners' leases run, the reconciliation list
// shows every effect left halfway; retried, each appointment is reminded
// exactly once, a reclaim finding its message already sent.
func TestReminderStormWithOwnersKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm")
	}
	msg := newMessaging(t)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: clinic, preset: generic, unsigned: true, key: ["json:appointment_id"]}
`)
	transport := &http.Transport{MaxIdleConnsPerHost: 256}
	defer transport.CloseIdleConnections()
	ledger := effect.NewClient(gw.APIURL, gw.APIToken, &http.Client{Transport: transport})
	var mu sync.Mutex
	crashed := map[string]string{}
	var dying atomic.Bool
	dying.Store(true)
	svc := &Service{Ledger: ledger, Messaging: msg.URL, HTTP: &http.Client{Transport: transport}, Lease: 4 * time.Second,
		crash: func(key, point string) bool {
			if !dying.Load() || rand.IntN(10) != 0 { // one owner in ten dies, at each point
				return false
			}
			mu.Lock()
			crashed[key] = point
			mu.Unlock()
			return true
		}}
	app := httptest.NewServer(svc)
	defer app.Close()
	client := &http.Client{Transport: transport}
	deliver := func(i int) int {
		body := fmt.Sprintf(`{"appointment_id":"A-%04d","step":"24h","phone":"+5511999990000","text":"oi"}`, i)
		resp, err := client.Post(app.URL, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	const events, copies = 1000, 5
	storm := testenv.NewStorm(64)
	for i := range events {
		for range copies {
			storm.Go(func() {
				deliver(i)
			})
		}
	}
	storm.Wait()
	if len(crashed) == 0 {
		t.Fatal("no owner died: the storm proves nothing")
	}

	// Every effect left halfway is on the reconciliation list once its
	// lease has run out.
	time.Sleep(svc.Lease + 200*time.Millisecond)
	var leaseExpired []string
	after := ""
	for {
		page, err := gw.Effects().List(context.Background(), store.EffectQuery{State: store.EffectPending, LeaseExpired: true, After: after, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			leaseExpired = append(leaseExpired, r.Key)
		}
		after = page[len(page)-1].Key
	}
	var want []string
	for k := range crashed {
		want = append(want, k)
	}
	sort.Strings(want)
	if fmt.Sprint(leaseExpired) != fmt.Sprint(want) {
		t.Fatalf("the reconciliation list shows %d effects whose lease expired; %d owners died", len(leaseExpired), len(want))
	}

	// The deliveries are retried (as oncehook retries a 5xx) until every
	// appointment is done.
	dying.Store(false)
	for i := range events {
		for attempt := 0; ; attempt++ {
			if deliver(i) == http.StatusOK {
				break
			}
			if attempt > 50 {
				t.Fatalf("A-%04d never reminded", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	total, perKey := msg.count()
	if total != events || len(perKey) != events {
		t.Fatalf("%d messages sent for %d appointments (%d distinct); want exactly one each", total, events, len(perKey))
	}
	sentBeforeDying := 0
	for _, p := range crashed {
		if p == "sent" {
			sentBeforeDying++
		}
	}
	t.Logf("%d owners died (%d after sending); %d messages sent for %d appointments", len(crashed), sentBeforeDying, total, events)
}

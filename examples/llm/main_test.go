package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
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

// The founding story, whole: 1,000 paid invoices, each sent 5 times at
// once through oncehook, to a service that summarizes each with a model
// that bills per token and answers 429 (with Retry-After) and 500 at
// times; 50 times an owner dies right after the model answered, before it
// could record the result. The model bills exactly 1,000 completions, one
// per invoice, and every summary is stored once.
func TestEachPaidInvoiceIsSummarizedAndBilledOnce(t *testing.T) {
	model := NewFakeModel()
	model.Slow = 2 * time.Millisecond
	model.Fail = func(n int64) int {
		switch {
		case n%7 == 0:
			return http.StatusTooManyRequests
		case n%11 == 0:
			return http.StatusInternalServerError
		}
		return 0
	}
	modelSrv := httptest.NewServer(model)
	defer modelSrv.Close()

	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.Load().(*Service).ServeHTTP(w, r)
	}))
	defer front.Close()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [llm]}
destinations:
  - name: llm
    url: `+front.URL+`
    retry: {max_attempts: 100, base_delay: 20ms, max_delay: 200ms}
    breaker: {off: true}   # the service's 503s mean "another worker holds this key", not "down"
`)
	var crashed sync.Map
	var crashes atomic.Int32
	svc.Store(&Service{
		Ledger: gw.Effects(), Model: modelSrv.URL, HTTP: &http.Client{Timeout: 5 * time.Second}, Lease: 500 * time.Millisecond,
		Retry: effect.Retry{MaxAttempts: 8, Base: 5 * time.Millisecond, Max: 50 * time.Millisecond, Total: 5 * time.Second},
		crash: func(key string) bool {
			if crashes.Load() < 50 {
				if _, seen := crashed.LoadOrStore(key, true); !seen {
					crashes.Add(1)
					return true
				}
			}
			return false
		},
	})

	storm := testenv.NewStorm(64)
	for i := range 1000 {
		body := []byte(fmt.Sprintf(`{"id":"evt_%04d","object":"event","type":"invoice.paid","data":{"object":{"customer":"cus_%d","amount_paid":%d}}}`, i, i%37, 1000+i))
		for range 5 {
			storm.Go(func() {
				resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", body, ""))
				if err != nil || resp.StatusCode != 200 {
					t.Errorf("intake: %v %v", resp, err)
					return
				}
				resp.Body.Close()
			})
		}
	}
	storm.Wait()
	ctx := context.Background()
	if !testenv.WaitFor(60*time.Second, func() bool {
		st, _ := gw.Store().Stats(ctx)
		return st.Delivered == 1000
	}) {
		st, _ := gw.Store().Stats(ctx)
		t.Fatalf("delivered %d of 1,000", st.Delivered)
	}
	completions, tokens, most := model.Billed()
	if completions != 1000 || most != 1 {
		t.Fatalf("the model billed %d completions (%d tokens), a key at most %d times: want 1,000, once each", completions, tokens, most)
	}
	if crashes.Load() != 50 {
		t.Fatalf("%d owners died: the test proves less than it says", crashes.Load())
	}
	st, _ := gw.Store().Stats(ctx)
	// The summaries' records only: the gateway's own alerts are told as
	// effects of the same ledger (a duplicate-rate alert, should a check
	// run during the storm).
	summaries := 0
	for after := ""; ; {
		recs, err := gw.Effects().List(ctx, store.EffectQuery{State: store.EffectDone, After: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if strings.HasPrefix(r.Key, "llm-summary:") {
				summaries++
			}
		}
		if len(recs) < 500 {
			break
		}
		after = recs[len(recs)-1].Key
	}
	if st.Events != 1000 || summaries != 1000 {
		t.Fatalf("stats %+v, %d summaries: want 1,000 events and 1,000 summaries stored", st, summaries)
	}
	t.Logf("1,000 summaries, %d tokens billed, %d model calls in all (429s, 500s and repeats answered from its keys)", tokens, model.calls.Load())
}

// svc is the service the test's front server hands each delivery to.
var svc atomic.Value

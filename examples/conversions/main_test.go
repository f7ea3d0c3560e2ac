package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/examples/internal/metacapi"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// 300 checkouts, each posted three times at once (a retried checkout),
// one in six declined after its conversion was written: every sale that
// was recorded reaches Meta once, no declined one ever.
func TestEachSaleIsReportedOnceAndADeclinedOneNever(t *testing.T) {
	meta := metacapi.New(t, 5) // one request in five fails with a 500, as an API does under load: the gateway retries
	yaml := `store: sqlite://` + filepath.Join(t.TempDir(), "oncehook.db") + `
sources:
  - {name: purchases, outbox: true, destinations: [meta]}
destinations:
  - {name: meta, url: "` + meta.URL + `/v21.0/123/events?access_token=x", retry: {base_delay: 50ms, max_delay: 200ms}}
`
	oncehooktest.Start(t, yaml) // the gateway, delivering
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	sh, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.DB.Close()
	if err := sh.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	sh.Charge = func(_ context.Context, s Sale) error {
		if strings.HasSuffix(s.OrderID, "-declined") {
			return &DeclinedError{Reason: "insufficient funds"}
		}
		return nil
	}
	shop := httptest.NewServer(sh)
	defer shop.Close()

	const sales = 300
	var mu sync.Mutex
	answers := map[int]int{}
	storm := testenv.NewStorm(16)
	for i := range sales {
		id := fmt.Sprintf("o-%04d", i)
		if i%6 == 0 {
			id += "-declined"
		}
		for range 3 {
			storm.Go(func() {
				body := fmt.Sprintf(`{"order_id":%q,"email":"buyer%d@example.com","value":99.9,"currency":"BRL"}`, id, i)
				// A 503 (the database was busy past its timeout) is
				// retried, as the checkout page would: the retry is new,
				// or a duplicate if the first one committed after all.
				var resp *http.Response
				for try := 0; ; try++ {
					var err error
					resp, err = http.Post(shop.URL+"/checkout", "application/json", strings.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					if resp.StatusCode != http.StatusServiceUnavailable || try == 4 {
						break
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					t.Logf("checkout %s: %d %s; retried", id, resp.StatusCode, b)
				}
				resp.Body.Close()
				mu.Lock()
				answers[resp.StatusCode]++
				mu.Unlock()
			})
		}
	}
	storm.Wait()
	declined := sales / 6
	if answers[http.StatusCreated] != sales-declined || answers[http.StatusOK] != 2*(sales-declined) || answers[http.StatusPaymentRequired] != 3*declined {
		t.Fatalf("answers %v: want %d created, %d retried (200), %d declined (402)", answers, sales-declined, 2*(sales-declined), 3*declined)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return len(meta.Events()) == sales-declined }) {
		t.Fatalf("%d of %d sales reported", len(meta.Events()), sales-declined)
	}
	time.Sleep(300 * time.Millisecond)
	for key, n := range meta.Events() {
		if strings.HasSuffix(key, "-declined") {
			t.Errorf("%s was declined, and reported", key)
		}
		if n != 1 {
			t.Errorf("%s reported %d times", key, n)
		}
	}
	var recorded int
	sh.DB.QueryRow(`SELECT COUNT(*) FROM sales`).Scan(&recorded)
	if recorded != sales-declined {
		t.Fatalf("%d sales recorded, want %d", recorded, sales-declined)
	}
}

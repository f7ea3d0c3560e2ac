package python

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store"
)

// model is a model API that bills every call it answers, by key.
type model struct {
	mu     sync.Mutex
	billed map[string]int
}

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	time.Sleep(100 * time.Millisecond) // long enough for both workers to reach a task
	key := r.Header.Get("Idempotency-Key")
	m.mu.Lock()
	m.billed[key]++
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"summary":"paid: %s","tokens":42}`, key)
}

// python starts invoices.py in role; it is killed when the test ends.
// Its output's lines come on the channel; its errors go to the test's log.
func python(t *testing.T, env []string, role string) <-chan string {
	t.Helper()
	cmd := exec.Command("python3", "invoices.py", role)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logWriter{t, role}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// logWriter writes a process's errors to the test's log.
type logWriter struct {
	t    *testing.T
	role string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s: %s", w.role, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The founding story in Python: 30 paid invoices, each sent 3 times by
// Stripe, through a real gateway to the web app (invoices.py web, which
// checks oncehook's signature over the raw bytes), whose queue hands every
// task to whichever of two worker processes sees it, both at once as often
// as not: the model bills 30 summaries, one per invoice, and the ledger
// holds 30 done effects.
func TestEachPaidInvoiceIsSummarizedOnceByTwoPythonWorkers(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is needed under CI")
		}
		t.Skip("no python3")
	}
	const n = 30
	m := &model{billed: map[string]int{}}
	modelSrv := httptest.NewServer(m)
	defer modelSrv.Close()
	// The gateway delivers to the web app through this front, which learns
	// the app's address once it has started.
	var target atomic.Pointer[url.URL]
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := target.Load(); u != nil {
			httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
			return
		}
		http.Error(w, "not yet", http.StatusServiceUnavailable)
	}))
	defer front.Close()
	const secret = "whsec_ZXhhbXBsZXMtcHl0aG9uLXNlY3JldA=="
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_stripe], destinations: [app]}
destinations:
  - {name: app, url: `+front.URL+`, secret: "`+secret+`", retry: {base_delay: 50ms, max_delay: 200ms}}
`)
	client, err := filepath.Abs("../../clients/python/src")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PYTHONPATH=" + client, "QUEUE_DIR=" + t.TempDir(), "MODEL_URL=" + modelSrv.URL,
		"WEBHOOK_SECRET=" + secret, "LISTEN=127.0.0.1:0", "ONCEHOOK_API=" + gw.APIURL, "ONCEHOOK_API_TOKEN=" + gw.APIToken}
	web := python(t, env, "web")
	select {
	case line := <-web:
		u, err := url.Parse(line[strings.Index(line, "http://"):])
		if err != nil || !strings.HasPrefix(line, "web: listening on ") {
			t.Fatalf("web said %q", line)
		}
		target.Store(u)
	case <-time.After(30 * time.Second):
		t.Fatal("the web app did not start")
	}
	var ran sync.Map // event id -> the workers whose summarize returned it
	for range 2 {
		lines := python(t, env, "worker")
		go func() {
			for line := range lines {
				var got struct {
					Worker  int    `json:"worker"`
					EventID string `json:"event_id"`
				}
				if json.Unmarshal([]byte(line), &got) == nil && got.EventID != "" {
					v, _ := ran.LoadOrStore(got.EventID, new(atomic.Int32))
					v.(*atomic.Int32).Add(1)
				}
			}
		}()
	}

	storm := testenv.NewStorm(16)
	for i := range n {
		body := []byte(fmt.Sprintf(`{"id":"evt_py_%03d","object":"event","type":"invoice.paid","data":{"object":{"customer":"cus_%d","amount_paid":%d}}}`, i, i%7, 1000+i))
		for range 3 {
			storm.Go(func() {
				resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_stripe", body, ""))
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("intake: %v %v", resp, err)
					return
				}
				resp.Body.Close()
			})
		}
	}
	storm.Wait()
	ctx := context.Background()
	done := func() int {
		st, _ := gw.Store().Stats(ctx)
		return int(st.Effects[store.EffectDone])
	}
	if !testenv.WaitFor(60*time.Second, func() bool { return done() == n }) {
		t.Fatalf("%d of %d summaries done", done(), n)
	}
	time.Sleep(500 * time.Millisecond) // a worker that waited on a key reports it
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.billed) != n {
		t.Fatalf("the model billed %d invoices, want %d", len(m.billed), n)
	}
	for key, c := range m.billed {
		if c != 1 {
			t.Errorf("%s billed %d times", key, c)
		}
	}
	both := 0
	ran.Range(func(_, v any) bool {
		if v.(*atomic.Int32).Load() > 1 {
			both++
		}
		return true
	})
	st, _ := gw.Store().Stats(ctx)
	if st.Events != n {
		t.Errorf("%d events stored, want %d (Stripe's resends are duplicates)", st.Events, n)
	}
	t.Logf("%d invoices, each billed once; %d tasks run by both workers (the second got the stored summary)", n, both)
}

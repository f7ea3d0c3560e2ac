package oncehook_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// A gateway in front of a service: the same Stripe event sent twice is
// accepted once, answered "duplicate" once, and delivered once, carrying its
// key as Idempotency-Key.
func Example() {
	delivered := make(chan string, 10)
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered <- r.Header.Get("Idempotency-Key")
	}))
	defer service.Close()

	dir, _ := os.MkdirTemp("", "oncehook-example")
	defer os.RemoveAll(dir)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
store: sqlite://%s
sources:
  - name: stripe
    preset: stripe
    secrets: ["whsec_example"]
    destinations: [service]
destinations:
  - name: service
    url: %s
`, filepath.Join(dir, "oncehook.db"), service.URL)), os.LookupEnv)
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	gw, err := oncehook.New(ctx, cfg, oncehook.Options{
		// The kinds this program uses: its build holds no other client
		// (the binary passes kinds.All()).
		Kinds: oncehook.Kinds{Stores: []store.Kind{sqlite.Kind()}},
	})
	if err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error)
	go func() { done <- gw.Serve(ctx, ln) }()

	// Sign the event the way Stripe does, and send it twice.
	stripe, _ := provider.New("stripe", provider.Options{Secrets: []string{"whsec_example"}})
	body := `{"id":"evt_123","object":"event","type":"invoice.paid"}`
	for range 2 {
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/in/stripe", strings.NewReader(body))
		provider.SignHTTP(stripe, req, []byte(body), "whsec_example", time.Now(), "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(answer))
	}
	fmt.Println("delivered with Idempotency-Key:", <-delivered)

	stop()
	<-done
	// Output:
	// 200 {"status":"accepted","events":[{"key":"evt_123","status":"accepted"}]}
	// 200 {"status":"duplicate","events":[{"key":"evt_123","status":"duplicate"}]}
	// delivered with Idempotency-Key: stripe:evt_123
}

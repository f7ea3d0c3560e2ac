package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/store/sqlite"
)

// A payments endpoint that a retried POST charges once.
func Example() {
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(context.Background(), filepath.Join(dir, "oncehook.db"), sqlite.Options{})
	defer st.Close()

	charges := 0
	payments := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d}`, charges)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", idempotency.New(effect.New(st, effect.Options{}), idempotency.Options{Name: "payments", RequireKey: true})(payments))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for range 2 { // the app timed out and sent it again
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(`{"amount":4990}`))
		req.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		req.Header.Set("Authorization", "Bearer shop-1") // the key is this client's
		resp, _ := http.DefaultClient.Do(req)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201 {"charge":1} replayed: false
	// 201 {"charge":1} replayed: true
	// charges: 1
}

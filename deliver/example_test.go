package deliver_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/oncehook/oncehook/provider"
)

// A destination with a secret gets Standard Webhooks signatures from
// oncehook, so its handler verifies deliveries with the standard-webhooks
// preset (or any Standard Webhooks library), and dedupes on
// Idempotency-Key.
func Example_verifyADelivery() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the destination's `secret:` in oncehook.yaml
	verifier, _ := provider.New("standard-webhooks", provider.Options{Secrets: []string{secret}})

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Verify(&provider.Request{Header: r.Header, Body: body}, time.Now()); err != nil {
			http.Error(w, "not from oncehook", http.StatusUnauthorized) // 401: oncehook will not retry
			return
		}
		fmt.Println("verified delivery", r.Header.Get("Idempotency-Key"), "attempt", r.Header.Get("X-Oncehook-Attempt"))
	})

	// What oncehook sends (built here by hand; in production the worker does).
	body := []byte(`{"id":"evt_1","object":"event"}`)
	req := httptest.NewRequest(http.MethodPost, "/webhooks", nil)
	key, _ := provider.DecodeStandardSecret(secret)
	now := time.Now()
	req.Header.Set("Idempotency-Key", "stripe:evt_1")
	req.Header.Set("X-Oncehook-Attempt", "1")
	req.Header.Set("webhook-id", "msg_0123")
	req.Header.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
	req.Header.Set("webhook-signature", provider.SignStandard(key, "msg_0123", now, body))
	req.Body = io.NopCloser(bytes.NewReader(body))
	handler.ServeHTTP(httptest.NewRecorder(), req)
	// Output:
	// verified delivery stripe:evt_1 attempt 1
}

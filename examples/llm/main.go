// Command llm is the founding story's AI workflow behind oncehook: a
// Stripe invoice.paid webhook arrives through the gateway, and this
// service summarizes it with a model API that costs money per token. A
// resend, a replay, a deploy that kills a worker midway, or a retry of the
// call itself must never pay for the same summary twice.
//
// The business key is llm-summary:<event id>. The service claims it in
// oncehook's effects ledger (effect.Do, which renews the lease while the
// call runs), calls the model with the key as its Idempotency-Key (so a
// call made by an owner that died before it could record the result is
// answered, not billed, when the next owner repeats it), and retries the
// call as effect.Retry says: backoff with jitter, the model's Retry-After
// on a 429, no retry on another 4xx.
//
//	ONCEHOOK_API=http://127.0.0.1:8081 ONCEHOOK_API_TOKEN=... \
//	MODEL_URL=http://127.0.0.1:9200 LISTEN=127.0.0.1:9000 go run ./examples/llm
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/effect"
)

// Service summarizes each paid invoice once.
type Service struct {
	Ledger effect.Ledger
	Model  string // the model API's base URL
	HTTP   *http.Client
	Retry  effect.Retry
	Lease  time.Duration // how long a worker owns a key while it calls (default 30s)
	// crash, in tests, kills an owner after the model answered and before
	// the result is recorded (the worst moment): no complete, no answer.
	crash func(key string) bool
}

// errCrashed is a test's simulated crash.
var errCrashed = errors.New("llm: the owner died")

// ServeHTTP receives one oncehook delivery.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			Object struct {
				Customer string `json:"customer"`
				Amount   int    `json:"amount_paid"`
			} `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ev); err != nil || ev.ID == "" {
		http.Error(w, "not a Stripe event", http.StatusUnprocessableEntity)
		return
	}
	key := "llm-summary:" + ev.ID
	prompt := fmt.Sprintf("invoice %s paid by %s: %d", ev.ID, ev.Data.Object.Customer, ev.Data.Object.Amount)
	lease := s.Lease
	if lease <= 0 {
		lease = 30 * time.Second
	}
	result, _, err := effect.Do(r.Context(), s.Ledger, key, effect.ClaimOptions{Lease: lease},
		func(ctx context.Context, c effect.Claim) (json.RawMessage, error) {
			res, err := s.Retry.Run(ctx, func(ctx context.Context, _ int) (json.RawMessage, error) { return s.complete(ctx, key, prompt) })
			if err == nil && s.crash != nil && s.crash(key) {
				return nil, errCrashed
			}
			return res, err
		})
	var busy *effect.BusyError
	switch {
	case errors.Is(err, errCrashed):
		panic(http.ErrAbortHandler) // the process died: no answer at all
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", "1")
		http.Error(w, "another worker is summarizing this event", http.StatusServiceUnavailable) // oncehook retries
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write(result)
	}
}

// complete calls the model once, sorting its answer into what Retry does
// with it.
func (s *Service) complete(ctx context.Context, key, prompt string) (json.RawMessage, error) {
	body, _ := json.Marshal(map[string]string{"prompt": prompt})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Model+"/v1/complete", bytes.NewReader(body))
	if err != nil {
		return nil, effect.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key) // the same key downstream: a repeat is answered, not billed
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return nil, err // a timeout, a cut connection: retried
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusOK:
		return json.RawMessage(bytes.TrimSpace(out)), nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusConflict:
		after, _ := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64)
		return nil, effect.AfterError(fmt.Errorf("model: HTTP %d", resp.StatusCode), time.Duration(after*float64(time.Second)))
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("model: HTTP %d", resp.StatusCode)
	}
	return nil, effect.Permanent(fmt.Errorf("model: HTTP %d: %s", resp.StatusCode, out)) // another 4xx: no retry fixes it
}

func main() {
	s := &Service{
		Ledger: effect.NewClient(os.Getenv("ONCEHOOK_API"), os.Getenv("ONCEHOOK_API_TOKEN"), nil),
		Model:  os.Getenv("MODEL_URL"),
		HTTP:   &http.Client{Timeout: 30 * time.Second},
	}
	addr := os.Getenv("LISTEN")
	if addr == "" {
		addr = "127.0.0.1:9000"
	}
	log.Printf("llm: summarizing paid invoices at http://%s", addr)
	log.Fatal(http.ListenAndServe(addr, s))
}

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FakeModel is a model API that bills per token, as the paid ones do, and
// misbehaves as they do: 429 with Retry-After, 500, and slow answers. It
// honours Idempotency-Key, as payment APIs do: a repeated key gets the
// first completion back, and is not billed again. (It ships with the
// example: there is no network here.)
type FakeModel struct {
	// Fail decides an answer before the model runs: 0 (answer), 429 or 500.
	Fail func(n int64) int
	Slow time.Duration // every completion takes this long

	calls    atomic.Int64
	mu       sync.Mutex
	done     map[string]string // Idempotency-Key → completion
	billed   int64             // completions billed
	tokens   int64             // tokens billed
	byKey    map[string]int    // billed completions per key
	inFlight map[string]bool
}

// NewFakeModel returns a model that never fails.
func NewFakeModel() *FakeModel {
	return &FakeModel{done: map[string]string{}, byKey: map[string]int{}, inFlight: map[string]bool{}}
}

// Billed is how many completions and tokens were billed, and the most any
// one key was billed.
func (m *FakeModel) Billed() (completions, tokens int64, mostPerKey int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.byKey {
		mostPerKey = max(mostPerKey, n)
	}
	return m.billed, m.tokens, mostPerKey
}

func (m *FakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := m.calls.Add(1)
	if m.Fail != nil {
		switch m.Fail(n) {
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "0.02") // seconds; fractions, as some model APIs send them
			http.Error(w, `{"error":"rate limited"}`, http.StatusTooManyRequests)
			return
		case http.StatusInternalServerError:
			http.Error(w, `{"error":"overloaded"}`, http.StatusInternalServerError)
			return
		}
	}
	var req struct {
		Prompt string `json:"prompt"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Prompt == "" {
		http.Error(w, `{"error":"no prompt"}`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	m.mu.Lock()
	if c, ok := m.done[key]; ok && key != "" {
		m.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"completion": c, "replayed": true})
		return
	}
	if m.inFlight[key] && key != "" {
		m.mu.Unlock()
		w.Header().Set("Retry-After", "0.05")
		http.Error(w, `{"error":"a request with this key is in progress"}`, http.StatusConflict)
		return
	}
	m.inFlight[key] = true
	m.mu.Unlock()
	time.Sleep(m.Slow)
	completion := fmt.Sprintf("Summary of %q: paid.", req.Prompt)
	tokens := int64(len(strings.Fields(req.Prompt)) + len(strings.Fields(completion)))
	m.mu.Lock()
	delete(m.inFlight, key)
	m.done[key] = completion
	m.billed++
	m.tokens += tokens
	m.byKey[key]++
	m.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"completion": completion, "tokens": tokens})
}

// Command reminder is a destination service behind oncehook: it receives
// oncehook's deliveries of appointment events and sends a WhatsApp reminder
// once per appointment and step, however many times a delivery arrives (a
// retry, a replay, the same event from two sources) and even when a previous
// run died halfway.
//
// The business key is "reminder:<appointment>:<step>". Before sending, the
// service claims it in oncehook's effects ledger (over the gateway's API).
// A claim that is told it is a reclaim (the previous owner's lease expired:
// it crashed after claiming) first asks the messaging API whether the
// message went out, by the same key, and sends only if it did not.
//
//	ONCEHOOK_API=http://127.0.0.1:8081 ONCEHOOK_API_TOKEN=... \
//	MESSAGING_URL=http://127.0.0.1:9100 LISTEN=127.0.0.1:9000 go run ./examples/reminder
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
	"net/url"
	"os"
	"time"

	"github.com/oncehook/oncehook/effect"
)

// Appointment is the event this service receives (the body oncehook
// delivers).
type Appointment struct {
	ID    string `json:"appointment_id"`
	Step  string `json:"step"` // 24h, 1h, ...
	Phone string `json:"phone"`
	Text  string `json:"text"`
}

// Service sends reminders once.
type Service struct {
	Ledger    effect.Ledger
	Messaging string // the messaging API's base URL
	HTTP      *http.Client
	Lease     time.Duration
	// crash, in tests, stops an owner at a point ("claimed", "sent") as a
	// killed process would: no release, no complete, no answer.
	crash func(key, point string) bool
}

// ErrCrashed is what a test's simulated crash returns.
var ErrCrashed = errors.New("reminder: the owner died")

// ServeHTTP receives one oncehook delivery.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var a Appointment
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&a); err != nil || a.ID == "" || a.Step == "" {
		http.Error(w, "not an appointment event", http.StatusUnprocessableEntity) // permanent: oncehook dead-letters it
		return
	}
	err := s.Remind(r.Context(), a)
	var busy *effect.BusyError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusOK)
	case errors.As(err, &busy):
		// Someone else is sending it right now: oncehook retries later.
		w.Header().Set("Retry-After", fmt.Sprint(max(1, int(time.Until(busy.RetryAfter).Seconds())+1)))
		http.Error(w, "in progress elsewhere", http.StatusServiceUnavailable)
	case errors.Is(err, effect.ErrFailed):
		w.WriteHeader(http.StatusOK) // failed for good: nothing a retry can do
	default:
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
}

// Remind sends a's reminder once.
func (s *Service) Remind(ctx context.Context, a Appointment) error {
	key := "reminder:" + a.ID + ":" + a.Step
	c, err := s.Ledger.Claim(ctx, key, effect.ClaimOptions{Lease: s.Lease})
	if err != nil {
		return err
	}
	if c.AlreadyDone {
		return nil // sent before; c.Result says which message
	}
	if s.crash != nil && s.crash(key, "claimed") {
		return ErrCrashed
	}
	var result json.RawMessage
	if c.Reclaimed {
		// A previous owner stopped halfway: it may have sent already.
		result, err = s.lookup(ctx, key)
		if err != nil {
			s.Ledger.Release(context.WithoutCancel(ctx), key, c.Token, err.Error())
			return err
		}
	}
	if result == nil {
		if result, err = s.send(ctx, key, a); err != nil {
			s.Ledger.Release(context.WithoutCancel(ctx), key, c.Token, err.Error())
			return err
		}
	}
	if s.crash != nil && s.crash(key, "sent") {
		return ErrCrashed
	}
	return s.Ledger.Complete(context.WithoutCancel(ctx), key, c.Token, result)
}

// send posts the message, tagged with the business key (WhatsApp's
// biz_opaque_callback_data comes back in its status webhooks).
func (s *Service) send(ctx context.Context, key string, a Appointment) (json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{"messaging_product": "whatsapp", "to": a.Phone, "type": "text",
		"text": map[string]string{"body": a.Text}, "biz_opaque_callback_data": key})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Messaging+"/messages", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("messaging API: %d %s", resp.StatusCode, out)
	}
	return out, nil
}

// lookup asks the messaging API whether a message with key went out, and
// returns it (nil when none did).
func (s *Service) lookup(ctx context.Context, key string) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Messaging+"/messages?biz_opaque_callback_data="+url.QueryEscape(key), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("messaging API lookup: %d %s", resp.StatusCode, out)
	}
	return out, nil
}

func main() {
	s := &Service{
		Ledger:    effect.NewClient(os.Getenv("ONCEHOOK_API"), os.Getenv("ONCEHOOK_API_TOKEN"), nil),
		Messaging: os.Getenv("MESSAGING_URL"),
		HTTP:      &http.Client{Timeout: 10 * time.Second},
		Lease:     30 * time.Second,
	}
	listen := os.Getenv("LISTEN")
	if listen == "" {
		listen = "127.0.0.1:9000"
	}
	log.Printf("reminder: listening on %s, deliveries at POST /webhooks", listen)
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks", s)
	log.Fatal(http.ListenAndServe(listen, mux))
}

// Command capi reports purchases to Meta's Conversions API once per order,
// from Hotmart's purchase webhooks delivered by oncehook.
//
// Hotmart sends PURCHASE_APPROVED and then PURCHASE_COMPLETE for the same
// order (and resends either, by hand, days later); an operator may replay
// an event from oncehook's store. Each is a different event, rightly
// delivered, but Meta must count one Purchase. So the business key is the
// order, "capi:Purchase:<transaction>", claimed in oncehook's effects ledger
// before the Conversions API is called, and the same key is the event_id
// Meta dedupes on: a repeat that gets past the ledger (a crash between
// Meta's answer and Complete) is still one conversion there.
//
//	ONCEHOOK_API=http://127.0.0.1:8081 ONCEHOOK_API_TOKEN=... \
//	CAPI_URL=https://graph.facebook.com/v21.0/<pixel>/events?access_token=... LISTEN=127.0.0.1:9001 go run ./examples/capi
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/oncehook/oncehook/effect"
)

// hotmartEvent is the part of Hotmart's webhook (postback 2.0.0) this
// reporter reads.
type hotmartEvent struct {
	ID           string `json:"id"`
	Event        string `json:"event"`
	CreationDate int64  `json:"creation_date"` // unix ms
	Data         struct {
		Buyer struct {
			Email string `json:"email"`
		} `json:"buyer"`
		Purchase struct {
			Transaction string `json:"transaction"`
			Price       struct {
				Value    float64 `json:"value"`
				Currency string  `json:"currency_value"`
			} `json:"price"`
		} `json:"purchase"`
	} `json:"data"`
}

// Reporter sends one Purchase per order.
type Reporter struct {
	Ledger effect.Ledger
	CAPI   string // the Conversions API endpoint, with its access token
	HTTP   *http.Client
}

// ServeHTTP receives one oncehook delivery of a Hotmart webhook.
func (rp *Reporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev hotmartEvent
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ev); err != nil {
		http.Error(w, "not a Hotmart webhook", http.StatusUnprocessableEntity)
		return
	}
	if ev.Event != "PURCHASE_APPROVED" && ev.Event != "PURCHASE_COMPLETE" || ev.Data.Purchase.Transaction == "" {
		w.WriteHeader(http.StatusOK) // not a sale: nothing to report
		return
	}
	err := rp.Report(r.Context(), ev)
	var busy *effect.BusyError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusOK)
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", "2")
		http.Error(w, "being reported elsewhere", http.StatusServiceUnavailable)
	case errors.Is(err, effect.ErrExpired):
		w.WriteHeader(http.StatusOK) // past Meta's window: reporting now would be refused
	default:
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
}

// Report sends ev's order to the Conversions API once.
func (rp *Reporter) Report(ctx context.Context, ev hotmartEvent) error {
	key := "capi:Purchase:" + ev.Data.Purchase.Transaction
	sold := time.UnixMilli(ev.CreationDate)
	if ev.CreationDate == 0 {
		sold = time.Now()
	}
	// Meta rejects events older than 7 days: past that, the claim expires.
	opts := effect.ClaimOptions{Lease: 30 * time.Second, Deadline: sold.Add(7 * 24 * time.Hour)}
	_, _, err := effect.Do(ctx, rp.Ledger, key, opts, func(ctx context.Context, c effect.Claim) (json.RawMessage, error) {
		email := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(ev.Data.Buyer.Email))))
		body, _ := json.Marshal(map[string]any{"data": []map[string]any{{
			"event_name": "Purchase", "event_time": sold.Unix(), "event_id": key, "action_source": "website",
			"user_data":   map[string]any{"em": []string{hex.EncodeToString(email[:])}},
			"custom_data": map[string]any{"value": ev.Data.Purchase.Price.Value, "currency": ev.Data.Purchase.Price.Currency, "order_id": ev.Data.Purchase.Transaction},
		}}})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, rp.CAPI, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := rp.HTTP.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		switch {
		case resp.StatusCode == http.StatusBadRequest:
			return nil, effect.Permanent(fmt.Errorf("conversions API refused it: %s", out))
		case resp.StatusCode/100 != 2:
			return nil, fmt.Errorf("conversions API: %d %s", resp.StatusCode, out)
		}
		return out, nil
	})
	return err
}

func main() {
	rp := &Reporter{
		Ledger: effect.NewClient(os.Getenv("ONCEHOOK_API"), os.Getenv("ONCEHOOK_API_TOKEN"), nil),
		CAPI:   os.Getenv("CAPI_URL"),
		HTTP:   &http.Client{Timeout: 20 * time.Second},
	}
	listen := os.Getenv("LISTEN")
	if listen == "" {
		listen = "127.0.0.1:9001"
	}
	log.Printf("capi: listening on %s, deliveries at POST /webhooks", listen)
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks", rp)
	log.Fatal(http.ListenAndServe(listen, mux))
}

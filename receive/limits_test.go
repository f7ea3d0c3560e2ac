package receive_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncehook/oncehook/receive"
)

func TestLimitsDefaultsAndRefusals(t *testing.T) {
	for _, c := range []struct {
		body, inflight, wantBody, wantInflight int64
		refused                                bool
	}{
		{0, 0, 5 << 20, 64 << 20, false},
		{100 << 20, 0, 100 << 20, 100 << 20, false}, // the budget never below one body
		{1 << 20, 2 << 20, 1 << 20, 2 << 20, false},
		{0, 1 << 20, 5 << 20, 1 << 20, true},
	} {
		b, i, err := receive.Limits(c.body, c.inflight)
		if b != c.wantBody || i != c.wantInflight || (err != nil) != c.refused {
			t.Errorf("Limits(%d, %d) = %d, %d, %v", c.body, c.inflight, b, i, err)
		}
	}
}

// The bodies the Idempotency-Key proxy holds whole are read on intake's
// terms: a body that trickles is cut at the pace floor, and the APIs'
// bodies together never hold more than their share of the in-flight
// budget (half of it): one more waits, then is refused.
func TestReadBodyKeepsIntakesBudgetAndPace(t *testing.T) {
	h := receive.New(receive.Options{MaxBodySize: 256 << 10, MaxInflightBytes: 1 << 20, InflightWait: 200 * time.Millisecond,
		BodyGrace: 300 * time.Millisecond, MinBodyRate: 64 << 10})
	results := make(chan error, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, done, err := h.ReadBody(w, r, 256<<10)
		results <- err
		if err != nil {
			w.WriteHeader(599)
			return
		}
		<-release // the upstream works: the body stays held
		done()
		fmt.Fprint(w, len(body))
	}))
	defer srv.Close()
	defer close(release)
	send := func(body io.Reader, size int64) {
		req, _ := http.NewRequest("POST", srv.URL, body)
		req.ContentLength = size
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// Half of 1 MiB is 512 KiB: two whole bodies of 256 KiB fill it.
	for range 2 {
		send(bytes.NewReader(make([]byte, 256<<10)), 256<<10)
		if err := <-results; err != nil {
			t.Fatalf("a body within the share: %v", err)
		}
	}
	for _, size := range []int64{1, 64 << 10, 256 << 10} {
		send(bytes.NewReader(make([]byte, size)), size)
		if err := <-results; !errors.Is(err, receive.ErrOverloaded) {
			t.Fatalf("a %d-byte body past the APIs' share: %v; want ErrOverloaded", size, err)
		}
	}
	// A body over the limit, and one that trickles.
	send(bytes.NewReader(make([]byte, 300<<10)), 300<<10)
	var tooLarge *http.MaxBytesError
	if err := <-results; !errors.As(err, &tooLarge) {
		t.Fatalf("a body over the limit: %v", err)
	}
	h2 := receive.New(receive.Options{BodyGrace: 300 * time.Millisecond, MinBodyRate: 64 << 10})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, err := h2.ReadBody(w, r, 1<<20)
		results <- err
	}))
	defer slow.Close()
	pr, pw := io.Pipe()
	go func() {
		for range 20 {
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", slow.URL, pr)
	req.ContentLength = 20
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case err := <-results:
		if !errors.Is(err, receive.ErrSlowBody) {
			t.Fatalf("a trickling body: %v; want ErrSlowBody", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a trickling body was never cut")
	}
}

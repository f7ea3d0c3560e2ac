package receive_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store/sqlite"
)

// budgetServer is intake over real HTTP, with one github source and a
// budget of budget bytes (also the body limit).
func budgetServer(t *testing.T, budget int64) *httptest.Server {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := provider.New("github", provider.Options{Secrets: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	h := receive.New(receive.Options{
		Sources:     []receive.Source{{Name: "gh", Preset: p, Window: time.Hour}},
		Claimer:     &countingClaimer{Store: st},
		MaxBodySize: budget, MaxInflightBytes: budget,
	})
	mux := http.NewServeMux()
	mux.Handle("POST /in/{source}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// heldBody opens a connection that announces size bytes, sends sent of
// them and stalls; the answer's status line arrives on the channel.
func heldBody(t *testing.T, srv *httptest.Server, size, sent int) <-chan string {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /in/gh HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: %d\r\n\r\n", size)
	c.Write(bytes.Repeat([]byte(" "), sent))
	answer := make(chan string, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		r := bufio.NewReader(c)
		line, err := r.ReadString('\n')
		if err != nil {
			answer <- "no answer: " + err.Error()
			return
		}
		rest, _ := r.ReadString(0) // the headers and body, until the server closes
		answer <- strings.TrimSpace(line) + "\n" + rest
	}()
	return answer
}

func signedPost(t *testing.T, srv *httptest.Server, delivery string) int {
	t.Helper()
	body := []byte(`{"action":"opened"}`)
	p, _ := provider.New("github", provider.Options{Secrets: []string{"s"}})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/in/gh", bytes.NewReader(body))
	provider.SignHTTP(p, req, body, "s", time.Now(), delivery)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Invariant 17: a body still arriving that holds the whole budget is cut
// when a signed request needs room: the signed one gets 200 at once, the
// cut one 503 with Retry-After and its connection closed. Before, the
// signed request waited a second and got 503. Swept over how much of its
// body the held one had sent (its buffer is then half to all the budget).
func TestABodyStillArrivingIsCutToMakeRoom(t *testing.T) {
	const budget = 64 << 10
	for _, sent := range []int{33 << 10, 40 << 10, 63 << 10} {
		srv := budgetServer(t, budget)
		held := heldBody(t, srv, budget, sent)
		time.Sleep(200 * time.Millisecond) // its bytes are in, and held
		start := time.Now()
		if code := signedPost(t, srv, fmt.Sprint("d-", sent)); code != http.StatusOK {
			t.Fatalf("sent %d of the held body: a signed request beside it got %d, want 200", sent, code)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("sent %d: the signed request took %v: it waited for room", sent, took)
		}
		select {
		case a := <-held:
			if !strings.HasPrefix(a, "HTTP/1.1 503") || !strings.Contains(a, "Retry-After: 1") ||
				!strings.Contains(a, "Connection: close") || !strings.Contains(a, `"reason":"overloaded"`) {
				t.Errorf("sent %d: the cut body was answered %q, want 503 overloaded, Retry-After, Connection: close", sent, a)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("sent %d: the held body was not cut", sent)
		}
	}
}

// A body's last byte is read uncut, so it may take at most a second once
// the others are in: stalling there holds memory no longer (before, the
// pace's 10 s grace and more). A small signed request beside it is still
// answered.
func TestABodyStalledOnItsLastByteIsCutAfterASecond(t *testing.T) {
	const budget = 64 << 10
	srv := budgetServer(t, budget)
	start := time.Now()
	held := heldBody(t, srv, 8<<10, 8<<10-1)
	select {
	case a := <-held:
		if !strings.HasPrefix(a, "HTTP/1.1 408") {
			t.Errorf("a body stalled on its last byte was answered %q, want 408", a)
		}
		if took := time.Since(start); took < 900*time.Millisecond || took > 4*time.Second {
			t.Errorf("cut after %v, want after about a second", took)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("a body stalled on its last byte was held past 8 s")
	}
}

// A Stream reserves as a connection reads its messages' bodies: within the source's share, beside what
// Hold reserved for the messages already handed over; with no room it waits (its reader stops, and the
// broker keeps the rest) until a message gives its room back; Split hands each message its own, which
// Release gives back apart; and Release gives back what the stream still holds.
func TestAStreamReservesAsItReadsAndHandsEachMessageItsOwn(t *testing.T) {
	h := receive.New(receive.Options{Sources: []receive.Source{{Name: "q"}}, MaxBodySize: 1 << 20, MaxInflightBytes: 2 << 20})
	ctx := context.Background()
	first, err := h.Hold(ctx, "q", 1<<20)
	if err != nil || first.Size() != 1<<20 {
		t.Fatalf("hold: %v %d", err, first.Size())
	}
	s := h.Stream("q")
	if !s.Fits(1<<20) || s.Fits(1<<20+1) || s.Fits(0) || (&receive.Held{}).Fits(10) {
		t.Fatal("Fits: a message of 1 byte to max_body_size is counted, no other, and nothing without a budget")
	}
	if err := s.Grow(ctx, 700<<10); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := s.Grow(wait, 700<<10); err == nil {
		t.Fatal("grew past the source's 2 MiB")
	}
	grew := make(chan error, 1)
	go func() { grew <- s.Grow(ctx, 700<<10) }()
	msg := s.Split(700 << 10)
	if msg.Size() != 700<<10 {
		t.Fatalf("split %d", msg.Size())
	}
	first.Release()
	select {
	case err := <-grew:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a message's room given back did not let the stream grow")
	}
	// Now the stream holds 700 KiB and msg 700 KiB: 1.4 MiB of 2.
	soon, cancelSoon := context.WithTimeout(ctx, time.Second)
	defer cancelSoon()
	beside, err := h.Hold(soon, "q", 500<<10)
	if err != nil {
		t.Fatalf("room for a message beside them: %v", err)
	}
	beside.Release()
	msg.Release()
	s.Release()
	full, err := h.Hold(ctx, "q", 1<<20)
	if err != nil || full.Size() != 1<<20 {
		t.Fatalf("after every release: %v", err)
	}
}

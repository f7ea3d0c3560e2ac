// Package metacapi is a stand-in of Meta's Conversions API for the
// examples' tests, which report purchases there: it counts every event it
// receives per event name and event_id. Meta would dedupe them; the count
// says whether they were sent at all, so a test can prove "once".
package metacapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is the stand-in, listening until the test ends.
type Server struct {
	*httptest.Server
	failEvery int // every failEvery-th request is a 500; 0 fails none
	mu        sync.Mutex
	n         int
	events    map[string]int
}

// New starts a stand-in that answers as Meta does, except that every
// failEvery-th request (when failEvery > 0) gets a 500, as an API does
// under load, and counts nothing: the sender must retry it.
func New(t testing.TB, failEvery int) *Server {
	m := &Server{failEvery: failEvery, events: map[string]int{}}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *Server) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Data []struct {
			EventName string `json:"event_name"`
			EventID   string `json:"event_id"`
		} `json:"data"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n++; m.failEvery > 0 && m.n%m.failEvery == 0 {
		http.Error(w, `{"error":{"message":"try again"}}`, http.StatusInternalServerError)
		return
	}
	for _, e := range body.Data {
		m.events[e.EventName+" "+e.EventID]++
	}
	fmt.Fprint(w, `{"events_received":1,"fbtrace_id":"AbC"}`)
}

// Events returns how many times each "<event_name> <event_id>" arrived.
func (m *Server) Events() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.events))
	for k, v := range m.events {
		out[k] = v
	}
	return out
}

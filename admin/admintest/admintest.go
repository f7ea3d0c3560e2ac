// Package admintest holds what the drift tests of the operator's
// transports share: an API that answers every action of the table
// (admin.Actions) and records which were called, so that a test can say
// that a client or a command calls its own action's route.
package admintest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/oncehook/oncehook/admin"
)

// API is a server that answers every action's route with an empty JSON
// object.
type API struct {
	URL string

	mu  sync.Mutex
	hit []string
}

// NewAPI starts an API, closed when t ends.
func NewAPI(t testing.TB) *API {
	api := &API{}
	mux := http.NewServeMux()
	for _, a := range admin.Actions() {
		mux.HandleFunc(a.Route.Pattern(), func(w http.ResponseWriter, r *http.Request) {
			api.mu.Lock()
			api.hit = append(api.hit, a.Name)
			api.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("{}"))
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	api.URL = srv.URL
	return api
}

// Take returns the names of the actions called since the last Take, in
// order, and forgets them.
func (api *API) Take() []string {
	api.mu.Lock()
	defer api.mu.Unlock()
	hit := api.hit
	api.hit = nil
	return hit
}

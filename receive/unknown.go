package receive

import (
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/internal/metrics"
)

// UnknownSource is a source name that requests asked for and the config
// does not have (see metrics.RecentUnknownSource). The names are kept in memory
// (the last maxUnknown, on this replica) and never become metric labels:
// strangers choose them.
type UnknownSource = metrics.RecentUnknownSource

// maxUnknown bounds the names kept; maxUnknownName the bytes kept of one.
const (
	maxUnknown     = 20
	maxUnknownName = 64
)

// unknownSources keeps the recent unknown names and paces their log lines:
// at most one a second, the next one saying how many were not logged.
type unknownSources struct {
	mu         sync.Mutex
	names      map[string]*UnknownSource
	lastLog    time.Time
	suppressed int
}

func newUnknownSources() *unknownSources { return &unknownSources{names: map[string]*UnknownSource{}} }

// seen records a request for name at now, and reports whether to log it,
// and how many were not logged since the last line.
func (u *unknownSources) seen(name string, now time.Time) (log bool, suppressed int) {
	if len(name) > maxUnknownName {
		name = bounded(name)[:maxUnknownName] + "…"
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.names[name]
	if e == nil {
		if len(u.names) >= maxUnknown {
			var oldest string
			for n, x := range u.names {
				if oldest == "" || x.Last.Before(u.names[oldest].Last) {
					oldest = n
				}
			}
			delete(u.names, oldest)
		}
		e = &UnknownSource{Name: name}
		u.names[name] = e
	}
	e.Count++
	e.Last = now
	return u.paceLocked(now)
}

// pace reports whether a rejection at now may be logged (one a second),
// and how many were not logged since the last line.
func (u *unknownSources) pace(now time.Time) (log bool, suppressed int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.paceLocked(now)
}

func (u *unknownSources) paceLocked(now time.Time) (bool, int) {
	if now.Sub(u.lastLog) < time.Second {
		u.suppressed++
		return false, 0
	}
	suppressed := u.suppressed
	u.lastLog, u.suppressed = now, 0
	return true, suppressed
}

func (u *unknownSources) list() []UnknownSource {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]UnknownSource, 0, len(u.names))
	for _, e := range u.names {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	return out
}

// UnknownSources lists the source names requests asked for lately that the
// config does not have, newest first (this replica's).
func (h *Handler) UnknownSources() []UnknownSource { return h.unknown.list() }

// NotFound answers a path outside /in/{source} with intake's one 404
// shape, counted (without a source) and logged at a bounded rate, as an
// unknown source is.
func (h *Handler) NotFound(w http.ResponseWriter, r *http.Request) {
	h.metrics.Request("", ReasonNotFound)
	if log, suppressed := h.unknown.pace(h.now()); log {
		h.log.Info("request rejected", "status", http.StatusNotFound, "reason", ReasonNotFound,
			"path", bounded(r.URL.Path), "client", h.client(r), "not_logged_since", suppressed)
	}
	jsonhttp.WriteJSON(w, http.StatusNotFound, ErrorResponse{Error: "nothing here: sources receive at POST /in/{source}", Reason: ReasonNotFound})
}

package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

// Invariant 13 at delivery: a destination that answers bytes no text column
// holds (NUL, invalid UTF-8) fails only itself. Its attempts are recorded,
// their answers made storable, and a healthy destination of the same events
// gets every one of them once, promptly, on both backends. Before, on
// PostgreSQL, the refused outcome was retried every second and held every
// destination's outcomes and leases with it: 191 of 600 events reached the
// healthy destination in 90 s.
func TestPoisonAnswerFailsOnlyItsDestination(t *testing.T) {
	backends := map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "sqlite://$DIR/oncehook.db" },
		"postgres": func(t *testing.T) string { return testenv.Postgres(t) },
	}
	answers := map[string]string{
		"nul":          "before\x00after",
		"invalid-utf8": "bad \xff\xfe bytes, " + strings.Repeat("é", 127) + "é", // and cut at 256 bytes mid-character
	}
	for backend, dsn := range backends {
		for name, answer := range answers {
			t.Run(backend+"/"+name, func(t *testing.T) {
				t.Parallel()
				poisonAnswer(t, dsn(t), answer)
			})
		}
	}
}

func poisonAnswer(t *testing.T, dsn, answer string) {
	healthy := testenv.NewSink(t)
	poison := testenv.NewSink(t)
	poison.Respond = func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusUnprocessableEntity) // permanent: dead at once, its answer stored
		w.Write([]byte(answer))
	}
	gw := startGateway(t, fmt.Sprintf(`
store: %q
sources:
  - {name: acme, preset: generic, unsigned: true, key: ["json:id"], destinations: [poison, app]}
destinations:
  - name: poison
    url: %s
    timeout: 2s
    retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}
  - name: app
    url: %s
    timeout: 2s
    retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}
delivery: {lease: 3s}
`, dsn, poison.URL, healthy.URL))
	// Events arrive over a second or so, as a provider sends them: the
	// poison answers come back while intake goes on.
	const events = 150
	storm := testenv.NewStorm(4)
	for i := range events {
		storm.Go(func() {
			if a := postJSON(t, gw.URL+"/in/acme", fmt.Sprintf(`{"id":"evt-%d"}`, i)); a.Status != http.StatusOK {
				t.Errorf("event %d: %d %+v", i, a.Status, a.Error)
			}
			time.Sleep(20 * time.Millisecond)
		})
	}
	storm.Wait()
	start := time.Now()
	if !testenv.WaitFor(5*time.Second, func() bool { return len(healthy.ByKey()) == events }) {
		t.Fatalf("the healthy destination got %d of %d events in 5s after intake", len(healthy.ByKey()), events)
	}
	took := time.Since(start)
	// An outcome dropped from the store's commit would be sent again when
	// its lease (3s) expires.
	time.Sleep(4 * time.Second)
	for key, n := range healthy.ByKey() {
		if n != 1 {
			t.Errorf("the healthy destination got %s %d times", key, n)
		}
	}
	// Every poison delivery is a dead letter, its attempt recorded.
	if !testenv.WaitFor(10*time.Second, func() bool {
		st, err := gw.Store().Stats(context.Background())
		return err == nil && st.Dead == events
	}) {
		st, _ := gw.Store().Stats(context.Background())
		t.Fatalf("dead letters %d, want %d (every poison delivery, its attempt recorded)", st.Dead, events)
	}
	if got := len(poison.Deliveries()); got != events {
		t.Errorf("the poison destination got %d attempts, want %d: refused outcomes were attempted again", got, events)
	}
	t.Logf("healthy destination complete %s after intake", took.Round(time.Millisecond))
}

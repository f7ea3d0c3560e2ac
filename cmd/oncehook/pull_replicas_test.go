package main_test

// A pull destination on several replicas of one PostgreSQL: a consumer's
// lease is kept in the store, so an ack is taken on any replica, a stale
// token is refused on every one, and the lease of a replica killed
// before its consumer acked is handed out again by another.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver/pull"
	"github.com/oncehook/oncehook/internal/testenv"
)

const replicaPullToken = "replica-pull-token-0123456789"

// pullReplica starts `oncehook serve` on pg with a generic source shop
// delivering to the pull destination laptop, its API on its own address.
func pullReplica(t *testing.T, pg string) (p *process, api string) {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
store: %q
api:
  listen: %s
  tokens:
    - {name: dev, token: %s, pull: [laptop]}
sources:
  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], destinations: [laptop]}
destinations:
  - {name: laptop, pull: {}, concurrency: 1, retry: {max_attempts: 20, base_delay: 10ms, max_delay: 50ms}}
`, pg, addr, replicaPullToken)
	path := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startProcess(t, dir, "--config", path), "http://" + addr
}

func postShopEvent(t *testing.T, p *process, id string) {
	t.Helper()
	resp, err := http.Post(p.URL+"/in/shop", "application/json", strings.NewReader(`{"id":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("post %s: %d", id, resp.StatusCode)
	}
}

// pullOne pulls from c until one delivery comes, within d.
func pullOne(t *testing.T, c *pull.Client, lease string, within time.Duration) pull.WireDelivery {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ds, err := c.Pull(context.Background(), "laptop", pull.PullBody{Max: 1, Lease: lease, Wait: "1s"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 {
			return ds[0]
		}
	}
	t.Fatalf("nothing pulled within %s", within)
	return pull.WireDelivery{}
}

func wantRefused(t *testing.T, what string, err error, reason string) {
	t.Helper()
	var apiErr *pull.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Body.Reason != reason {
		t.Fatalf("%s: %v, want 409 %s", what, err, reason)
	}
}

func TestPullLeaseHoldsOnEveryReplica(t *testing.T) {
	pg := testenv.Postgres(t)
	a, apiA := pullReplica(t, pg)
	b, apiB := pullReplica(t, pg)
	ca, cb := pull.NewClient(apiA, replicaPullToken, nil), pull.NewClient(apiB, replicaPullToken, nil)
	ctx := context.Background()

	// Pulled from a, acked on b: recorded once, delivered.
	postShopEvent(t, a, "ev_acked")
	d := pullOne(t, ca, "30s", 20*time.Second)
	start := time.Now()
	if ans, err := cb.Ack(ctx, d.ID, pull.AckBody{Token: d.Token, Status: 200, Latency: "2ms"}); err != nil || ans.Outcome != "delivered" {
		t.Fatalf("ack on the other replica: %+v %v, want delivered", ans, err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { st := pgStats(t, pg); return st.Delivered == 1 && st.Pending == 0 }) {
		t.Fatalf("acked on the other replica, the store says %+v", pgStats(t, pg))
	}
	t.Logf("an ack on the other replica was committed within %s", time.Since(start).Round(time.Millisecond))
	if _, err := cb.Ack(ctx, d.ID, pull.AckBody{Token: d.Token, Status: 200}); err == nil {
		t.Fatal("a second ack of the same lease on the replica that took the first was accepted")
	}
	// a frees the attempt's slot (concurrency 1) once it sees the ack in
	// the store, long before the 30s lease would have ended.
	postShopEvent(t, a, "ev_next")
	next := pullOne(t, ca, "30s", 10*time.Second)
	t.Logf("with the slot's one attempt acked on b, a handed out the next %s after that ack", time.Since(start).Round(time.Millisecond))
	if _, err := ca.Ack(ctx, next.ID, pull.AckBody{Token: next.Token, Status: 200}); err != nil {
		t.Fatal(err)
	}

	// A lease left to expire on a is handed out again (b's consumer
	// pulls it): its old token is stale on both replicas.
	postShopEvent(t, b, "ev_stale")
	old := pullOne(t, ca, "2s", 20*time.Second)
	again := pullOne(t, cb, "30s", 30*time.Second)
	if again.ID != old.ID || again.Attempt != old.Attempt+1 || again.Token == old.Token {
		t.Fatalf("after the lease expired b handed out %+v, want %s again as attempt %d", again, old.ID, old.Attempt+1)
	}
	_, errA := ca.Ack(ctx, old.ID, pull.AckBody{Token: old.Token, Status: 200})
	wantRefused(t, "the expired token on the replica that handed it out", errA, "stale_token")
	_, errB := cb.Ack(ctx, old.ID, pull.AckBody{Token: old.Token, Status: 200})
	wantRefused(t, "the expired token on the replica that holds the new lease", errB, "stale_token")
	if ans, err := ca.Ack(ctx, again.ID, pull.AckBody{Token: again.Token, Status: 204}); err != nil || ans.Outcome != "delivered" {
		t.Fatalf("the current token on the other replica: %+v %v", ans, err)
	}

	// a hands a delivery out and is killed before its consumer acks: the
	// lease ends in the store, and b hands it out again, next attempt,
	// same key.
	postShopEvent(t, b, "ev_killed")
	// The lease starts while the pull is answered: not before it is
	// asked, and (on a loaded machine) well before its answer arrives,
	// which is why the clock starts at the asking.
	handed := time.Now()
	lost := pullOne(t, ca, "3s", 20*time.Second)
	a.kill()
	taken := pullOne(t, cb, "30s", 60*time.Second)
	moved := time.Since(handed)
	if taken.ID != lost.ID || taken.Attempt != lost.Attempt+1 ||
		http.Header(taken.Headers).Get("Idempotency-Key") != http.Header(lost.Headers).Get("Idempotency-Key") {
		t.Fatalf("after a was killed b handed out %+v, want %s again as attempt %d, same key", taken, lost.ID, lost.Attempt+1)
	}
	t.Logf("a 3s lease of a killed replica was handed out by the other %s after it was handed out", moved.Round(time.Millisecond))
	if moved < 3*time.Second {
		t.Fatalf("handed out again after %s, before its 3s lease ended", moved)
	}
	if ans, err := cb.Ack(ctx, taken.ID, pull.AckBody{Token: taken.Token, Status: 200}); err != nil || ans.Outcome != "delivered" {
		t.Fatalf("ack: %+v %v", ans, err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { st := pgStats(t, pg); return st.Delivered == 4 && st.Pending == 0 }) {
		t.Fatalf("the store says %+v, want 4 delivered", pgStats(t, pg))
	}
}

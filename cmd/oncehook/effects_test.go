package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/testenv"
)

const apiToken = "effects-test-token-0123"

// writeAPIConfig is writeConfig with the API listener on.
func writeAPIConfig(t *testing.T, dir, storeURL string) string {
	t.Helper()
	path := filepath.Join(dir, "oncehook.yaml")
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
store: %q
api:
  listen: 127.0.0.1:0
  tokens: [{name: test, token: %s}]
sources:
  - {name: stripe, preset: stripe, secrets: [%q]}
`, storeURL, apiToken, secret)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiURL reads the API's address from a process's banner.
func (p *process) apiURL(t *testing.T) string {
	t.Helper()
	var url string
	testenv.WaitFor(5*time.Second, func() bool {
		for _, line := range strings.Split(p.stdout.String(), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "api:"); ok {
				if f := strings.Fields(rest); len(f) > 0 && strings.HasPrefix(f[0], "http://") {
					url = f[0]
					return true
				}
			}
		}
		return false
	})
	if url == "" {
		t.Fatalf("no api address in the banner:\n%s", p.stdout)
	}
	return url
}

// effectHolder claims a key through the API, says so, and holds the lease
// until it is killed.
func effectHolder() {
	l := effect.NewClient(os.Getenv("ONCEHOOK_EFFECT_API"), apiToken, nil)
	c, err := l.Claim(context.Background(), os.Getenv("ONCEHOOK_EFFECT_HOLDER"), effect.ClaimOptions{Lease: 2 * time.Second})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("owner", c.Token)
	time.Sleep(time.Hour)
}

// Invariant 9 across processes: three gateways on one PostgreSQL. A client
// process claims a key and is killed (kill -9) while it holds the lease.
// While the lease lasts, every other claimer on every replica is told it is
// busy; once it expires, exactly one claimer takes over, told it is a
// reclaim, as attempt 2; the dead holder's late complete is refused (409);
// and, once done, every replica answers the owner's result, byte for byte.
func TestKilledEffectHolderIsTakenOverOnce(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	cfg := writeAPIConfig(t, t.TempDir(), pg)
	var apis []string
	for range 3 {
		p := startProcess(t, t.TempDir(), "--config", cfg)
		apis = append(apis, p.apiURL(t))
	}
	const key = "capi:Purchase:order-987"
	holder := exec.Command(os.Args[0])
	holder.Env = append(os.Environ(), "ONCEHOOK_EFFECT_HOLDER="+key, "ONCEHOOK_EFFECT_API="+apis[0])
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	deadToken, ok := strings.CutPrefix(strings.TrimSpace(line), "owner ")
	if !ok {
		holder.Process.Kill()
		t.Fatalf("holder: %q", line)
	}
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()

	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	defer transport.CloseIdleConnections()
	clients := make([]*effect.Client, len(apis))
	for i, u := range apis {
		clients[i] = effect.NewClient(u, apiToken, &http.Client{Transport: transport})
	}
	var mu sync.Mutex
	owners, busy := 0, 0
	var owner effect.Claim
	deadline := time.Now().Add(15 * time.Second)
	for owners == 0 && time.Now().Before(deadline) {
		var wg sync.WaitGroup
		for i := range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := clients[i%len(clients)].Claim(context.Background(), key, effect.ClaimOptions{Lease: time.Minute})
				mu.Lock()
				defer mu.Unlock()
				var b *effect.BusyError
				switch {
				case err == nil && !c.AlreadyDone:
					owners++
					owner = c
				case errors.As(err, &b):
					busy++
				default:
					t.Errorf("claim: %+v %v", c, err)
				}
			}()
		}
		wg.Wait()
		time.Sleep(50 * time.Millisecond)
	}
	if owners != 1 || !owner.Reclaimed || owner.Attempt != 2 {
		t.Fatalf("%d claimers took the lease (%+v); want exactly one reclaim, as attempt 2", owners, owner)
	}
	if busy == 0 {
		t.Fatal("no claimer was ever told the lease was held")
	}
	if err := clients[1].Complete(context.Background(), key, deadToken, json.RawMessage(`{"late":true}`)); !errors.Is(err, effect.ErrStaleToken) {
		t.Fatalf("the dead holder's late complete: %v, want ErrStaleToken (409)", err)
	}
	result := json.RawMessage(`{"events_received": 1, "fbtrace_id": "A1"}`)
	if err := clients[2].Complete(context.Background(), key, owner.Token, result); err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		got, err := c.Claim(context.Background(), key, effect.ClaimOptions{})
		if err != nil || !got.AlreadyDone || string(got.Result) != string(result) {
			t.Fatalf("after done: %+v %v", got, err)
		}
	}
}

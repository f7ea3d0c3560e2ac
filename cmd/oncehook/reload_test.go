package main_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

const reloadToken = "reload-test-token-0123"

// reloadConfig is a config the reload tests rewrite while the gateway
// runs: a Stripe source with secrets, delivering to app and, when audit
// is set, to audit too.
type reloadConfig struct {
	secrets    []string
	app, audit string // URLs; audit "": not configured
	listen     string // intake's; default 127.0.0.1:0
	extra      string // appended as is
}

// write replaces path's file at once (written aside, then renamed), as
// an operator's deploy tool does: a reload never reads half a file.
func (c reloadConfig) write(t *testing.T, path string) {
	t.Helper()
	listen := c.listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	routes, dests := "[app]", fmt.Sprintf(`
  - name: app
    url: %s
    timeout: 2s
    retry: {max_attempts: 1000, base_delay: 20ms, max_delay: 100ms}`, c.app)
	if c.audit != "" {
		routes = "[app, audit]"
		dests += fmt.Sprintf(`
  - name: audit
    url: %s
    timeout: 2s
    retry: {max_attempts: 1000, base_delay: 20ms, max_delay: 100ms}
    breaker: {off: true}`, c.audit)
	}
	secrets, _ := json.Marshal(c.secrets)
	text := fmt.Sprintf(`listen: %s
store: "sqlite://./events.db"
api:
  listen: 127.0.0.1:0
  tokens: [{name: ops, token: %s}]
delivery:
  lease: 4s
sources:
  - name: stripe
    preset: stripe
    secrets: %s
    destinations: %s
destinations:%s
%s`, listen, reloadToken, secrets, routes, dests, c.extra)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// apiCall makes one call to the admin API with the reload tests' token.
func apiCall(t *testing.T, method, url string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+reloadToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// sendSigned sends one Stripe event signed with sec: the status, or 0
// when the request failed.
func sendSigned(t *testing.T, url, sec, id string) int {
	req := testenv.SignedRequest(t, url+"/in/stripe", "stripe", sec, []byte(`{"id":"`+id+`","object":"event"}`), "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// startReloadable starts a gateway on reloadConfig's config, with one
// secret and an app destination, in a directory of its own: the process,
// the directory, the config's path and the config, to rewrite.
func startReloadable(t *testing.T) (*process, string, string, reloadConfig) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "oncehook.yaml")
	cfg := reloadConfig{secrets: []string{secret}, app: newCountingSink(t, 0).URL}
	cfg.write(t, path)
	return startProcess(t, dir, "--config", path), dir, path, cfg
}

// reloads counts the reloads a gateway applied, by its log.
func (p *process) reloads() int { return strings.Count(p.stderr.String(), `msg="config reloaded"`) }

// metric reads one sample's value from a gateway's /metrics ("" when
// absent).
func metric(t *testing.T, url, sample string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// Under a steady signed load, 20 reloads (every other one by SIGHUP, the
// rest by POST /v1/reload) rotate the source's secret (the new one beside
// the old, then the old one gone) and add and remove a destination: every
// request is answered 200, or 401 when signed with a secret that was being
// retired (the sender then signs with the new one, as a provider does once
// its secret is rotated), never a 5xx; every event is delivered to app
// once, and none twice to audit.
func TestReloadUnderLoadDropsNothing(t *testing.T) {
	dir := t.TempDir()
	app, audit := newCountingSink(t, 0), newCountingSink(t, 0)
	path := filepath.Join(dir, "oncehook.yaml")
	secretN := func(i int64) string { return fmt.Sprintf("whsec_rotation_%02d", i) }
	reloadConfig{secrets: []string{secretN(0)}, app: app.URL}.write(t, path)
	p := startProcess(t, dir, "--config", path)
	api := p.apiURL(t)

	var current, retiredBelow atomic.Int64 // the secret senders sign with; the ones below retired
	var acceptedN atomic.Int64             // 200s so far: each reload waits for traffic since the last one
	type result struct {
		secret int64
		status int
	}
	var mu sync.Mutex
	results := map[string][]result{}
	stop := make(chan struct{})
	var seq atomic.Int64
	var senders sync.WaitGroup
	// Seven senders move to a new secret as soon as it is taken; one
	// lags, as a provider account whose rotation is late does, and moves
	// only when refused.
	for i := range 8 {
		lags := i == 0
		senders.Go(func() {
			k := current.Load()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("evt_reload_%06d", seq.Add(1))
				for range 5 { // a refused event is sent again, signed with the secret the sender has now
					if !lags {
						k = current.Load()
					}
					status := sendSigned(t, p.URL, secretN(k), id)
					mu.Lock()
					results[id] = append(results[id], result{k, status})
					mu.Unlock()
					if status == http.StatusOK {
						acceptedN.Add(1)
					}
					if status != http.StatusUnauthorized {
						break
					}
					k = current.Load()
				}
			}
		})
	}
	withAudit := false
	for i := 1; i <= 20; i++ {
		time.Sleep(100 * time.Millisecond)
		// And traffic since the last reload, however slow the machine.
		for since, start := acceptedN.Load(), time.Now(); acceptedN.Load() < since+10 && time.Since(start) < 5*time.Second; {
			time.Sleep(5 * time.Millisecond)
		}
		k := int64((i + 1) / 2)
		secrets := []string{secretN(k - 1), secretN(k)} // odd: the new secret beside the old
		if i%2 == 0 {
			secrets = []string{secretN(k)} // even: the old one retired
			retiredBelow.Store(k)
		}
		withAudit = (i/3)%2 == 1 // audit comes and goes: added at 3, removed at 6, ...
		c := reloadConfig{secrets: secrets, app: app.URL}
		if withAudit {
			c.audit = audit.URL
		}
		c.write(t, path)
		if i%2 == 1 {
			before := p.reloads()
			p.cmd.Process.Signal(syscall.SIGHUP)
			if !testenv.WaitFor(5*time.Second, func() bool { return p.reloads() > before }) {
				t.Fatalf("reload %d: SIGHUP applied nothing\n%s", i, p.stderr)
			}
		} else if status, body := apiCall(t, http.MethodPost, api+"/v1/reload"); status != http.StatusOK {
			t.Fatalf("reload %d: POST /v1/reload = %d %s", i, status, body)
		}
		if i%2 == 1 {
			current.Store(k) // both are taken now: the sender moves to the new one
		}
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	senders.Wait()

	if p.cmd.ProcessState != nil {
		t.Fatalf("the gateway exited during the reloads:\n%s", p.stderr)
	}
	accepted := map[string]bool{}
	refused := 0
	for id, rs := range results {
		for _, r := range rs {
			switch {
			case r.status == http.StatusOK:
				accepted["stripe:"+id] = true // the Idempotency-Key a destination sees
			case r.status == http.StatusUnauthorized && r.secret < retiredBelow.Load():
				refused++ // a retired secret: the defined answer
			default:
				t.Errorf("%s signed with secret %d: status %d (want 200, or 401 for a retired secret)", id, r.secret, r.status)
			}
		}
		if !accepted["stripe:"+id] {
			t.Errorf("%s never accepted: %+v", id, rs)
		}
	}
	if len(accepted) < 200 || refused == 0 {
		t.Fatalf("only %d events under load, %d refused for a retired secret: the load is too light to show anything", len(accepted), refused)
	}
	if got := p.reloads(); got != 20 {
		t.Errorf("%d reloads applied, want 20", got)
	}
	waitDeliveredOnce(t, app, accepted)
	for key, n := range audit.ByKey() {
		if n != 1 {
			t.Errorf("audit received %s %d times", key, n)
		}
	}
	// Each reload is audited: by the token for the API's, by "signal" for
	// SIGHUP's.
	status, body := apiCall(t, http.MethodGet, api+"/v1/audit?limit=100")
	if status != http.StatusOK || strings.Count(string(body), `"actor":"token:ops","action":"reload"`) != 10 ||
		strings.Count(string(body), `"actor":"signal","action":"reload"`) != 10 {
		t.Errorf("audit log (%d) does not record 10 reloads of each kind:\n%s", status, body)
	}
	t.Logf("%d events accepted, %d requests refused for a retired secret, %d delivered to audit while it was configured", len(accepted), refused, len(audit.ByKey()))
}

// A destination removed from the config keeps its pending deliveries,
// held: no more attempts, none dead-lettered, shown as removed with its
// count, and each delivered once when a reload brings it back.
func TestRemovedDestinationIsHeldUntilItComesBack(t *testing.T) {
	dir := t.TempDir()
	app := newCountingSink(t, 0)
	var auditUp atomic.Bool
	var okMu sync.Mutex
	okKeys := map[string]int{} // the deliveries audit answered 200
	audit := testenv.NewSink(t)
	audit.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		if !auditUp.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		okMu.Lock()
		okKeys[r.Header.Get("Idempotency-Key")]++
		okMu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
	path := filepath.Join(dir, "oncehook.yaml")
	cfg := reloadConfig{secrets: []string{secret}, app: app.URL, audit: audit.URL}
	cfg.write(t, path)
	p := startProcess(t, dir, "--config", path)
	api := p.apiURL(t)
	const n = 20
	for i := range n {
		if status := sendSigned(t, p.URL, secret, fmt.Sprintf("evt_held_%02d", i)); status != http.StatusOK {
			t.Fatalf("event %d: %d", i, status)
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(audit.Deliveries()) > 2*n }) {
		t.Fatalf("audit was not being retried: %d attempts", len(audit.Deliveries()))
	}

	cfg.audit = ""
	cfg.write(t, path)
	if status, body := apiCall(t, http.MethodPost, api+"/v1/reload"); status != http.StatusOK || !strings.Contains(string(body), "destination audit removed") {
		t.Fatalf("reload: %d %s", status, body)
	}
	// Held: the attempts stop (the ones in flight at the reload end).
	time.Sleep(500 * time.Millisecond)
	attempts := len(audit.Deliveries())
	time.Sleep(time.Second)
	if now := len(audit.Deliveries()); now != attempts {
		t.Fatalf("audit was attempted %d more times after its removal", now-attempts)
	}
	var dests struct {
		Destinations []struct {
			Name    string `json:"name"`
			Pending int    `json:"pending"`
			Dead    int    `json:"dead"`
			Removed bool   `json:"removed"`
		} `json:"destinations"`
	}
	status, body := apiCall(t, http.MethodGet, api+"/v1/destinations")
	if err := json.Unmarshal(body, &dests); status != http.StatusOK || err != nil {
		t.Fatalf("destinations: %d %s %v", status, body, err)
	}
	var held bool
	for _, d := range dests.Destinations {
		if d.Name == "audit" {
			held = d.Removed && d.Pending == n && d.Dead == 0
		}
	}
	if !held {
		t.Fatalf("destinations %s: want audit removed, %d pending, none dead", body, n)
	}
	if out, ok := oncehook(t, dir, nil, "destinations", "--api", api, "--token", reloadToken); !ok || !strings.Contains(out, "removed from the config: held") {
		t.Errorf("oncehook destinations (ok=%v):\n%s", ok, out)
	}
	if v := metric(t, p.URL, `oncehook_destination_removed{destination="audit"}`); v != "1" {
		t.Errorf("oncehook_destination_removed for audit = %q, want 1", v)
	}
	// New events go to app only.
	if status := sendSigned(t, p.URL, secret, "evt_after_removal"); status != http.StatusOK {
		t.Fatalf("event after the removal: %d", status)
	}

	auditUp.Store(true)
	cfg.audit = audit.URL
	cfg.write(t, path)
	if status, body := apiCall(t, http.MethodPost, api+"/v1/reload"); status != http.StatusOK || !strings.Contains(string(body), "destination audit added") {
		t.Fatalf("reload: %d %s", status, body)
	}
	ok := func() map[string]int {
		okMu.Lock()
		defer okMu.Unlock()
		out := map[string]int{}
		for k, v := range okKeys {
			out[k] = v
		}
		return out
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(ok()) >= n }) {
		t.Fatalf("audit got %d of the %d held deliveries once back", len(ok()), n)
	}
	time.Sleep(300 * time.Millisecond)
	for key, c := range ok() {
		if c != 1 || strings.Contains(key, "after_removal") {
			t.Errorf("audit: %s delivered %d times", key, c)
		}
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(app.ByKey()) == n+1 }) {
		t.Errorf("app got %d events, want %d", len(app.ByKey()), n+1)
	}
}

// An invalid config is refused whole, with every error, and the running
// one keeps serving; the metric says the last reload failed. A changed
// listener is not taken: the reload says it waits for a restart.
func TestReloadRefusesAnInvalidConfigAndNamesWhatNeedsARestart(t *testing.T) {
	p, dir, path, cfg := startReloadable(t)
	api := p.apiURL(t)

	bad := cfg
	bad.secrets = []string{"whsec_new"}
	bad.extra = "retry_forever: true\n"
	bad.write(t, path)
	status, body := apiCall(t, http.MethodPost, api+"/v1/reload")
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("retry_forever")) || !bytes.Contains(body, []byte("running config stays")) {
		t.Fatalf("reload of an invalid config: %d %s", status, body)
	}
	if v := metric(t, p.URL, "oncehook_config_last_reload_successful"); v != "0" {
		t.Errorf("oncehook_config_last_reload_successful = %q after a refused reload", v)
	}
	if !strings.Contains(p.stderr.String(), "retry_forever") {
		t.Errorf("the refused config's error is not logged:\n%s", p.stderr)
	}
	// The old secret still works, the new one is not taken.
	if s := sendSigned(t, p.URL, secret, "evt_old_secret"); s != http.StatusOK {
		t.Errorf("old secret after a refused reload: %d", s)
	}
	if s := sendSigned(t, p.URL, "whsec_new", "evt_new_secret"); s != http.StatusUnauthorized {
		t.Errorf("the refused config's secret: %d, want 401", s)
	}
	// A destination route to nowhere is refused too, by SIGHUP: the
	// gateway stays up.
	bad.extra = ""
	bad.write(t, path)
	text, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(text, []byte("destinations: [app]"), []byte("destinations: [app, nowhere]"), 1), 0o600)
	p.cmd.Process.Signal(syscall.SIGHUP)
	if !testenv.WaitFor(5*time.Second, func() bool { return strings.Contains(p.stderr.String(), "nowhere") }) {
		t.Fatalf("the refused SIGHUP reload logged no error:\n%s", p.stderr)
	}
	if s := sendSigned(t, p.URL, secret, "evt_after_hup"); s != http.StatusOK || p.cmd.ProcessState != nil {
		t.Fatalf("after a refused SIGHUP reload: %d", s)
	}

	// A new listener waits for a restart; the rest is taken.
	good := cfg
	good.secrets = []string{secret, "whsec_new"}
	good.listen = freeAddr(t)
	good.write(t, path)
	status, body = apiCall(t, http.MethodPost, api+"/v1/reload")
	var v struct {
		Changed []string `json:"changed"`
		Restart []string `json:"restart"`
	}
	if err := json.Unmarshal(body, &v); status != http.StatusOK || err != nil || len(v.Restart) != 1 || v.Restart[0] != "listen" ||
		len(v.Changed) != 1 || v.Changed[0] != "source stripe changed" {
		t.Fatalf("reload with a new listener: %d %s", status, body)
	}
	if s := sendSigned(t, p.URL, "whsec_new", "evt_new_secret"); s != http.StatusOK {
		t.Errorf("the new secret after the reload: %d", s)
	}
	// The CLI's reload says the same; the command is the API's.
	out, ok := oncehook(t, dir, nil, "reload", "--api", api, "--token", reloadToken)
	if !ok || strings.Contains(out, "nothing changed") || !strings.Contains(out, "nothing applied now") ||
		!strings.Contains(out, "listen changed: it takes effect at a restart") {
		t.Errorf("oncehook reload (ok=%v):\n%s", ok, out)
	}
	// Its log says so too, not "changed=[]" above "listen changed".
	if log := p.stderr.String(); strings.Contains(log, "changed=[]") || !strings.Contains(log, `applied="nothing now: what changed takes effect at a restart" restart=[listen]`) {
		t.Errorf("the gateway's log of a reload that applied nothing:\n%s", log)
	}
	if out, ok := oncehook(t, dir, nil, "reload", "--config", path); ok || !strings.Contains(out, "SIGHUP") {
		t.Errorf("oncehook reload without --api (ok=%v):\n%s", ok, out)
	}
	if v := metric(t, p.URL, "oncehook_config_last_reload_successful"); v != "1" {
		t.Errorf("oncehook_config_last_reload_successful = %q after a good reload", v)
	}
	status, body = apiCall(t, http.MethodGet, api+"/v1/audit")
	if status != http.StatusOK || strings.Count(string(body), `"action":"reload_refused"`) != 2 || strings.Count(string(body), `"action":"reload"`) != 2 {
		t.Errorf("audit log: %d %s", status, body)
	}
}

// No change goes unrecorded: a reload whose audit entry the store refuses
// (a trigger on the audit table here, the store's own failure) is not
// applied, answers 503 and says so; the running config stays. Once the
// store takes entries again, the same reload goes in.
func TestReloadWhoseAuditFailsIsNotApplied(t *testing.T) {
	p, dir, path, cfg := startReloadable(t)
	api := p.apiURL(t)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "events.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER audit_refused BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'the audit log is full'); END`); err != nil {
		t.Fatal(err)
	}
	next := cfg
	next.secrets = []string{"whsec_new"}
	next.write(t, path)
	status, body := apiCall(t, http.MethodPost, api+"/v1/reload")
	if status != http.StatusServiceUnavailable {
		t.Fatalf("reload whose audit entry failed: %d %s, want 503", status, body)
	}
	if !testenv.WaitFor(5*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "config reload not applied: its audit entry could not be written")
	}) {
		t.Errorf("the reload that was not applied is not logged as such:\n%s", p.stderr)
	}
	if s := sendSigned(t, p.URL, secret, "evt_still_old"); s != http.StatusOK {
		t.Errorf("the running secret after a reload that was not applied: %d", s)
	}
	if s := sendSigned(t, p.URL, "whsec_new", "evt_not_yet"); s != http.StatusUnauthorized {
		t.Errorf("the new secret of a reload that was not applied: %d, want 401", s)
	}
	if _, err := db.Exec(`DROP TRIGGER audit_refused`); err != nil {
		t.Fatal(err)
	}
	if status, body := apiCall(t, http.MethodPost, api+"/v1/reload"); status != http.StatusOK {
		t.Fatalf("the same reload once the audit log takes entries: %d %s", status, body)
	}
	if s := sendSigned(t, p.URL, "whsec_new", "evt_new"); s != http.StatusOK {
		t.Errorf("the new secret after the reload went in: %d", s)
	}
	status, body = apiCall(t, http.MethodGet, api+"/v1/audit")
	if status != http.StatusOK || strings.Count(string(body), `"action":"reload"`) != 1 {
		t.Errorf("audit log: %d %s, want the one reload applied", status, body)
	}
}

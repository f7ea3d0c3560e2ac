package main_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// listen against a gateway that serves its API over HTTPS with a
// private CA's certificate: trusted with --ca or $SSL_CERT_FILE, it
// forwards; untrusted, it stops at once and says why and what to do,
// rather than retrying for ever.
func TestListenOverHTTPS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	gw := oncehooktest.Start(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
tls: {cert_file: %q, key_file: %q}
api:
  tokens:
    - {name: dev, token: `+listenToken+`, pull: [laptop]}
sources:
  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], destinations: [laptop]}
destinations:
  - {name: laptop, pull: {}, retry: {max_attempts: 100, base_delay: 100ms, max_delay: 1s}}
`, certFile, keyFile))
	intake := "https://" + strings.TrimPrefix(gw.URL, "http://")
	api := "https://" + strings.TrimPrefix(gw.APIURL, "http://")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(id string) {
		t.Helper()
		resp, err := client.Post(intake+"/in/shop", "application/json", strings.NewReader(`{"id":"`+id+`"}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("post %s over https: %v %v", id, resp, err)
		}
		resp.Body.Close()
	}
	app := newLocalApp(t)

	// Untrusted: an error that says so, at once.
	// (Within 15s: a listen that retried for ever would be killed then.)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "listen", "laptop", "--forward-to", app.URL, "--api", api, "--journal", dir+"/untrusted.journal")
	cmd.Env = append(os.Environ(), "ONCEHOOK_API_TOKEN="+listenToken, "SSL_CERT_FILE="+dir+"/none.pem")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not trusted") || !strings.Contains(string(out), "--ca") {
		t.Fatalf("untrusted certificate: %v, output:\n%s\nwant an error that names the certificate and --ca", err, out)
	}
	t.Logf("untrusted: exited in %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out[strings.LastIndex(strings.TrimSpace(string(out)), "\n")+1:])))

	// Trusted with --ca, then with $SSL_CERT_FILE.
	for i, trust := range [][]string{{"--ca", certFile}, {"SSL_CERT_FILE=" + certFile}} {
		for j := range 5 {
			post(fmt.Sprintf("ev_%d_%d", i, j))
		}
		args := []string{"listen", "laptop", "--forward-to", app.URL, "--api", api, "--journal", fmt.Sprintf("%s/%d.journal", dir, i)}
		env := append(os.Environ(), "ONCEHOOK_API_TOKEN="+listenToken)
		if trust[0] == "--ca" {
			args = append(args, trust...)
		} else {
			env = append(env, trust...)
		}
		cmd := exec.Command(binary, args...)
		cmd.Env = env
		p := &listenProcess{cmd: cmd, out: &syncBuffer{}}
		cmd.Stdout, cmd.Stderr = p.out, p.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !testenv.WaitFor(30*time.Second, func() bool { return app.count() == 5*(i+1) }) {
			p.kill()
			t.Fatalf("trusted with %v: the app got %d of %d; listen said:\n%s", trust, app.count(), 5*(i+1), p.out)
		}
		p.kill()
	}
}

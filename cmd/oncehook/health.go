package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/oncehook/oncehook/config"
)

// health asks the gateway running on this host whether it is ready: the
// container image's HEALTHCHECK, which has no shell and no curl. It reads
// the same config serve does (--config, $ONCEHOOK_CONFIG, ./oncehook.yaml,
// else the demo's address) for the intake listener, and GETs /readyz
// there (or /livez): exit 0 when it answers 200, 1 otherwise.
func health(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: $"+configEnv+", else ./oncehook.yaml, else the demo's address)")
	url := fs.String("url", "", "the intake listener's base URL (default: the config's listen, on loopback)")
	probe := fs.String("probe", "readyz", "readyz (the store can commit) or livez (the process answers)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	if *probe != "readyz" && *probe != "livez" {
		return fmt.Errorf("--probe %q: want readyz or livez", *probe)
	}
	base := *url
	if base == "" {
		cfg, _, err := resolveConfig(*path, false)
		if err != nil {
			return err
		}
		listen, scheme := config.DefaultListen, "http"
		if cfg != nil {
			listen = cfg.Listen
			if cfg.TLS.CertFile != "" {
				scheme = "https"
			}
		}
		_, port, err := net.SplitHostPort(listen)
		if err != nil {
			return fmt.Errorf("listen %q: %w", listen, err)
		}
		base = scheme + "://" + net.JoinHostPort("127.0.0.1", port)
	}
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{
		// The certificate names the public host, not loopback; this is a
		// probe of the local process, not a check of its certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/"+*probe, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %d: %s", req.URL, resp.StatusCode, body)
	}
	fmt.Fprintf(stdout, "%s: %d %s", req.URL, resp.StatusCode, body)
	return nil
}

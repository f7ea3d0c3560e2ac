package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oncehook/oncehook/deliver/pull"
)

// listen is `oncehook listen DESTINATION --forward-to URL`: a pull
// destination's deliveries, forwarded to a local app (pull.Listener).
func listen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: oncehook listen DESTINATION --forward-to URL [--api URL --token T] [flags]\n\nForwards a pull destination's deliveries to a local app, one line each; the backlog and the retries wait in the gateway.")
		fs.PrintDefaults()
	}
	forward := fs.String("forward-to", "", "the local app's URL, e.g. http://localhost:3000/webhooks (required)")
	apiURL := fs.String("api", os.Getenv(apiEnv), "the gateway's API URL, e.g. https://hooks.example.com:8081 (or $"+apiEnv+")")
	token := fs.String("token", "", "an API token that may pull from DESTINATION (default $"+tokenEnv+")")
	fromNow := fs.Bool("from-now", false, "skip the backlog: what arrived before now is acked, not forwarded")
	types := fs.String("type", "", "forward only these event types (comma-separated; order.* is a prefix); the others are acked, not forwarded")
	printBody := fs.Bool("print-body", false, "print each delivery's body under its line")
	batch := fs.Int("batch", 16, "deliveries per pull")
	lease := fs.Duration("lease", pull.DefaultLease, "how long each delivery is leased before the gateway hands it out again")
	ca := fs.String("ca", "", "a PEM file of CA certificates to trust for --api's HTTPS, besides the system's (or $SSL_CERT_FILE)")
	journal := fs.String("journal", "", "the file that keeps answers not yet acked, across a kill (default: one per gateway and destination in the user's cache folder)")
	// Flags may come after the destination's name, as the usage shows.
	var dest string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dest, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if dest == "" && len(rest) > 0 {
		dest, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		return fmt.Errorf("listen takes one destination (got %q too)", rest[0])
	}
	if dest == "" || *forward == "" {
		fs.Usage()
		return errUsage
	}
	if *apiURL == "" {
		return fmt.Errorf("--api URL (or $%s): the gateway's API listener", apiEnv)
	}
	if *token == "" {
		*token = os.Getenv(tokenEnv)
	}
	if *token == "" {
		return fmt.Errorf("--token (or $%s): a token that may pull from %s", tokenEnv, dest)
	}
	if *journal == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		*journal = filepath.Join(dir, "oncehook", "listen-"+journalName(*apiURL)+"-"+dest+".journal")
	}
	hc, err := apiClient(*ca)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	l := &pull.Listener{
		Client: pull.NewClient(*apiURL, *token, hc), Destination: dest, ForwardTo: *forward, Out: stdout,
		FromNow: *fromNow, PrintBody: *printBody, Batch: *batch, Lease: *lease, Journal: *journal,
		Consumer: fmt.Sprintf("%s/%d", host, os.Getpid()),
	}
	if *types != "" {
		for _, t := range strings.Split(*types, ",") {
			// An empty one would match no type: every event acked as
			// skipped, none forwarded.
			if t = strings.TrimSpace(t); t == "" {
				return fmt.Errorf("--type %q: an empty type in the list; want types such as invoice.paid,order.*", *types)
			}
			l.Types = append(l.Types, t)
		}
	}
	fmt.Fprintf(stdout, "%s  listening to %s at %s, forwarding to %s (Ctrl-C to stop; what is not acked waits in the gateway)\n",
		time.Now().Format("2006-01-02 15:04:05"), dest, *apiURL, *forward)
	err = l.Run(ctx)
	var api *pull.APIError
	switch {
	case errors.As(err, &api):
		return fmt.Errorf("listen %s: %s", dest, api.Body.Error)
	case errors.Is(err, pull.ErrUntrusted):
		return fmt.Errorf("listen %s: %w; trust its CA with --ca FILE (or $SSL_CERT_FILE)", dest, err)
	}
	return err
}

// apiClient is the HTTP client listen calls the API with: the system's
// CAs, and caFile's when it names one (a gateway whose certificate a
// private CA signed).
func apiClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in it", caFile)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t}, nil
}

// journalName is the gateway's host and port as a file name's part, so
// that two gateways' destinations of one name keep journals apart (a
// delivery's id is made of its source, key and destination: the same on
// both).
func journalName(apiURL string) string {
	host := apiURL
	if u, err := url.Parse(apiURL); err == nil && u.Host != "" {
		host = u.Host
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, host)
}

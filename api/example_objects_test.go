package api_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/kinds"
)

// A customer connects their Stripe account: the platform's backend
// creates a source for them through the API, reads it back (its secret
// only as a fingerprint), rotates the secret (the old one stays valid
// while both are listed) and removes it when the customer leaves.
func ExampleClient_CreateSource() {
	dir, _ := os.MkdirTemp("", "oncehook-example")
	defer os.RemoveAll(dir)
	cfg, err := config.Parse([]byte(`
store: sqlite://`+filepath.Join(dir, "oncehook.db")+`
api:
  tokens: [{name: platform, token: example-platform-token}]
sources:
  - {name: shop, preset: stripe, secrets: [whsec_shop], destinations: [app]}
destinations:
  - {name: app, url: "http://127.0.0.1:9/hooks"}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	gw, err := oncehook.New(ctx, cfg, oncehook.Options{
		Kinds: kinds.All(),
		// The key secrets are sealed with at rest; the binary reads
		// $ONCEHOOK_SECRET_KEYS.
		Getenv: func(name string) string {
			if name == "ONCEHOOK_SECRET_KEYS" {
				return "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
			}
			return ""
		},
	})
	if err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	apiLn, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error)
	go func() { done <- gw.Serve(ctx, ln, apiLn) }()

	c := api.NewClient("http://"+apiLn.Addr().String(), "example-platform-token", nil)
	src, err := c.CreateSource(ctx, map[string]any{
		"name": "acme-stripe", "preset": "stripe", "secrets": []string{"whsec_acme_1"}, "destinations": []string{"app"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("created", src.Name, "version", src.Version, "managed by", src.ManagedBy, "intake at /in/acme-stripe:", src.IntakeURL == "http://"+ln.Addr().String()+"/in/acme-stripe")
	src, _ = c.Source(ctx, "acme-stripe")
	shown := fmt.Sprint(src.Spec["secrets"])
	fmt.Println("its secret shown as a fingerprint:", strings.Contains(shown, "sha256:") && !strings.Contains(shown, "whsec_acme_1"))

	// Rotate: the new secret first, the old one kept for a while.
	src, err = c.UpdateSource(ctx, "acme-stripe", map[string]any{"secrets": []string{"whsec_acme_2", "whsec_acme_1"}}, src.Version)
	if err != nil {
		panic(err)
	}
	fmt.Println("rotated: version", src.Version)

	// A change from a version that moved on is refused.
	_, err = c.UpdateSource(ctx, "acme-stripe", map[string]any{"secrets": []string{"whsec_acme_3"}}, 1)
	var refused *api.Error
	if errors.As(err, &refused) {
		fmt.Println("a stale change:", refused.Status)
	}
	// An invalid one names its field.
	_, err = c.CreateSource(ctx, map[string]any{"name": "bad", "preset": "strpe", "destinations": []string{"app"}})
	if errors.As(err, &refused) {
		fmt.Println("invalid:", refused.Status, refused.Body.Field)
	}

	if err := c.DeleteSource(ctx, "acme-stripe", 0); err != nil {
		panic(err)
	}
	resp, _ := http.Post("http://"+ln.Addr().String()+"/in/acme-stripe", "application/json", nil)
	resp.Body.Close()
	fmt.Println("deleted: intake answers", resp.StatusCode)

	stop()
	<-done
	// Output:
	// created acme-stripe version 1 managed by api intake at /in/acme-stripe: true
	// its secret shown as a fingerprint: true
	// rotated: version 2
	// a stale change: 412
	// invalid: 400 preset
	// deleted: intake answers 404
}

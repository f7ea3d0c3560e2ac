package config

import (
	"fmt"
	"time"
)

// Sample is the commented configuration `oncehook init` writes.
const Sample = `# oncehook configuration. Values like ${NAME} (or $NAME) are read from the
# environment; an unset variable is an error, so a secret is never silently
# empty. ${NAME:-default} gives a default; $$ is a literal $.
# Check this file without serving: oncehook validate --config oncehook.yaml

listen: 127.0.0.1:8080

# Where events live. sqlite://path is the embedded default: one file, WAL,
# and a commit is on disk before oncehook answers 200.
store: sqlite://./oncehook.db
sqlite:
  synchronous: FULL          # FULL (default) | EXTRA | NORMAL | OFF

max_body_size: 5MiB          # larger requests get 413
# max_inflight_bytes: 64MiB  # bodies held in memory at once, queue messages too; over it, 503 + Retry-After (a queue's consumer waits)
# metrics: {listen: 127.0.0.1:9090}  # GET /metrics there instead of on intake (it names sources and queues)
# tls: {cert_file: cert.pem, key_file: key.pem}  # serve every listener over TLS (no proxy in front)
# trusted_proxies: [10.0.0.0/8]   # proxies whose X-Forwarded-For names the client in logs
# tenant_egress: {allow: [10.0.5.0/24]}  # tenants' destinations reach public addresses only, and these

delivery:
  concurrency: 64            # attempts in flight at once
  # lease: 40s               # default: the longest destination timeout + 30s (at least timeout + 5s)

# The API listener, for your own services and operators (not providers): the
# effects ledger (/v1/effects), the admin API and the dashboard (/ui).
api:
  listen: 127.0.0.1:8081
  tokens:
    - {name: ops, token: "${ONCEHOOK_API_TOKEN}"}                     # every scope
    # - {name: grafana, token: "${ONCEHOOK_RO_TOKEN}", read_only: true}   # GET only

# effects:
#   retention: 30d           # how long a done/failed record answers later claims
#   retention_by_prefix: {"capi:": 8d}

sources:
  - name: stripe             # receives at POST /in/stripe
    preset: stripe           # stripe | github | shopify | whatsapp | slack | ... | generic (see the README)
    secrets: ["${STRIPE_WEBHOOK_SECRET}"]   # several = rotation: any one may match
    # window: 4d             # how long keys are kept for dedup; default covers the provider's retries
    # body_retention: 1d     # drop bodies sooner than keys, once delivered (replay then says the body is gone)
    # on_missing_key: accept # accept (default: stored, flagged keyless) | reject (422)
    # order: {mode: latest}  # per entity, one delivery in flight; an event older than the one delivered is held
    #                        # as stale (mode: fifo delivers in version order); entity and version: the preset's
    destinations: [app]

  - name: github
    preset: github
    secrets: ["${GITHUB_WEBHOOK_SECRET}"]
    destinations: [app]

  # Any HMAC-SHA256-over-the-body provider:
  # - name: acme
  #   preset: generic
  #   secrets: ["${ACME_SECRET}"]
  #   signature: {header: X-Acme-Signature, encoding: hex, prefix: "sha256="}
  #   key: ["json:event.id"]   # or header:X-Event-Id, or several for a composite
  #   destinations: [app]

destinations:
  - name: app
    url: http://127.0.0.1:9000/webhooks
    timeout: 10s
    # secret: whsec_...      # sign deliveries the Standard Webhooks way
    retry: {max_attempts: 12, base_delay: 1s, max_delay: 1h}
`

// DemoSecret is the demo source's secret. The demo listens on loopback only.
const DemoSecret = "whsec_demo"

// Demo is the configuration `oncehook serve` runs without a config file: a
// Stripe-style source named demo that delivers to the gateway's own demo
// sink, on SQLite in the working directory.
func Demo(listen string) *Config {
	if listen == "" {
		listen = DefaultListen
	}
	cfg := &Config{
		Listen: listen,
		Store:  DefaultStore,
		Sources: []Source{{
			Name: "demo", Preset: "stripe", Secrets: []string{DemoSecret}, Destinations: To("demo-sink"),
		}},
		Destinations: []Destination{{
			Name: "demo-sink", URL: fmt.Sprintf("http://%s/_demo/sink", listen),
			Timeout: Duration(5 * time.Second),
		}},
	}
	cfg.setDefaults()
	return cfg
}

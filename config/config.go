// Package config reads oncehook's YAML configuration: ${ENV} expansion for
// secrets, strict field names, defaults, and validation whose errors name the
// field at fault (sources[1].secrets[0], destinations[0].url, ...).
package config

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oncehook/oncehook/internal/egress"
	"github.com/oncehook/oncehook/internal/redact"
)

// Config is the whole configuration of a gateway.
type Config struct {
	Listen string `yaml:"listen"`
	// Tenants are settings of the customers that sources, destinations,
	// tokens and alert channels name in their tenant: (a tenant needs no
	// entry here to exist).
	Tenants []Tenant `yaml:"tenants"`
	// TenantEgress widens where tenants' destinations may be delivered:
	// by default, public addresses only (see TenantEgress).
	TenantEgress TenantEgress `yaml:"tenant_egress"`
	// Store is where events live: sqlite://path (the embedded default) or
	// postgres://... (several replicas).
	Store string `yaml:"store"`
	// Redis, when set (redis://host:port/db), is a hot dedup layer in front
	// of the store, shared by replicas. It never decides alone.
	Redis string `yaml:"redis"`
	// SQLite tunes the embedded store.
	SQLite SQLite `yaml:"sqlite"`
	// MaxBodySize bounds a request body; larger bodies get 413.
	MaxBodySize ByteSize `yaml:"max_body_size"`
	// MaxInflightBytes bounds the request bodies held in memory at once,
	// queue messages' among them (default 64 MiB, at least
	// max_body_size); over it, intake answers 503 with Retry-After instead
	// of running out of memory, and a queue consumer waits, its broker
	// keeping the backlog.
	MaxInflightBytes ByteSize `yaml:"max_inflight_bytes"`
	// TrustedProxies are the reverse proxies (addresses or CIDR prefixes)
	// whose X-Forwarded-For is believed for the client address in logs.
	TrustedProxies []string `yaml:"trusted_proxies"`
	Delivery       Delivery `yaml:"delivery"`
	// API is the second listener: the effects ledger, the admin API and the
	// dashboard, for the user's own services and operators (intake, on
	// Listen, is for providers).
	API API `yaml:"api"`
	// Effects tunes the effects ledger.
	Effects Effects `yaml:"effects"`
	// Stats tunes the durable hourly rollups.
	Stats Stats `yaml:"stats"`
	// Objects tunes how the sources and destinations created through the
	// API reach every replica.
	Objects Objects `yaml:"objects"`
	// Alerts watch the duplicate rate, dead letters and backlog.
	Alerts Alerts `yaml:"alerts"`
	// Metrics places GET /metrics.
	Metrics Metrics `yaml:"metrics"`
	// TLS, when set, serves every listener (intake, the API and dashboard,
	// metrics) over TLS with this certificate: for running without a
	// reverse proxy in front.
	TLS TLS `yaml:"tls"`
	// SecretKeysFile names a file of the keys that encrypt the secrets
	// given through the API (a source's, a destination's), as
	// ONCEHOOK_SECRET_KEYS gives them (one or both, not both: see
	// internal/secretbox): relative to the config file's folder.
	SecretKeysFile string `yaml:"secret_keys_file"`

	Sources      []Source      `yaml:"sources"`
	Destinations []Destination `yaml:"destinations"`
	// Upstreams are the user's own APIs oncehook fronts: a reverse proxy
	// that makes each Idempotency-Key take effect once (package
	// idempotency). The old name, apis:, is still read (see renamed.go).
	Upstreams []Upstream `yaml:"upstreams"`

	// dir is the config file's folder, where transform files are read.
	dir string
	// fromAPI names the sources and destinations Merge added ("source/NAME").
	fromAPI map[string]bool
	// renamed are the old names this config used, one warning each.
	renamed []string
}

// File is the path of a file the config names (a transform's script):
// relative to the config file's folder when Load read it.
func (c *Config) File(p string) string {
	if !filepath.IsAbs(p) && c.dir != "" {
		return filepath.Join(c.dir, p)
	}
	return p
}

// Upstream is one of the user's APIs behind the idempotency proxy.
type Upstream struct {
	Name string `yaml:"name"`
	// Listen is its own address; or Prefix, a path prefix on the intake
	// listener (/payments: requests under it go to Upstream as they are).
	Listen      string      `yaml:"listen"`
	Prefix      string      `yaml:"prefix"`
	Upstream    string      `yaml:"upstream"`
	Idempotency Idempotency `yaml:"idempotency"`
}

// Idempotency is an API's Idempotency-Key policy.
type Idempotency struct {
	Methods    []string `yaml:"methods"`     // default POST and PATCH
	RequireKey bool     `yaml:"require_key"` // 400 without a key
	Window     Duration `yaml:"window"`      // how long an answer is kept (default 24h)
	Wait       Duration `yaml:"wait"`        // wait this long for a running twin, instead of 409
	// Lease is how long a request owns its key while the upstream works,
	// renewed as it goes (default 1m): if the proxy dies, or the upstream's
	// connection breaks, a retry after it runs again.
	Lease Duration `yaml:"lease"`
	// Timeout bounds the upstream's work (default 5m). It runs on after
	// the client hangs up, its answer stored for the retry.
	Timeout Duration `yaml:"timeout"`
	// ClientHeaders and ClientCookies name the credentials the upstream
	// knows its clients by (default: the Authorization header): a key is
	// one client's own. A request with a key and none of them gets 400
	// no_client, unless SingleTenant (every caller is one client).
	ClientHeaders []string `yaml:"client_headers"`
	ClientCookies []string `yaml:"client_cookies"`
	SingleTenant  bool     `yaml:"single_tenant"`
	// NotStarted are the upstream's statuses that say it did not start
	// (default 429 and 503): they release the key, so a retry runs again.
	// Every other answer, 5xx included, is stored.
	NotStarted []int `yaml:"not_started"`
}

// API configures the API listener. Without tokens it does not listen.
type API struct {
	Listen string     `yaml:"listen"`
	Tokens []APIToken `yaml:"tokens"`
}

// createsSources reports whether the API may have sources of its own: a
// gateway with a token may run sources created through the API and kept
// in its store (by a token it no longer has, or one made read-only
// since), which its file cannot know of.
func (a API) createsSources() bool { return len(a.Tokens) > 0 }

// APIToken is a bearer token of the API. Its name goes into logs and the
// audit log; a read-only token may only GET; a publishing token may only
// publish.
type APIToken struct {
	Name     string `yaml:"name"`
	Token    string `yaml:"token"`
	ReadOnly bool   `yaml:"read_only"`
	// Publish, when set, makes the token a publisher's: it may POST
	// /v1/publish/{source} for these sources (each an outbox source), and
	// nothing else (every other endpoint, and the dashboard, refuse it).
	Publish []string `yaml:"publish"`
	// Pull, when set, makes the token a consumer's: it may pull and ack
	// the deliveries of these destinations (each a pull destination), and
	// nothing else (every other endpoint, and the dashboard, refuse it).
	Pull []string `yaml:"pull"`
	// Tenant, when set, makes the token one customer's: it sees and acts
	// on that tenant's sources and destinations, their events,
	// deliveries, dead letters, stats and audit, and nothing else (the
	// others answer 404, as if there were none). It creates objects of
	// its tenant only, and reloads nothing.
	Tenant string `yaml:"tenant"`
	// Hash, set instead of Token on a token created through the API
	// (POST /v1/tokens), is the digest of its value ("sha256:<hex>"):
	// the gateway keeps only that, and the file never gives it.
	Hash string `yaml:"-"`
}

// Tenant is one customer's settings, by the name its objects carry.
type Tenant struct {
	Name string `yaml:"name"`
	// Rate bounds the requests intake takes for the tenant's sources, all
	// of them together, on each replica ("100/s"): past it, 429 with
	// Retry-After, and nothing stored; the provider sends again later.
	// So one customer's flood does not take the others' share of the
	// gateway. Unset: no bound.
	Rate Rate `yaml:"rate"`
	// Limits raises what the tenant's own token may set on its
	// destinations past the defaults every tenant's token is held to.
	Limits TenantLimits `yaml:"limits"`
}

// TenantLimits are the most a tenant's token may set on its
// destinations, where the operator allows more than the defaults (a
// destination's timeout 10s, concurrency three quarters of
// delivery.concurrency, retry.max_attempts 12; a script's 50ms, 64MiB and
// 4MiB): a tenant's destination spends the worker's slots, its lease and
// the CPU and memory every tenant's scripts share. Each unset, or under
// its default, leaves the default.
type TenantLimits struct {
	Timeout     Duration              `yaml:"timeout"`
	Concurrency int                   `yaml:"concurrency"`
	Retry       TenantRetryLimits     `yaml:"retry"`
	Transform   TenantTransformLimits `yaml:"transform"`
}

// TenantRetryLimits are TenantLimits' retry.
type TenantRetryLimits struct {
	MaxAttempts int `yaml:"max_attempts"`
}

// TenantTransformLimits are TenantLimits' transform.
type TenantTransformLimits struct {
	Timeout   Duration `yaml:"timeout"`
	MaxMemory ByteSize `yaml:"max_memory"`
	MaxOutput ByteSize `yaml:"max_output"`
}

// TenantEgress is what a tenant's destination (one with a tenant:) may
// reach beyond public addresses. A tenant creates its destinations, and
// sees their attempts' answers: so the gateway dials them only at public
// addresses, never loopback, private (10/8, 172.16/12, 192.168/16,
// fc00::/7), link-local (169.254/16, the cloud's metadata address among
// them; fe80::/10), CGNAT (100.64/10), multicast, unspecified or reserved
// ones, checked at each dial on the address a name resolved to. The
// operator's destinations (no tenant) are not restricted.
type TenantEgress struct {
	// Allow are addresses or CIDR prefixes ("10.0.5.0/24", "fd00::/8",
	// "10.0.5.7") that tenants' destinations may reach too: a service of
	// yours built for them. ["0.0.0.0/0", "::/0"] lifts the restriction
	// (a development gateway on a laptop).
	Allow []string `yaml:"allow"`
}

// Prefixes are Allow's entries, as egress reads them; what does not
// parse (the check reports it) is left out.
func (t TenantEgress) Prefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range t.Allow {
		if p, err := egress.ParseAllow(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// TLS names a certificate and its key, PEM files (a chain: the leaf
// first). Both or neither.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Load reads the certificate and key.
func (t TLS) Load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Metrics places the Prometheus endpoint. By default it is on the intake
// listener (where a scraper that reaches intake finds it); the names of
// sources and destinations, queue depths and alert state are then visible
// to whoever reaches intake, so an operator can move it to an address of
// its own (an internal interface).
type Metrics struct {
	// Listen, when set, serves GET /metrics there and not on intake.
	Listen string `yaml:"listen"`
}

// Stats tunes the hourly rollups (counts per source and destination per
// hour, kept in the store).
type Stats struct {
	// Retention is how long hours are kept (default 90d).
	Retention Duration `yaml:"retention"`
}

// Objects: a change made through the API on one replica is applied there
// at once, and on the others when they learn of it: PostgreSQL's NOTIFY
// at once, and a poll of the stored objects' mark behind it (on SQLite,
// the poll alone).
type Objects struct {
	// Poll is how often a replica reads the stored objects' mark (a digest
	// of their names and versions, never a spec) to apply a change
	// another made: the bound on how late one reaches it when no NOTIFY
	// does (default 10s on PostgreSQL, where NOTIFY comes first; 30s on
	// SQLite). At least MinObjectsPoll.
	Poll Duration `yaml:"poll"`
}

// MinObjectsPoll is the shortest objects.poll: every replica reads the
// store's mark once each poll, and below this that read is the store's
// busiest query, for a bound no user notices.
const MinObjectsPoll = 100 * time.Millisecond

// Alerts: per source, the current hour's duplicate rate against its
// trailing 7-day baseline for the same hour; per destination, dead letters
// rising and the oldest pending delivery getting old. Each alert is logged,
// set as a metric, and optionally POSTed (JSON) to URL, at most once per
// source or destination and hour across every replica.
type Alerts struct {
	// URL and Headers are the first way alerts were sent, kept: a channel
	// of kind json named "url", before Channels.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Channels are where each alert issue's notices go (opened, reminder,
	// resolved): a JSON POST, Slack, Microsoft Teams or Discord incoming
	// webhooks, or email.
	Channels []AlertChannel `yaml:"channels"`
	// DuplicateFactor (default 3) times the baseline, with at least
	// MinVolume events this hour (default 100); the baseline is never taken
	// below BaselineFloor (default 0.02).
	DuplicateFactor float64 `yaml:"duplicate_factor"`
	MinVolume       int64   `yaml:"min_volume"`
	BaselineFloor   float64 `yaml:"baseline_floor"`
	// DeadLetters is how many new dead letters in an hour alert (default 10).
	DeadLetters int64 `yaml:"dead_letters"`
	// OldestPending is how old a pending delivery may get (default 15m).
	OldestPending Duration `yaml:"oldest_pending"`
	// Interval between checks (default 1m).
	Interval Duration `yaml:"interval"`
	// RemindAfter, when set, notifies an issue still open and not
	// acknowledged again after this long without a notice (default: never).
	RemindAfter Duration `yaml:"remind_after"`
}

// AlertChannel is one place alerts are sent. Which fields a kind reads
// is the kind's to check (internal/alert/channel): the webhooks' kinds
// (json, slack, teams, discord) a URL, json its Headers too, email SMTP.
type AlertChannel struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"`
	// Tenant, when set, makes the channel one customer's: it is told of
	// the issues of that tenant's sources and destinations only. A
	// channel of no tenant is told of every issue (the operator's).
	Tenant string `yaml:"tenant"`
	// URL is the webhook's URL; Slack's and Discord's hold their secret,
	// so it is never logged whole.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	SMTP    SMTP              `yaml:"smtp"`
}

// SMTP is the server an email channel sends through, and the message's
// addresses.
type SMTP struct {
	Host string `yaml:"host"`
	// Port defaults to 587 (submission, with STARTTLS).
	Port     int    `yaml:"port"`
	Username string `yaml:"username"`
	// Password: write it as "${ENV}"; it is never logged.
	Password string   `yaml:"password"`
	From     string   `yaml:"from"`
	To       []string `yaml:"to"`
	// StartTLS (default true) upgrades the connection before anything
	// else is said, and fails when the server does not offer it; false
	// only for a relay on a trusted network (the password is then refused
	// but to localhost, by net/smtp's own rule).
	StartTLS *bool `yaml:"starttls"`
}

// Effects tunes the effects ledger.
type Effects struct {
	// Retention is how long a final record (done, failed, expired) is kept
	// for later claims to get its result (default 30d);
	// RetentionByPrefix overrides it per key prefix ("capi:": 8d).
	Retention         Duration            `yaml:"retention"`
	RetentionByPrefix map[string]Duration `yaml:"retention_by_prefix"`
	// MaxLease bounds a claim's lease (default 1h); MaxResult, a result's
	// size (default 1MiB).
	MaxLease  Duration `yaml:"max_lease"`
	MaxResult ByteSize `yaml:"max_result"`
}

// SQLite tunes the embedded store.
type SQLite struct {
	// Synchronous is FULL (default: durable before 200), EXTRA, NORMAL or OFF.
	Synchronous string `yaml:"synchronous"`
}

// Delivery tunes the delivery worker.
type Delivery struct {
	// Concurrency is how many attempts run at once (default 64).
	Concurrency int `yaml:"concurrency"`
	// Lease is how long a worker owns a delivery before another may take it
	// over (default: the longest destination timeout plus 30s).
	Lease Duration `yaml:"lease"`
}

// Source is one inbound endpoint, POST /in/{name}.
type Source struct {
	Name string `yaml:"name"`
	// Tenant, when set, makes the source one customer's: only the API
	// tokens of that tenant (and those of none) see it and its events,
	// and it routes only to its tenant's destinations or to shared ones
	// (of no tenant). See Tenant.
	Tenant  string   `yaml:"tenant"`
	Preset  string   `yaml:"preset"`
	Secrets []string `yaml:"secrets"`
	// Window is how long keys are kept for dedup (default: the preset's,
	// which covers the provider's retry horizon).
	Window Duration `yaml:"window"`
	// BodyRetention, when set, lets an event's body go before its key:
	// this long after it arrived, once no delivery needs it (none pending
	// or dead-lettered), the body is dropped and the key stays a barrier
	// for the rest of the window. A replay of such an event says its body
	// is gone. Unset: the body is kept as long as the key.
	BodyRetention Duration `yaml:"body_retention"`
	// Destinations get the source's events: each a plain name (every
	// event), or {name, types, filter} (only the events it wants).
	Destinations []SourceDestination `yaml:"destinations"`
	// Key overrides the preset's key: header:Name, json:path, or several for
	// a composite.
	Key []string `yaml:"key"`
	// Type overrides the preset's event type (the generic preset has none
	// without it): rules of the same form; the parts found are joined
	// with ".".
	Type []string `yaml:"type"`
	// OnMissingKey is accept (default: stored as keyless, without dedup) or
	// reject (422).
	OnMissingKey string `yaml:"on_missing_key"`
	// OnBadSignature is reject (default: 401) or discard (200, nothing
	// stored), for providers that disable an endpoint after failures.
	OnBadSignature string `yaml:"on_bad_signature"`
	// Tolerance for signed timestamps (default: the preset's).
	Tolerance Duration `yaml:"tolerance"`
	// Signature describes the generic preset's signature header.
	Signature Signature `yaml:"signature"`
	// Unsigned lets a generic source accept requests with no signature.
	Unsigned bool `yaml:"unsigned"`
	// VerifyToken answers WhatsApp's GET hub.verify_token handshake.
	VerifyToken string `yaml:"verify_token"`
	// PublicURL is this source's full URL as the provider calls it (the URL
	// configured at the provider), for presets that sign the URL (twilio)
	// behind a proxy that rewrites it; the request's query is added to it.
	PublicURL string `yaml:"public_url"`
	// Order, when set, delivers each entity's events in order to each
	// destination (see Order).
	Order *Order `yaml:"order"`
	// Consume, when set, takes the source's events from a queue (NATS
	// JetStream, RabbitMQ or Kafka) instead of POST /in/{name}, which then
	// answers 404. Without a preset, the source's key and type rules read
	// each message (the generic preset, unsigned: the broker's credentials
	// say who may publish).
	Consume *Consume `yaml:"consume"`
	// Outbox, when set, takes the source's events only from the user's
	// own code: Outbox.PublishTx in the user's transaction, or POST
	// /v1/publish/{name} on the API listener with a token that may publish
	// to it. POST /in/{name} then answers 404. Without a preset it is the
	// generic one, unsigned: the caller's database access or API token says
	// who may publish. The key is the caller's (Idempotency-Key), else the
	// source's key rules read the body.
	Outbox bool `yaml:"outbox"`
}

// HTTP reports whether the source takes requests at POST /in/{name}: a
// queue's consumer does not, nor an outbox source (their presets may be
// unsigned).
func (s *Source) HTTP() bool { return s.Consume == nil && !s.Outbox }

// Elsewhere names where the source's events come from when it is not
// POST /in/{name}, for people ("the nats stream ORDERS", "the outbox");
// "" for an HTTP source.
func (s *Source) Elsewhere() string {
	if s.Outbox {
		return "the outbox (PublishTx, or POST /v1/publish/" + s.Name + " on the API listener)"
	}
	if s.Consume != nil {
		return "the " + s.Consume.Broker + " " + s.Consume.Where()
	}
	return ""
}

// Order asks for order per entity: the source's events about one entity
// (an order, a payment) reach each destination one at a time, and an event
// older than one already delivered is never delivered as if it were new.
type Order struct {
	// Entity is the rule (header:Name or json:path) that names what an
	// event is about; default: the preset's (provider.Traits.Order).
	Entity string `yaml:"entity"`
	// Version is the rule that orders two events of one entity (an
	// integer or an RFC 3339 timestamp), or "arrival"; default: the
	// preset's when Entity is the preset's too (a version belongs to its
	// entity), else arrival.
	Version string `yaml:"version"`
	// Mode is latest (default: each entity one at a time as events come,
	// older ones held back as stale) or fifo (in version order; a failing
	// event holds its entity's later ones). The old name of latest, stale,
	// is still read (see renamed.go).
	Mode string `yaml:"mode"`
	// OnStale is hold (default: a stale event is marked stale, counted,
	// replayable) or deliver (sent anyway, with Oncehook-Stale and the
	// current version in headers).
	OnStale string `yaml:"on_stale"`
	// VersionUnit says what an integer version counts: sequence (a
	// counter), unix (seconds) or unix_ms; default: the preset's when the
	// version is the preset's (stripe: unix), else sequence. An RFC 3339
	// version is a time whatever this says.
	VersionUnit string `yaml:"version_unit"`
	// MaxAhead bounds a version that names a time (RFC 3339, unix, unix_ms):
	// one more than this after the event's arrival goes outside the order
	// (delivered, counted as unordered) instead of making its entity's
	// later events stale until that time comes. Default 1h.
	MaxAhead Duration `yaml:"max_ahead"`
}

// Signature describes a generic HMAC-SHA256 signature header.
type Signature struct {
	Header   string `yaml:"header"`
	Encoding string `yaml:"encoding"`
	Prefix   string `yaml:"prefix"`
}

// Destination is where events are delivered.
type Destination struct {
	Name string `yaml:"name"`
	// Tenant, when set, makes the destination one customer's, as a
	// Source's: only its tenant's sources route to it.
	Tenant  string   `yaml:"tenant"`
	URL     string   `yaml:"url"`
	Timeout Duration `yaml:"timeout"`
	// Secret, when set (whsec_<base64>), signs deliveries the Standard
	// Webhooks way so receivers can verify them with any such library.
	Secret  string            `yaml:"secret"`
	Headers map[string]string `yaml:"headers"`
	Retry   Retry             `yaml:"retry"`
	// RetryOn and FinalOn override which answers are retried and which
	// are final (a dead letter at once): statuses (429), classes (5xx) or
	// ranges (500-503), the narrowest rule deciding, over the default
	// table (3xx, 400, 401, 403, 404, 410, 422 final; other failures
	// retried). For HTTP destinations and pull consumers' acks.
	RetryOn []string `yaml:"retry_on"`
	FinalOn []string `yaml:"final_on"`
	// StandardWebhooksAbort honours the receiver's webhook-delivery
	// answer header (Standard Webhooks): abort-message makes that failed
	// delivery final, disable pauses the destination (audited).
	StandardWebhooksAbort bool `yaml:"standard_webhooks_abort"`
	// Traceparent, when false, sends no W3C traceparent with deliveries
	// that are traced (by default each attempt's span travels with it).
	Traceparent *bool `yaml:"traceparent"`
	// Rate bounds the sends to this destination across every replica:
	// "10/s", "600/m", "5000/h". A delivery waiting for the limit spends
	// no attempt.
	Rate Rate `yaml:"rate"`
	// Concurrency bounds the attempts in flight to this destination from
	// one replica (delivery.concurrency bounds them all); unset: three
	// quarters of delivery.concurrency when there are other destinations
	// (so that a slow one leaves them room), none of its own when it is the
	// only one. A delivery waiting for a slot spends no attempt.
	Concurrency int `yaml:"concurrency"`
	// Breaker holds the destination's deliveries while it is failing (on
	// by default; see Breaker).
	Breaker Breaker `yaml:"breaker"`
	// Publish, when set, makes the destination a queue (NATS JetStream,
	// RabbitMQ or Kafka) instead of an HTTP URL: each attempt is a publish
	// the broker acknowledges.
	Publish *Publish `yaml:"publish"`
	// Pull, when set, makes the destination one whose deliveries wait to
	// be taken (POST /v1/destinations/{name}/pull, then an ack each)
	// instead of being POSTed: for a laptop behind NAT (`oncehook
	// listen`) or a service with no inbound port. Its timeout is how long
	// an attempt may take from when it is offered to its ack (default
	// DefaultPullTimeout).
	Pull *Pull `yaml:"pull"`
	// Transform reshapes what the destination receives with a script
	// (see Transform); unset: it receives the event as it came.
	Transform *Transform `yaml:"transform"`
}

// Kind is the destination's transport: http, or the broker it publishes to.
func (d *Destination) Kind() string {
	if d.Pull != nil {
		return "pull"
	}
	if k := d.Publish.Kind(); k != "" {
		return k
	}
	return "http"
}

// Pull is a pull destination's settings: none yet (`pull: {}`).
type Pull struct{}

// Transform is a destination's transformation: a JavaScript file beside
// the config (`transform: transforms/capi.js`) or inline
// (`transform: {inline: "..."}`), with its bounds. The wiring compiles it
// where the config is checked whole (LoadWith, ParseWith, New, a reload):
// a script that does not compile is the config's error, named by file and
// line, and refuses a reload.
type Transform struct {
	// File is the script's path, relative to the config file's folder.
	File string `yaml:"file"`
	// Inline is the script's text, instead of a file.
	Inline string `yaml:"inline"`
	// Timeout bounds one run (default 50ms).
	Timeout Duration `yaml:"timeout"`
	// MaxMemory bounds a run's allocations (default 64MiB).
	MaxMemory ByteSize `yaml:"max_memory"`
	// MaxOutput bounds what a run may send: body and headers (default 4MiB).
	MaxOutput ByteSize `yaml:"max_output"`
	// Env is what the script reads as process.env, as Hookdeck's scripts
	// read theirs: names to values, taken from the gateway's environment
	// with ${NAME} like every value of the file. They are secrets: what
	// oncehook shows of a run (its errors and logs, the dashboard's and
	// transform test's preview of what it sends, a destination's answer)
	// has them masked. A script that reads a name not set here does not
	// compile.
	Env map[string]string `yaml:"env"`
	// Digest is the script's version (sha256 of its text), set when it is
	// compiled: a changed file is a changed destination on reload.
	Digest string `yaml:"-"`
}

// transformFields is Transform's mapping form, for the field check and the
// decoder.
type transformFields Transform

// UnmarshalYAML takes a file's path or a mapping.
func (t *Transform) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*t = Transform{}
		return n.Decode(&t.File)
	}
	return n.Decode((*transformFields)(t))
}

// Name is what the script's errors call it: its file, or the destination's
// inline script.
func (t *Transform) Name(destination string) string {
	if t.File != "" {
		return t.File
	}
	return "destinations." + destination + ".transform.inline"
}

// Breaker configures a destination's circuit breaker. It opens after
// Failures consecutive failed attempts (default 10), or a FailureRatio
// (default 0.5) over Window (default 1m) once MinAttempts (default 20)
// were made in it; while open, the destination's deliveries are held (no
// attempt spent, nothing dead-lettered, other destinations unaffected).
// After Cooldown (default 30s, doubling on each reopen up to MaxCooldown,
// default 10m) one probe goes through: a success closes it. Failures are
// 5xx, 429, timeouts and connection errors; a permanent 4xx is the event's
// problem, not the destination's.
type Breaker struct {
	Off          bool     `yaml:"off"`
	Failures     int      `yaml:"failures"`
	FailureRatio float64  `yaml:"failure_ratio"`
	Window       Duration `yaml:"window"`
	MinAttempts  int      `yaml:"min_attempts"`
	Cooldown     Duration `yaml:"cooldown"`
	MaxCooldown  Duration `yaml:"max_cooldown"`
}

// Retry is a destination's retry policy.
type Retry struct {
	MaxAttempts int      `yaml:"max_attempts"`
	BaseDelay   Duration `yaml:"base_delay"`
	MaxDelay    Duration `yaml:"max_delay"`
}

// SourceDestination is one destination of a source, and which of the
// source's events it wants: Types (exact names, or a prefix ending in *)
// and Filter (the JSON filter syntax of Hookdeck and Convoy, over body,
// headers, query and path: see internal/route). An event must pass both
// that are set; a plain name in the config wants every event.
type SourceDestination struct {
	Name   string         `yaml:"name"`
	Types  []string       `yaml:"types"`
	Filter map[string]any `yaml:"filter"`
}

// sourceDestinationFields is SourceDestination's mapping form, for the
// field check and the decoder.
type sourceDestinationFields SourceDestination

// UnmarshalYAML takes a plain name or a mapping.
func (d *SourceDestination) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*d = SourceDestination{}
		return n.Decode(&d.Name)
	}
	return n.Decode((*sourceDestinationFields)(d))
}

// MarshalYAML writes a destination that wants everything as its name.
func (d SourceDestination) MarshalYAML() (any, error) {
	if len(d.Types) == 0 && d.Filter == nil {
		return d.Name, nil
	}
	return sourceDestinationFields(d), nil
}

// Routed reports whether the destination wants only some events.
func (d SourceDestination) Routed() bool { return len(d.Types) > 0 || d.Filter != nil }

// To is destinations that want every event, by name.
func To(names ...string) []SourceDestination {
	out := make([]SourceDestination, len(names))
	for i, n := range names {
		out[i] = SourceDestination{Name: n}
	}
	return out
}

// DestinationNames are the source's destinations, by name.
func (s *Source) DestinationNames() []string {
	out := make([]string, len(s.Destinations))
	for i, d := range s.Destinations {
		out[i] = d.Name
	}
	return out
}

// StoreScheme is the scheme of the store's URL, which names its kind:
// sqlite, postgres, ... ("" when it has none).
func (c *Config) StoreScheme() string {
	scheme, _, ok := strings.Cut(c.Store, "://")
	if !ok {
		return ""
	}
	return scheme
}

// TrustedProxyPrefixes parses trusted_proxies: addresses or CIDR prefixes.
func (c *Config) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, p := range c.TrustedProxies {
		if pr, err := netip.ParsePrefix(p); err == nil {
			out = append(out, pr.Masked())
			continue
		}
		a, err := netip.ParseAddr(p)
		if err != nil {
			return nil, fmt.Errorf("[%d] %q: want an address or a CIDR prefix (10.0.0.0/8)", i, p)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Redact returns a URL fit for logs and banners: the password of its user
// info and the values in its query become "xxxxx" (see redact.URL, the one
// function every URL shown goes through). A value that is not a URL is not
// printed at all.
func Redact(raw string) string { return redact.URL(raw) }

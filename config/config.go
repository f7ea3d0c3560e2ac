// Package config reads oncehook's YAML configuration: ${ENV} expansion for
// secrets, strict field names, defaults, and validation whose errors name the
// field at fault (sources[1].secrets[0], destinations[0].url, ...).
package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oncehook/oncehook/internal/duration"
	"github.com/oncehook/oncehook/internal/lease"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/internal/transform"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
)

// Config is the whole configuration of a gateway.
type Config struct {
	Listen string `yaml:"listen"`
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
	// MaxInflightBytes bounds the request bodies held in memory at once
	// (default 64 MiB, at least max_body_size); over it, intake answers 503
	// with Retry-After instead of running out of memory.
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
	// Alerts watch the duplicate rate, dead letters and backlog.
	Alerts Alerts `yaml:"alerts"`
	// Metrics places GET /metrics.
	Metrics Metrics `yaml:"metrics"`
	// TLS, when set, serves every listener (intake, the API and dashboard,
	// metrics) over TLS with this certificate: for running without a
	// reverse proxy in front.
	TLS TLS `yaml:"tls"`

	Sources      []Source      `yaml:"sources"`
	Destinations []Destination `yaml:"destinations"`
	// APIs are the user's own APIs oncehook fronts: a reverse proxy that
	// makes each Idempotency-Key take effect once (package idempotency).
	APIs []UpstreamAPI `yaml:"apis"`

	// dir is the config file's folder, where transform files are read.
	dir string
	// scripts are the destinations' compiled transformations, by name:
	// outside Destinations, so that comparing two configs' destinations
	// compares their scripts' digests, not their runtimes.
	scripts map[string]*transform.Script
}

// UpstreamAPI is one of the user's APIs behind the idempotency proxy.
type UpstreamAPI struct {
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

// Alerts: per source, the current hour's duplicate rate against its
// trailing 7-day baseline for the same hour; per destination, dead letters
// rising and the oldest pending delivery getting old. Each alert is logged,
// set as a metric, and optionally POSTed (JSON) to URL, at most once per
// source or destination and hour across every replica.
type Alerts struct {
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
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
	Name    string   `yaml:"name"`
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
// POST /in/{name}, for people ("the NATS stream ORDERS", "the outbox");
// "" for an HTTP source.
func (s *Source) Elsewhere() string {
	if s.Outbox {
		return "the outbox (PublishTx, or POST /v1/publish/" + s.Name + " on the API listener)"
	}
	if s.Consume != nil {
		return "the " + s.Consume.Broker() + " " + s.Consume.Where()
	}
	return ""
}

// Order asks for order per entity: the source's events about one entity
// (an order, a payment) reach each destination one at a time, and an event
// older than one already delivered is never delivered as if it were new.
type Order struct {
	// Entity is the rule (header:Name or json:path) that names what an
	// event is about; default: the preset's (provider.DefaultOrder).
	Entity string `yaml:"entity"`
	// Version is the rule that orders two events of one entity (an
	// integer or an RFC 3339 timestamp), or "arrival"; default: the
	// preset's when Entity is the preset's too (a version belongs to its
	// entity), else arrival.
	Version string `yaml:"version"`
	// Mode is stale (default: each entity one at a time as events come,
	// older ones held back as stale) or fifo (in version order; a failing
	// event holds its entity's later ones).
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
	Name    string   `yaml:"name"`
	URL     string   `yaml:"url"`
	Timeout Duration `yaml:"timeout"`
	// Secret, when set (whsec_<base64>), signs deliveries the Standard
	// Webhooks way so receivers can verify them with any such library.
	Secret  string            `yaml:"secret"`
	Headers map[string]string `yaml:"headers"`
	Retry   Retry             `yaml:"retry"`
	// Traceparent, when false, sends no W3C traceparent with deliveries
	// that are traced (by default each attempt's span travels with it).
	Traceparent *bool `yaml:"traceparent"`
	// Rate bounds the sends to this destination across every replica:
	// "10/s", "600/m", "5000/h". A delivery waiting for the limit spends
	// no attempt.
	Rate Rate `yaml:"rate"`
	// Concurrency bounds the attempts in flight to this destination from
	// one replica (delivery.concurrency bounds them all); unset: no bound
	// of its own. A delivery waiting for a slot spends no attempt.
	Concurrency int `yaml:"concurrency"`
	// Breaker holds the destination's deliveries while it is failing (on
	// by default; see Breaker).
	Breaker Breaker `yaml:"breaker"`
	// Publish, when set, makes the destination a queue (NATS JetStream,
	// RabbitMQ or Kafka) instead of an HTTP URL: each attempt is a publish
	// the broker acknowledges.
	Publish *Publish `yaml:"publish"`
	// Transform reshapes what the destination receives with a script
	// (see Transform); unset: it receives the event as it came.
	Transform *Transform `yaml:"transform"`
}

// Kind is the destination's transport: http, or the broker it publishes to.
func (d *Destination) Kind() string {
	if k := d.Publish.Kind(); k != "" {
		return k
	}
	return "http"
}

// Transform is a destination's transformation: a JavaScript file beside
// the config (`transform: transforms/capi.js`) or inline
// (`transform: {inline: "..."}`), with its bounds. The config compiles it
// where it is read (Load, Parse, a reload): a script that does not compile
// is the config's error, named by file and line, and refuses a reload.
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

// Script is the destination's compiled transformation, nil when it has
// none. Load, Parse and Validate compile every script once.
func (c *Config) Script(destination string) *transform.Script {
	return c.scripts[destination]
}

// CloseScripts releases the compiled scripts' idle runtimes (a reload calls
// it on the config it replaced; runs in flight finish on theirs).
func (c *Config) CloseScripts() {
	for _, s := range c.scripts {
		s.Close()
	}
}

// compileTransform reads and compiles a destination's script.
func (c *Config) compileTransform(d Destination) (*transform.Script, error) {
	t := d.Transform
	if (t.File == "") == (t.Inline == "") {
		return nil, errors.New("want a script's file (transform: path.js) or its text (transform: {inline: ...}), one of them")
	}
	src := t.Inline
	if t.File != "" {
		p := t.File
		if !filepath.IsAbs(p) && c.dir != "" {
			p = filepath.Join(c.dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read the script: %w", err)
		}
		src = string(b)
	}
	if t.Timeout < 0 || t.MaxMemory < 0 || t.MaxOutput < 0 {
		return nil, errors.New("timeout, max_memory and max_output cannot be negative")
	}
	if t.MaxMemory > 0 && t.MaxMemory < 1<<20 {
		return nil, fmt.Errorf("max_memory %d bytes: at least 1MiB (the sandbox itself needs some)", t.MaxMemory)
	}
	return transform.Compile(t.Name(d.Name), src, transform.Options{
		Timeout: time.Duration(t.Timeout), MaxMemory: int64(t.MaxMemory), MaxOutput: int64(t.MaxOutput),
	})
}

// Rate is a send rate: N per second, minute or hour.
type Rate struct {
	N   int
	Per time.Duration
}

// UnmarshalYAML reads "10/s", "600/m" or "5000/h".
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	num, unit, ok := strings.Cut(strings.TrimSpace(n.Value), "/")
	v, err := strconv.Atoi(strings.TrimSpace(num))
	if !ok || err != nil || v < 1 {
		return fmt.Errorf("%q: want a count per unit, e.g. 10/s, 600/m or 5000/h", n.Value)
	}
	switch strings.TrimSpace(unit) {
	case "s":
		r.Per = time.Second
	case "m":
		r.Per = time.Minute
	case "h":
		r.Per = time.Hour
	default:
		return fmt.Errorf("%q: the unit is s, m or h", n.Value)
	}
	r.N = v
	return nil
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

// Duration is a time.Duration that also reads days ("7d", "1d12h"). A
// duration written in the config must be positive and at most MaxDuration:
// a zero would silently mean "the default", and a huge number of days
// would overflow into something short.
type Duration time.Duration

// MaxDuration is the longest duration a config accepts (ten years).
const MaxDuration = duration.Max

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive (leave the field out for its default)", n.Value)
	}
	*d = Duration(v)
	return nil
}

// ParseDuration is time.ParseDuration with a leading whole number of days,
// refusing anything longer than MaxDuration (before it can overflow).
func ParseDuration(s string) (time.Duration, error) { return duration.Parse(s) }

// ByteSize is a size in bytes that also reads KiB, MiB and GiB ("5MiB").
type ByteSize int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	s := strings.TrimSpace(n.Value)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(v), u.m
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > (1<<40)/mult {
		return fmt.Errorf("size %q: want e.g. 5MiB, 512KiB or 1048576", n.Value)
	}
	*b = ByteSize(v * mult)
	return nil
}

// expandEnv replaces environment references in every scalar value of the
// document (never in keys or comments, and never as YAML structure), the
// way a shell does:
//
//	${NAME}            the variable; unset is an error
//	${NAME:-default}   default when NAME is unset or empty
//	${NAME-default}    default when NAME is unset
//	$NAME              as ${NAME}
//	$$                 a literal $
//
// Any other use of $ is an error naming the field, so that no secret can
// silently become the text "${NOPE:-x}" or "$SECRET". An expanded value is
// never expanded again.
func expandEnv(root *yaml.Node, lookup func(string) (string, bool)) ([]error, pathSet) {
	var errs []error
	var paths pathSet
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.ScalarNode:
			if !strings.Contains(n.Value, "$") {
				return
			}
			v, err := expandValue(n.Value, lookup)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w (line %d)", path, err, n.Line))
				paths = append(paths, path)
				return
			}
			// The value is text, whatever YAML would make of it ("true",
			// "a: b"), unless the field wants a number (concurrency).
			n.Value, n.Tag, n.Style = v, "", 0
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(path, n.Content[i].Value))
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(root, "")
	return errs, paths
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func isNameStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
func isNameChar(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' }

// expandValue expands one scalar (see expandEnv).
func expandValue(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", fmt.Errorf("%q: an unclosed ${", s)
			}
			ref := rest[1:end]
			j := 0
			for j < len(ref) && isNameChar(ref[j]) {
				j++
			}
			name, op := ref[:j], ref[j:]
			if name == "" || !isNameStart(name[0]) {
				return "", fmt.Errorf("${%s}: want ${NAME}, ${NAME:-default} or ${NAME-default} (write $$ for a literal $)", ref)
			}
			v, set := lookup(name)
			switch {
			case op == "":
				if !set {
					return "", fmt.Errorf("environment variable %s is not set", name)
				}
			case strings.HasPrefix(op, ":-"):
				if !set || v == "" {
					v = op[2:]
				}
			case strings.HasPrefix(op, "-"):
				if !set {
					v = op[1:]
				}
			default:
				return "", fmt.Errorf("${%s}: only ${NAME}, ${NAME:-default} and ${NAME-default} are supported (write $$ for a literal $)", ref)
			}
			b.WriteString(v)
			i += end + 1
		case rest != "" && isNameStart(rest[0]):
			j := 1
			for j < len(rest) && isNameChar(rest[j]) {
				j++
			}
			v, set := lookup(rest[:j])
			if !set {
				return "", fmt.Errorf("environment variable %s ($%s) is not set (write $$ for a literal $)", rest[:j], rest[:j])
			}
			b.WriteString(v)
			i += j
		default:
			return "", fmt.Errorf("%q: a $ that starts no variable; write $$ for a literal $", s)
		}
	}
	return b.String(), nil
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := parse(text, os.LookupEnv, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// ErrEmpty is returned for a config with no settings at all.
var ErrEmpty = errors.New("the config is empty: it needs at least sources (oncehook init writes a commented sample)")

// Parse checks field names and types (every error names the field:
// sources[0].presett: unknown field), expands environment references,
// applies defaults and validates, and reports every error at once: fixing
// one must not reveal the next. What the checks say of a field that is
// already reported is left out as its echo: a field of the wrong type is
// validated as if unset, and a record with a misspelled field (a
// misspelled preset is also a missing one) reports only the misspelling.
// Only a misspelled top-level section stops there: the whole rest would
// be its echo.
//
// A destination's transform file is read relative to the working directory
// here; Load reads it relative to the config file's folder.
func Parse(text []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return parse(text, lookupEnv, "")
}

func parse(text []byte, lookupEnv func(string) (string, bool), dir string) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, ErrEmpty
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, ErrEmpty
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the config must be a mapping of settings (listen, store, sources, destinations, ...)", root.Line)
	}
	// Every error at once, each with its field and line: the environment
	// references, then the fields' names and types, then what they say.
	lines := linesOf(root)
	envErrs, envPaths := expandEnv(root, lookupEnv)
	var faulty pathSet
	errs := append(envErrs, checkNode(root, reflect.TypeFor[Config](), "", &faulty)...)
	if slices.Contains(faulty, "") {
		return nil, errors.Join(errs...) // a misspelled section
	}
	cfg := Config{dir: dir}
	if err := root.Decode(&cfg); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	for _, err := range cfg.validate(lines) {
		// A field whose reference did not expand, or that is misspelled
		// or of the wrong type, is already reported; what validation says
		// of its text (or its default) is only the echo.
		if !envPaths.covers(err.Error()) && !faulty.covers(err.Error()) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &cfg, nil
}

// fieldLines maps a field's path (sources[0].preset) to its line.
type fieldLines map[string]int

// linesOf reads every field's line from the document.
func linesOf(root *yaml.Node) fieldLines {
	lines := fieldLines{}
	var walk func(n *yaml.Node, path string, line int)
	walk = func(n *yaml.Node, path string, line int) {
		if path != "" {
			lines[path] = line
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(path, n.Content[i].Value), n.Content[i].Line)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i), c.Line)
			}
		}
	}
	walk(root, "", root.Line)
	return lines
}

// at is " (line N)" for path, or for the nearest enclosing field written
// in the file (a default has no line of its own); "" without lines.
func (l fieldLines) at(path string) string {
	for p := path; p != ""; {
		if n, ok := l[p]; ok {
			return fmt.Sprintf(" (line %d)", n)
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ""
}

// pathSet is fields already reported: their environment references
// failed, or they are of the wrong type, or (for a misspelled field) the
// record that holds them.
type pathSet []string

// covers reports whether an error (written "path: ...") is about one of
// the set's fields, a field inside one, or the top-level record (a source,
// a destination) that holds one: a record's own check reads its fields
// together (a source's preset options), so its error may be their echo.
// An error about any other field around one is reported: a destination
// listed twice is still listed twice, whatever its filter's reference.
func (s pathSet) covers(msg string) bool {
	field, _, _ := strings.Cut(msg, ": ")
	record := strings.HasSuffix(field, "]") && !strings.ContainsAny(field, ". ")
	for _, p := range s {
		if field == p || strings.HasPrefix(field, p+".") || strings.HasPrefix(field, p+"[") ||
			record && (strings.HasPrefix(p, field+".") || strings.HasPrefix(p, field+"[")) {
			return true
		}
	}
	return false
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkNode checks that n can be decoded into a value of type t, naming the
// field path of every problem: unknown fields, a list where a value is
// wanted, a number or duration that does not parse. It adds each field at
// fault to faulty (for a misspelled field, its record: "" for the top
// level) and mends the document so that the rest still decodes: a value
// of the wrong type becomes unset, a field given twice keeps its first.
func checkNode(n *yaml.Node, t reflect.Type, path string, faulty *pathSet) []error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	where := path
	if where == "" {
		where = "config"
	}
	fail := func(format string, args ...any) []error {
		err := fmt.Errorf("%s: %s (line %d)", where, fmt.Sprintf(format, args...), n.Line)
		*faulty = append(*faulty, path)
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
		return []error{err}
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // an empty value: the default
	}
	for t.Kind() == reflect.Pointer {
		// An optional block (consume:, publish:, order:) is checked as
		// the block it points to: its misspelled fields are named too.
		t = t.Elem()
	}
	if t == reflect.TypeFor[Transform]() {
		if n.Kind == yaml.ScalarNode {
			return checkNode(n, reflect.TypeFor[string](), path, faulty)
		}
		return checkNode(n, reflect.TypeFor[transformFields](), path, faulty)
	}
	if t == reflect.TypeFor[SourceDestination]() {
		if n.Kind == yaml.ScalarNode {
			return checkNode(n, reflect.TypeFor[string](), path, faulty)
		}
		return checkNode(n, reflect.TypeFor[sourceDestinationFields](), path, faulty)
	}
	if t == reflect.TypeFor[[]string]() && n.Kind == yaml.ScalarNode && (strings.HasSuffix(path, ".key") || strings.HasSuffix(path, ".type")) {
		// A source's one key or type rule may be written alone
		// (type: "json:event"): it is a list of one.
		one := *n
		*n = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: n.Line, Column: n.Column, Content: []*yaml.Node{&one}}
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if n.Kind != yaml.ScalarNode {
			return fail("want a single value")
		}
		if err := reflect.New(t).Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			return fail("%v", err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping of fields")
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		var errs []error
		seen := map[string]bool{}
		kept := n.Content[:0:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i].Value, n.Content[i+1]
			ft, ok := fields[key]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("%s: unknown field (line %d)%s", join(path, key), n.Content[i].Line, suggest(key, fields)))
				*faulty = append(*faulty, path)
			case seen[key]:
				errs = append(errs, fmt.Errorf("%s: given twice (line %d)", join(path, key), n.Content[i].Line))
				*faulty = append(*faulty, join(path, key))
				continue // the decoder refuses a key given twice
			default:
				errs = append(errs, checkNode(val, ft, join(path, key), faulty)...)
			}
			seen[key] = true
			kept = append(kept, n.Content[i], val)
		}
		n.Content = kept
		return errs
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fail("want a list")
		}
		var errs []error
		for i, c := range n.Content {
			errs = append(errs, checkNode(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), faulty)...)
		}
		return errs
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping")
		}
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, checkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), faulty)...)
		}
		return errs
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return fail("want a single value")
		}
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode {
			return fail("want a number")
		}
		if _, err := strconv.Atoi(n.Value); err != nil {
			return fail("%q: want a whole number", n.Value)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode {
			return fail("want true or false")
		}
		if _, err := strconv.ParseBool(n.Value); err != nil {
			return fail("%q: want true or false", n.Value)
		}
	}
	return nil
}

// suggest names the known field closest to a misspelled one.
func suggest(key string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	return suggestOne(key, names)
}

// suggestOne names the known word closest to a misspelled one, if any is
// close: "; did you mean stripe?".
func suggestOne(key string, known []string) string {
	best, bestDist := "", 3
	for _, name := range known {
		if d := editDistance(key, name); d < bestDist || d == bestDist && name < best {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Defaults every config gets.
const (
	DefaultListen    = "127.0.0.1:8080"
	DefaultStore     = "sqlite://./oncehook.db"
	DefaultAPIListen = "127.0.0.1:8081"
	// MaxMaxBodySize bounds max_body_size: a body is stored whole and sent
	// in one database message (PostgreSQL refuses messages over 1 GiB).
	MaxMaxBodySize = 256 << 20
)

func (c *Config) setDefaults() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Store == "" {
		c.Store = DefaultStore
	}
	if c.API.Listen == "" {
		c.API.Listen = DefaultAPIListen
	}
	if c.Stats.Retention == 0 {
		c.Stats.Retention = Duration(90 * 24 * time.Hour)
	}
	var longest time.Duration
	for i := range c.Destinations {
		d := &c.Destinations[i]
		if d.Timeout == 0 {
			d.Timeout = Duration(10 * time.Second)
		}
		longest = max(longest, time.Duration(d.Timeout))
		if d.Retry.MaxAttempts == 0 {
			d.Retry.MaxAttempts = 12
		}
		if d.Retry.BaseDelay == 0 {
			d.Retry.BaseDelay = Duration(time.Second)
		}
		if d.Retry.MaxDelay == 0 {
			d.Retry.MaxDelay = Duration(time.Hour)
		}
	}
	if c.Delivery.Lease == 0 {
		c.Delivery.Lease = Duration(lease.Default(longest))
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		if s.Outbox {
			// A publish without a key could not be told from its retry:
			// an outbox source refuses one (422), and reads the caller's
			// Idempotency-Key unless its key rules say otherwise.
			if s.OnMissingKey == "" {
				s.OnMissingKey = "reject"
			}
			if len(s.Key) == 0 {
				s.Key = []string{"header:Idempotency-Key"}
			}
		}
		if s.OnMissingKey == "" {
			s.OnMissingKey = "accept"
		}
		if s.OnBadSignature == "" {
			s.OnBadSignature = "reject"
		}
		if s.Preset == "" && (s.Consume != nil || s.Outbox) {
			// A queue's messages need no provider: the key and type rules
			// read them, and the broker authenticated the publisher. An
			// outbox's publishes neither: the caller's transaction or API
			// token did.
			s.Preset, s.Unsigned = "generic", true
		}
		if s.Window == 0 && s.Preset != "" {
			if p, err := provider.New(s.Preset, s.ProviderOptions()); err == nil {
				s.Window = Duration(p.DefaultWindow())
			}
		}
		if o := s.Order; o != nil {
			entity, version, _ := provider.DefaultOrder(s.Preset)
			if o.Entity == "" {
				o.Entity = entity
				if o.Version == "" {
					o.Version = version
					if o.VersionUnit == "" {
						o.VersionUnit = string(provider.DefaultVersionUnit(s.Preset))
					}
				}
			}
			if o.Version == "" {
				o.Version = provider.Arrival
			}
			if o.Mode == "" {
				o.Mode = "stale"
			}
			if o.OnStale == "" {
				o.OnStale = "hold"
			}
		}
	}
	return nil
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

// ProviderOptions are the preset options this source configures.
func (s *Source) ProviderOptions() provider.Options {
	return provider.Options{
		Secrets:     s.Secrets,
		Tolerance:   time.Duration(s.Tolerance),
		Generic:     provider.GenericOptions{Header: s.Signature.Header, Encoding: s.Signature.Encoding, Prefix: s.Signature.Prefix},
		Key:         s.Key,
		Type:        s.Type,
		Unsigned:    s.Unsigned,
		VerifyToken: s.VerifyToken,
		PublicURL:   s.PublicURL,
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// headerNameRE is an HTTP header's (or a cookie's) name: RFC 9110 token
// characters.
var headerNameRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// Validate checks the configuration and names the field at fault.
func (c *Config) Validate() error { return errors.Join(c.validate(nil)...) }

// validate is Validate, each error also naming the line of its field (or
// of the nearest enclosing field written in the file) when lines is set.
func (c *Config) validate(lines fieldLines) []error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s%s", field, fmt.Sprintf(format, args...), lines.at(field)))
	}
	switch c.StoreKind() {
	case "sqlite":
		if p := c.SQLitePath(); p == "" || p == ":memory:" || strings.HasPrefix(p, "file::memory:") || strings.Contains(p, "mode=memory") {
			fail("store", "%q: want sqlite://path/to/file.db (an empty path or an in-memory database is not durable: every 200 would be a lie)", c.Store)
		}
	case "postgres":
	default:
		fail("store", "%q: want sqlite://path or postgres://...", Redact(c.Store))
	}
	if c.Redis != "" && !strings.HasPrefix(c.Redis, "redis://") && !strings.HasPrefix(c.Redis, "rediss://") {
		fail("redis", "%q: want redis://host:port/db", Redact(c.Redis))
	}
	if c.MaxBodySize > MaxMaxBodySize {
		fail("max_body_size", "%d bytes: at most 256MiB", c.MaxBodySize)
	}
	if c.MaxBodySize < 0 || c.MaxInflightBytes < 0 {
		fail("max_body_size", "sizes cannot be negative")
	} else if _, _, err := receive.Limits(int64(c.MaxBodySize), int64(c.MaxInflightBytes)); err != nil {
		fail("max_inflight_bytes", "%v", err)
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			fail("metrics.listen", "%q: want host:port, e.g. 127.0.0.1:9090", c.Metrics.Listen)
		}
	}
	if c.TLS.Enabled() {
		if c.TLS.CertFile == "" || c.TLS.KeyFile == "" {
			fail("tls", "set both cert_file and key_file")
		} else if _, err := c.TLS.Load(); err != nil {
			fail("tls", "%v", err)
		}
	}
	if _, err := c.TrustedProxyPrefixes(); err != nil {
		fail("trusted_proxies", "%v", err)
	}
	if c.Delivery.Concurrency < 0 {
		fail("delivery.concurrency", "must be at least 1 (unset: 64)")
	}
	names := map[string]bool{}
	for i, t := range c.API.Tokens {
		f := fmt.Sprintf("api.tokens[%d]", i)
		switch {
		case !nameRE.MatchString(t.Name):
			fail(f+".name", "%q: want letters, digits, '.', '_' or '-'", t.Name)
		case names[t.Name]:
			fail(f+".name", "%q is used twice", t.Name)
		}
		names[t.Name] = true
		if len(t.Token) < 16 {
			fail(f+".token", "shorter than 16 characters: too easy to guess")
		}
		if t.ReadOnly && len(t.Publish) > 0 {
			fail(f+".publish", "a token either reads (read_only) or publishes (publish), not both")
		}
		for j, name := range t.Publish {
			at := fmt.Sprintf("%s.publish[%d]", f, j)
			i := slices.IndexFunc(c.Sources, func(s Source) bool { return s.Name == name })
			switch {
			case i < 0:
				fail(at, "no source named %q", name)
			case !c.Sources[i].Outbox:
				fail(at, "source %q is not an outbox source (outbox: true): only an outbox's events may be published", name)
			}
		}
	}
	if c.Effects.MaxResult < 0 || c.Effects.MaxLease < 0 || c.Effects.Retention < 0 {
		fail("effects", "limits and retention cannot be negative")
	}
	apiNames := map[string]bool{}
	for i, a := range c.APIs {
		f := fmt.Sprintf("apis[%d]", i)
		switch {
		case !nameRE.MatchString(a.Name):
			fail(f+".name", "%q: want letters, digits, '.', '_' or '-'", a.Name)
		case apiNames[a.Name]:
			fail(f+".name", "%q is used twice", a.Name)
		}
		apiNames[a.Name] = true
		if (a.Listen == "") == (a.Prefix == "") {
			fail(f, "give listen (its own address) or prefix (a path on the intake listener), one of them")
		}
		if a.Prefix != "" && (!strings.HasPrefix(a.Prefix, "/") || strings.HasPrefix(a.Prefix, "/in/") || a.Prefix == "/in" || strings.HasSuffix(a.Prefix, "/")) {
			fail(f+".prefix", "%q: want a path like /payments, outside /in/ and without a trailing slash", a.Prefix)
		}
		if u, err := url.Parse(a.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			fail(f+".upstream", "%q: want an http:// or https:// URL", Redact(a.Upstream))
		}
		for _, st := range a.Idempotency.NotStarted {
			if st < 400 || st > 599 {
				fail(f+".idempotency.not_started", "%d: want a 4xx or 5xx status", st)
			}
		}
		for _, h := range a.Idempotency.ClientHeaders {
			if !headerNameRE.MatchString(h) {
				fail(f+".idempotency.client_headers", "%q: not a header name", h)
			}
		}
		for _, c := range a.Idempotency.ClientCookies {
			if !headerNameRE.MatchString(c) {
				fail(f+".idempotency.client_cookies", "%q: not a cookie name", c)
			}
		}
		if a.Idempotency.SingleTenant && (len(a.Idempotency.ClientHeaders) > 0 || len(a.Idempotency.ClientCookies) > 0) {
			fail(f+".idempotency", "single_tenant shares one scope among all callers: it takes no client_headers or client_cookies")
		}
		if a.Idempotency.Timeout < 0 || a.Idempotency.Lease < 0 || a.Idempotency.Wait < 0 {
			fail(f+".idempotency", "durations cannot be negative")
		}
	}
	if c.Effects.MaxResult > 16<<20 {
		fail("effects.max_result", "at most 16MiB")
	}
	if c.Alerts.URL != "" {
		if u, err := url.Parse(c.Alerts.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			fail("alerts.url", "%q: want an http:// or https:// URL", Redact(c.Alerts.URL))
		}
	}
	if c.Alerts.DuplicateFactor < 0 || (c.Alerts.DuplicateFactor > 0 && c.Alerts.DuplicateFactor <= 1) {
		fail("alerts.duplicate_factor", "want more than 1 (an alert above the baseline itself would fire every other hour)")
	}
	if c.Alerts.MinVolume < 0 || c.Alerts.DeadLetters < 0 {
		fail("alerts", "min_volume and dead_letters cannot be negative")
	}
	if c.Alerts.BaselineFloor < 0 || c.Alerts.BaselineFloor >= 1 {
		fail("alerts.baseline_floor", "want a rate from 0 to 1")
	}
	dests := map[string]bool{}
	for i, d := range c.Destinations {
		f := fmt.Sprintf("destinations[%d]", i)
		if !nameRE.MatchString(d.Name) {
			fail(f+".name", "%q: want letters, digits, '.', '_' or '-'", d.Name)
		} else if dests[d.Name] {
			fail(f+".name", "%q is used twice", d.Name)
		}
		dests[d.Name] = true
		switch {
		case d.Publish != nil && d.URL != "":
			fail(f+".url", "a destination either has a url or publishes to a queue (publish:), not both")
		case d.Publish != nil:
			validatePublish(d.Publish, f, fail)
		default:
			if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				fail(f+".url", "%q: want an http:// or https:// URL", Redact(d.URL))
			}
		}
		if d.Concurrency < 0 {
			fail(fmt.Sprintf("destinations[%d].concurrency", i), "must be at least 1 (unset: no bound of its own)")
		}
		if d.Breaker.FailureRatio < 0 || d.Breaker.FailureRatio > 1 || d.Breaker.Failures < 0 || d.Breaker.MinAttempts < 0 {
			fail(fmt.Sprintf("destinations[%d].breaker", i), "failures and min_attempts cannot be negative; failure_ratio is from 0 to 1")
		}
		if d.Secret != "" {
			if _, err := provider.DecodeStandardSecret(d.Secret); err != nil {
				fail(f+".secret", "%v", err)
			}
		}
		if d.Retry.MaxAttempts < 1 {
			fail(f+".retry.max_attempts", "must be at least 1")
		}
		if d.Transform != nil && c.scripts[d.Name] == nil && nameRE.MatchString(d.Name) {
			if s, err := c.compileTransform(d); err != nil {
				fail(f+".transform", "%v", err)
			} else {
				if c.scripts == nil {
					c.scripts = map[string]*transform.Script{}
				}
				c.scripts[d.Name] = s
				d.Transform.Digest = s.Digest()
			}
		}
		if d.Retry.BaseDelay > d.Retry.MaxDelay {
			fail(f+".retry", "base_delay %s is above max_delay %s", time.Duration(d.Retry.BaseDelay), time.Duration(d.Retry.MaxDelay))
		}
		// A lease shorter than an attempt lets a second worker take the
		// delivery over while the first still waits on the destination:
		// the event is delivered twice, at once, again and again.
		held := time.Duration(c.Delivery.Lease)
		if held < time.Duration(d.Timeout)+lease.AttemptMargin(held) {
			fail("delivery.lease", "%s does not cover %s's timeout (%s) plus its margin (%s, or a fifth of a lease under %s): an attempt would outlive its lease and be made twice at once; use at least %s",
				held, f, time.Duration(d.Timeout), lease.Margin, 5*lease.Margin, lease.MinLease(time.Duration(d.Timeout)))
		}
	}
	sources := map[string]bool{}
	if len(c.Sources) == 0 && len(c.APIs) == 0 {
		fail("sources", "at least one source (or one of apis) is required")
	}
	for i, s := range c.Sources {
		f := fmt.Sprintf("sources[%d]", i)
		if !nameRE.MatchString(s.Name) {
			fail(f+".name", "%q: want letters, digits, '.', '_' or '-'", s.Name)
		} else if sources[s.Name] {
			fail(f+".name", "%q is used twice", s.Name)
		}
		sources[s.Name] = true
		if s.Consume != nil {
			validateConsume(s.Consume, f, fail)
		}
		if s.Outbox {
			switch {
			case s.Consume != nil:
				fail(f+".outbox", "a source takes its events from a queue (consume:) or from the outbox, not both")
			case len(s.Secrets) > 0:
				fail(f+".secrets", "an outbox source takes no secrets: what is published to it is not signed (the caller's transaction, or its API token, says who may publish)")
			case s.Preset != "generic":
				fail(f+".preset", "%q: an outbox source's events are the caller's own, not a provider's: leave preset unset (generic)", s.Preset)
			case s.OnMissingKey != "reject":
				fail(f+".on_missing_key", "%q: an outbox source needs every publish's key (a publish without one could not be told from its retry): leave it unset (reject)", s.OnMissingKey)
			}
		}
		presetOK := false
		switch {
		case s.Preset == "":
			fail(f+".preset", "required (one of %v)", provider.Names())
		case !slices.Contains(provider.Names(), s.Preset):
			fail(f+".preset", "unknown preset %q%s (one of %v)", s.Preset, suggestOne(s.Preset, provider.Names()), provider.Names())
		default:
			if _, err := provider.New(s.Preset, s.ProviderOptions()); err != nil {
				fail(f, "%v", err)
			} else {
				presetOK = true
			}
		}
		for j, sec := range s.Secrets {
			if sec == "" {
				fail(fmt.Sprintf("%s.secrets[%d]", f, j), "empty")
			}
		}
		if s.OnMissingKey != "accept" && s.OnMissingKey != "reject" {
			fail(f+".on_missing_key", "%q: want accept or reject", s.OnMissingKey)
		}
		if s.OnBadSignature != "reject" && s.OnBadSignature != "discard" {
			fail(f+".on_bad_signature", "%q: want reject or discard", s.OnBadSignature)
		}
		if o := s.Order; o != nil {
			if o.Entity == "" {
				fail(f+".order.entity", "required: preset %s names no entity (e.g. json:data.id)", s.Preset)
			} else if _, err := provider.ParseOrderRule(o.Entity, o.Version, o.VersionUnit, time.Duration(o.MaxAhead)); err != nil {
				fail(f+".order", "%v", err)
			}
			if o.Mode != "stale" && o.Mode != "fifo" {
				fail(f+".order.mode", "%q: want stale or fifo", o.Mode)
			}
			if o.OnStale != "hold" && o.OnStale != "deliver" {
				fail(f+".order.on_stale", "%q: want hold or deliver", o.OnStale)
			}
		}
		if s.Window <= 0 && presetOK {
			// Without a working preset the window has no default yet: its
			// error is the preset's, not a second one here.
			fail(f+".window", "must be positive")
		}
		named := map[string]bool{}
		for j, d := range s.Destinations {
			at := fmt.Sprintf("%s.destinations[%d]", f, j)
			switch {
			case !dests[d.Name]:
				fail(at, "no destination named %q", d.Name)
			case named[d.Name]:
				fail(at, "%q is listed twice (an event has one delivery per destination)", d.Name)
			}
			named[d.Name] = true
			if err := route.CheckTypes(d.Types); err != nil {
				fail(at+".types", "%v", err)
			}
			if d.Filter != nil {
				if _, err := route.Compile(d.Filter); err != nil {
					fail(at+".filter", "%v", err)
				}
			}
		}
	}
	return errs
}

// StoreKind is "sqlite", "postgres", or "" for an unknown store URL.
func (c *Config) StoreKind() string {
	switch {
	case strings.HasPrefix(c.Store, "sqlite://"):
		return "sqlite"
	case strings.HasPrefix(c.Store, "postgres://"), strings.HasPrefix(c.Store, "postgresql://"):
		return "postgres"
	}
	return ""
}

// SQLitePath returns the file path of a sqlite:// store URL.
func (c *Config) SQLitePath() string {
	return strings.TrimPrefix(c.Store, "sqlite://")
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

// Warnings are settings that are valid but weaken a promise or do nothing;
// serve and validate print them.
func (c *Config) Warnings() []string {
	var w []string
	if c.StoreKind() == "sqlite" {
		switch strings.ToUpper(c.SQLite.Synchronous) {
		case "OFF":
			w = append(w, "sqlite.synchronous: OFF: a crash of the machine (not only of oncehook) can lose events already answered 200")
		case "NORMAL":
			w = append(w, "sqlite.synchronous: NORMAL: a power loss can lose the last events already answered 200")
		}
	}
	if len(c.API.Tokens) == 0 {
		w = append(w, "api.tokens is empty: the API listener (effects ledger, admin API, dashboard) is off")
	}
	for i, s := range c.Sources {
		if len(s.Destinations) == 0 {
			w = append(w, fmt.Sprintf("sources[%d] (%s) has no destinations: its events are stored and deduplicated, but delivered nowhere", i, s.Name))
		}
		if s.BodyRetention > 0 && s.BodyRetention >= s.Window {
			w = append(w, fmt.Sprintf("sources[%d].body_retention (%s) is not shorter than its window (%s): bodies go with their keys anyway", i,
				time.Duration(s.BodyRetention), time.Duration(s.Window)))
		}
	}
	return w
}

// Redact returns a URL fit for logs and banners: the password of its user
// info and the values in its query become "xxxxx" (see redact.URL, the one
// function every URL shown goes through). A value that is not a URL is not
// printed at all.
func Redact(raw string) string { return redact.URL(raw) }

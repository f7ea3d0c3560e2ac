// Package config reads oncehook's YAML configuration: ${ENV} expansion for
// secrets, strict field names, defaults, and validation whose errors name the
// field at fault (sources[1].secrets[0], destinations[0].url, ...).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oncehook/oncehook/provider"
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
	Delivery    Delivery `yaml:"delivery"`

	Sources      []Source      `yaml:"sources"`
	Destinations []Destination `yaml:"destinations"`
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
	Window       Duration `yaml:"window"`
	Destinations []string `yaml:"destinations"`
	// Key overrides the preset's key: header:Name, json:path, or several for
	// a composite.
	Key []string `yaml:"key"`
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
	// PublicURL is this source's URL as the provider calls it, for presets
	// that sign the URL (twilio) behind a proxy that rewrites it.
	PublicURL string `yaml:"public_url"`
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
}

// Retry is a destination's retry policy.
type Retry struct {
	MaxAttempts int      `yaml:"max_attempts"`
	BaseDelay   Duration `yaml:"base_delay"`
	MaxDelay    Duration `yaml:"max_delay"`
}

// Duration is a time.Duration that also reads days ("7d", "1d12h").
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// ParseDuration is time.ParseDuration with a leading whole number of days.
func ParseDuration(s string) (time.Duration, error) {
	if days, rest, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("duration %q: want e.g. 90s, 72h or 7d", s)
		}
		d := time.Duration(n) * 24 * time.Hour
		if rest == "" {
			return d, nil
		}
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("duration %q: want e.g. 90s, 72h or 7d", s)
		}
		return d + r, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want e.g. 90s, 72h or 7d", s)
	}
	return d, nil
}

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
	if err != nil || v <= 0 {
		return fmt.Errorf("line %d: size %q: want e.g. 5MiB, 512KiB or 1048576", n.Line, n.Value)
	}
	*b = ByteSize(v * mult)
	return nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${NAME} in every scalar value of the document (not in
// comments, and never as YAML structure) with the environment variable's
// value. An unset variable is an error: an empty secret must never pass
// silently.
func expandEnv(doc *yaml.Node, lookup func(string) (string, bool)) error {
	var missing []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
			n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
				name := ref[2 : len(ref)-1]
				v, ok := lookup(name)
				if !ok {
					missing = append(missing, fmt.Sprintf("%s (line %d)", name, n.Line))
				}
				return v
			})
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(doc)
	if len(missing) > 0 {
		return fmt.Errorf("environment variables not set: %s", strings.Join(missing, ", "))
	}
	return nil
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(text, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse expands ${ENV} references, decodes strictly (unknown fields are
// errors), applies defaults and validates.
func Parse(text []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, err
	}
	if err := expandEnv(&doc, lookupEnv); err != nil {
		return nil, err
	}
	if strings.Contains(string(text), "${") {
		// Decode the expanded document strictly (yaml.Node.Decode cannot
		// reject unknown fields), so write it back out first.
		var err error
		if text, err = yaml.Marshal(&doc); err != nil {
			return nil, err
		}
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return nil, err
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Defaults every config gets.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultStore       = "sqlite://./oncehook.db"
	DefaultMaxBodySize = 5 << 20
)

func (c *Config) setDefaults() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Store == "" {
		c.Store = DefaultStore
	}
	if c.MaxBodySize == 0 {
		c.MaxBodySize = DefaultMaxBodySize
	}
	if c.Delivery.Concurrency == 0 {
		c.Delivery.Concurrency = 64
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
		c.Delivery.Lease = Duration(longest + 30*time.Second)
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		if s.OnMissingKey == "" {
			s.OnMissingKey = "accept"
		}
		if s.OnBadSignature == "" {
			s.OnBadSignature = "reject"
		}
		if s.Window == 0 && s.Preset != "" {
			if p, err := provider.New(s.Preset, s.ProviderOptions()); err == nil {
				s.Window = Duration(p.DefaultWindow())
			}
		}
	}
	return nil
}

// ProviderOptions are the preset options this source configures.
func (s *Source) ProviderOptions() provider.Options {
	return provider.Options{
		Secrets:     s.Secrets,
		Tolerance:   time.Duration(s.Tolerance),
		Generic:     provider.GenericOptions{Header: s.Signature.Header, Encoding: s.Signature.Encoding, Prefix: s.Signature.Prefix},
		Key:         s.Key,
		Unsigned:    s.Unsigned,
		VerifyToken: s.VerifyToken,
		PublicURL:   s.PublicURL,
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Validate checks the configuration and names the field at fault.
func (c *Config) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch c.StoreKind() {
	case "sqlite", "postgres":
	default:
		fail("store", "%q: want sqlite://path or postgres://...", c.Store)
	}
	if c.Redis != "" && !strings.HasPrefix(c.Redis, "redis://") && !strings.HasPrefix(c.Redis, "rediss://") {
		fail("redis", "%q: want redis://host:port/db", c.Redis)
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
		if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			fail(f+".url", "%q: want an http:// or https:// URL", d.URL)
		}
		if d.Secret != "" {
			if _, err := provider.DecodeStandardSecret(d.Secret); err != nil {
				fail(f+".secret", "%v", err)
			}
		}
		if d.Retry.MaxAttempts < 1 {
			fail(f+".retry.max_attempts", "must be at least 1")
		}
		if d.Retry.BaseDelay > d.Retry.MaxDelay {
			fail(f+".retry", "base_delay %s is above max_delay %s", time.Duration(d.Retry.BaseDelay), time.Duration(d.Retry.MaxDelay))
		}
	}
	sources := map[string]bool{}
	if len(c.Sources) == 0 {
		fail("sources", "at least one source is required")
	}
	for i, s := range c.Sources {
		f := fmt.Sprintf("sources[%d]", i)
		if !nameRE.MatchString(s.Name) {
			fail(f+".name", "%q: want letters, digits, '.', '_' or '-'", s.Name)
		} else if sources[s.Name] {
			fail(f+".name", "%q is used twice", s.Name)
		}
		sources[s.Name] = true
		if s.Preset == "" {
			fail(f+".preset", "required (one of %v)", provider.Names())
		} else if _, err := provider.New(s.Preset, s.ProviderOptions()); err != nil {
			fail(f, "%v", err)
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
		if s.Window <= 0 {
			fail(f+".window", "must be positive")
		}
		for j, d := range s.Destinations {
			if !dests[d] {
				fail(fmt.Sprintf("%s.destinations[%d]", f, j), "no destination named %q", d)
			}
		}
	}
	return errors.Join(errs...)
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

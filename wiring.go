package oncehook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/deliver/pull"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/internal/alert"
	"github.com/oncehook/oncehook/internal/alert/channel"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/dashboard"
	"github.com/oncehook/oncehook/internal/egress"
	"github.com/oncehook/oncehook/internal/hold"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/internal/transform"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
	"golang.org/x/time/rate"
)

// The config, translated into each part's options: one function a part,
// so that what the gateway builds reads as a list (Gateway.build). A
// zero the config leaves (a limit not set) passes on, and the part fills
// in its own default.

// deliverDestinations are the worker's destinations; p's scripts, their
// transformations (compile); senders, the queue destinations' publishers
// (publishers.prepare), by name; pulls, the pull destinations' offers:
// the others POST to their url, a tenant's over p's tenantClient.
func deliverDestinations(cfg *config.Config, p *parts, senders map[string]deliver.Sender, pulls *pull.Hub) []deliver.Destination {
	dests := make([]deliver.Destination, len(cfg.Destinations))
	for i, d := range cfg.Destinations {
		dests[i] = DeliveryDestination(d, p.scripts[d.Name], senders[d.Name])
		if d.Tenant != "" {
			dests[i].Client = p.tenantClient
		}
		if d.Pull != nil {
			// Signed with its secret, as a POST would be.
			dests[i].Sender = pulls.SenderWith(d.Name, dests[i].SigningKey, dests[i].Statuses)
			dests[i].OwnLease = true
		}
	}
	return dests
}

// pullNames are the pull destinations' names.
func pullNames(cfg *config.Config) []string {
	var out []string
	for _, d := range cfg.Destinations {
		if d.Pull != nil {
			out = append(out, d.Name)
		}
	}
	return out
}

// held names the destinations whose deliveries wait now: the holds'
// (paused, rate spent, breaker open, removed) and the pull destinations
// nobody pulls from. The writer asks it at every commit: without pull
// destinations it is the holds' answer as it is.
func (g *Gateway) held() []string { return g.pulls.Held(g.holds.Held()) }

// ReceiverActor is who the audit log says paused a destination whose
// receiver answered webhook-delivery: disable.
const ReceiverActor = "receiver:webhook-delivery"

// disableAsked pauses destination, as an operator's pause does (held,
// never dropped; audited, by ReceiverActor), because its receiver asked
// (standard_webhooks_abort): once, however many attempts in flight heard
// it, until an operator resumes it.
func (g *Gateway) disableAsked(ctx context.Context, destination, _ string) error {
	g.disabling.Lock()
	defer g.disabling.Unlock()
	// The store's pauses, not the holds' copy, which a pause made a
	// moment ago may not have reached yet.
	paused, err := g.store.Paused(ctx)
	if err != nil {
		return err
	}
	if _, ok := paused[destination]; ok {
		return nil
	}
	_, err = g.admin.SetPaused(admin.WithActor(ctx, ReceiverActor), destination, true)
	return err
}

// DeliveryDestination is the config's destination d as the worker sends
// to it, with its transformation (script, nil for none) and, for a queue
// destination, its publisher (sender; nil: POST to its url). Serving, the
// dashboard's preview and `oncehook transform test` all build it here, so
// a preview is the attempt's headers, signature and body, not a copy that
// forgets one. d must be validated (its secret decodes).
func DeliveryDestination(d config.Destination, script *transform.Script, sender deliver.Sender) deliver.Destination {
	dest := deliver.Destination{
		Name: d.Name, URL: d.URL, Timeout: time.Duration(d.Timeout), Headers: d.Headers,
		Retry:           deliver.RetryPolicy{MaxAttempts: d.Retry.MaxAttempts, BaseDelay: time.Duration(d.Retry.BaseDelay), MaxDelay: time.Duration(d.Retry.MaxDelay)},
		NoTraceparent:   d.Traceparent != nil && !*d.Traceparent,
		Sender:          sender,
		Transform:       script,
		DeliveryControl: d.StandardWebhooksAbort,
	}
	if len(d.RetryOn) > 0 || len(d.FinalOn) > 0 {
		dest.Statuses, _ = deliver.ParseStatusRules(d.RetryOn, d.FinalOn) // validated
	}
	if d.Secret != "" {
		dest.SigningKey, _ = provider.DecodeStandardSecret(d.Secret) // validated
	}
	return dest
}

// holdPolicies are the destinations' flow control: a rate where one is
// set, a bound on the attempts in flight (its own, or its share of the
// worker's: see sharedConcurrency), and a breaker unless it is turned off.
func holdPolicies(cfg *config.Config) map[string]hold.Policy {
	out := make(map[string]hold.Policy, len(cfg.Destinations))
	for _, d := range cfg.Destinations {
		b := d.Breaker
		concurrency := d.Concurrency
		if concurrency == 0 && len(cfg.Destinations) > 1 {
			concurrency = sharedConcurrency(cfg.Delivery.Concurrency)
		}
		out[d.Name] = hold.Policy{Rate: d.Rate.N, Per: d.Rate.Per, Concurrency: concurrency, Breaker: hold.BreakerPolicy{
			Off: b.Off, Failures: b.Failures, FailureRatio: b.FailureRatio, Window: time.Duration(b.Window),
			MinAttempts: b.MinAttempts, Cooldown: time.Duration(b.Cooldown), MaxCooldown: time.Duration(b.MaxCooldown),
		}}
	}
	return out
}

// sharedConcurrency is a destination's bound on its attempts in flight
// when it sets none and others share the worker with it: three quarters
// of delivery.concurrency. The worker's slots are one pool; without a
// share, one slow destination (answers in seconds, a script that runs to
// its limit, a backlog waiting for a rate's slots) took every slot, and
// the other destinations' events waited seconds behind it. The quarter
// left keeps them flowing; alone, a destination has the whole pool.
func sharedConcurrency(pool int) int {
	if pool <= 0 {
		pool = deliver.DefaultConcurrency
	}
	return max(1, pool*3/4)
}

func destinationNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Destinations))
	for i, d := range cfg.Destinations {
		names[i] = d.Name
	}
	return names
}

func effectOptions(cfg *config.Config, commit func(context.Context, []store.EffectOp) ([]store.EffectResult, error)) effect.Options {
	retention := map[string]time.Duration{}
	for _, a := range cfg.Upstreams {
		// An API's stored answers are kept for its window (24h unless set).
		w := 24 * time.Hour
		if a.Idempotency.Window > 0 {
			w = time.Duration(a.Idempotency.Window)
		}
		retention[idempotency.LedgerPrefix(a.Name)] = w
	}
	for p, d := range cfg.Effects.RetentionByPrefix {
		retention[p] = time.Duration(d)
	}
	return effect.Options{
		Retention: time.Duration(cfg.Effects.Retention), RetentionByPrefix: retention,
		MaxLease: time.Duration(cfg.Effects.MaxLease), MaxResult: int(cfg.Effects.MaxResult),
		Commit: commit,
	}
}

// alertOptions are the alerter's, its channels built from alerts.url and
// alerts.channels.
func alertOptions(cfg *config.Config, st store.Store, ledger *effect.Local, m *metrics.Metrics, log *slog.Logger) (alert.Options, error) {
	a := cfg.Alerts
	channels, err := channel.FromConfig(a, channel.Deps{})
	if err != nil {
		return alert.Options{}, fmt.Errorf("alerts: %w", err)
	}
	tenants := map[string]string{}
	for _, ch := range a.Channels {
		tenants[ch.Name] = ch.Tenant
	}
	return alert.Options{
		Channels: channels, ChannelTenants: tenants, RemindAfter: time.Duration(a.RemindAfter),
		DuplicateFactor: a.DuplicateFactor, MinVolume: a.MinVolume, BaselineFloor: a.BaselineFloor,
		DeadLetters: a.DeadLetters, OldestPending: time.Duration(a.OldestPending), Interval: time.Duration(a.Interval),
		Store: st, Ledger: ledger, Registerer: m.Registry, Logger: log,
	}, nil
}

// parts are what a config builds beyond its plain data: intake's sources
// (presets, routes with their compiled filters, order rules) and the
// destinations' compiled transformations, by name. A reload builds them
// before it swaps anything in.
type parts struct {
	sources []receive.Source
	scripts map[string]*transform.Script
	// recipes are what each script was compiled from (transformRecipe);
	// reused names the scripts taken from the running parts because their
	// recipe is unchanged: they are the running parts' to close until this
	// build is swapped in (owned).
	recipes map[string]string
	reused  map[string]bool
	// limits are the tenants' intake rates (tenants[].rate), by tenant:
	// one limiter each, shared by its sources.
	limits map[string]*rate.Limiter
	// tenantClient is what tenants' url: destinations are POSTed over:
	// dialing public addresses only, and tenant_egress.allow (egress,
	// as it was built from).
	tenantClient *http.Client
	egress       tenantEgress
}

// tenantEgress is what a tenants' client is built from.
type tenantEgress struct {
	allow       []string
	concurrency int
}

// tenantClient is the client of tenants' url: destinations (see
// internal/egress): prev's while what it was built from is unchanged, so
// its connections stay open across a reload.
func tenantClient(cfg *config.Config, prev *parts) (*http.Client, tenantEgress) {
	e := tenantEgress{allow: slices.Clone(cfg.TenantEgress.Allow), concurrency: cfg.Delivery.Concurrency}
	if prev != nil && prev.tenantClient != nil && slices.Equal(prev.egress.allow, e.allow) && prev.egress.concurrency == e.concurrency {
		return prev.tenantClient, prev.egress
	}
	guard := egress.New(cfg.TenantEgress.Prefixes())
	return deliver.NewClient(guard.Transport(deliver.NewTransport(e.concurrency))), e
}

// tenantLimits are cfg's tenants' intake limiters: prev's where a
// tenant's rate is unchanged (what it counted stays, across a reload or
// a change through the API), a new one where it is new or changed.
func tenantLimits(cfg *config.Config, prev *parts) map[string]*rate.Limiter {
	out := map[string]*rate.Limiter{}
	for _, t := range cfg.Tenants {
		if t.Rate.N <= 0 {
			continue
		}
		limit := rate.Limit(float64(t.Rate.N) / t.Rate.Per.Seconds())
		if prev != nil {
			if l := prev.limits[t.Name]; l != nil && l.Limit() == limit && l.Burst() == t.Rate.N {
				out[t.Name] = l
				continue
			}
		}
		out[t.Name] = rate.NewLimiter(limit, t.Rate.N)
	}
	return out
}

// close releases the transformations this build compiled (runs in flight
// finish on theirs); the ones it reused stay the running parts'.
func (p *parts) close() {
	for name, s := range p.scripts {
		if !p.reused[name] {
			s.Close()
		}
	}
}

// replacedBy closes the scripts of p (the parts running until now) that
// next does not run, and makes next the owner of all of its own: a
// reload with a thousand transformations, one of them changed, compiles
// and closes one.
func (p *parts) replacedBy(next *parts) {
	for name, s := range p.scripts {
		if next.scripts[name] != s {
			s.Close()
		}
	}
	next.owned()
}

// owned says p runs now: every script it holds is its own to close.
func (p *parts) owned() { p.reused = nil }

// compile builds cfg's parts, or says every field at fault: config checks
// each field on its own, and this is the check of what only the parts can
// say (a preset and its options, an order's rules, a filter, a
// transformation, intake's limits). Startup, a reload and LoadConfig all
// check a config by building its parts, so that what validates is what
// runs. It fills in the defaults a preset decides (its window, its
// order's entity and version) and each script's digest, in cfg.
func compile(cfg *config.Config, kinds Kinds) (*parts, error) {
	return compileWith(cfg, checker{kinds: kinds})
}

// compileWith is compile with c's kinds (c.parts is build).
func compileWith(cfg *config.Config, c checker) (*parts, error) {
	return compileReusing(cfg, c, nil)
}

// compileReusing is compileWith, taking from prev (parts that run, nil
// for none) each transformation whose recipe is unchanged: see build.
func compileReusing(cfg *config.Config, c checker, prev *parts) (*parts, error) {
	var p *parts
	c.parts = func(cfg *config.Config, fail config.FailFunc) { p = build(cfg, c.kinds, fail, prev) }
	err := cfg.ValidateWith(c)
	if err != nil {
		if p != nil {
			p.close()
		}
		return nil, err
	}
	return p, nil
}

// LoadConfig reads the config file at path and checks it whole: each
// field (config.Load), what the kinds it names say (a broker's settings,
// the store's URL: kinds has the ones a gateway may use), and the parts
// built from it (a source's preset, a filter, a transformation: see
// compile), every error at once with its line. It fills in what a preset
// decides (a source's window), as New does. Serve, validate and the
// operator's commands read a config so.
func LoadConfig(path string, kinds Kinds) (*config.Config, error) {
	return config.LoadWith(path, checker{kinds: kinds, parts: checkParts(kinds)})
}

// ParseConfig is LoadConfig for a config's text (see config.Parse).
func ParseConfig(text []byte, lookupEnv func(string) (string, bool), kinds Kinds) (*config.Config, error) {
	return config.ParseWith(text, lookupEnv, checker{kinds: kinds, parts: checkParts(kinds)})
}

// Catalog is the sources and destinations of a checked config
// (LoadConfig), as the operator's service lists them.
func Catalog(cfg *config.Config) ([]admin.Source, []admin.Destination) { return catalog(cfg) }

// Transformations compiles the destinations' transformations of a checked
// config (LoadConfig with the same kinds), by destination name, as the
// worker runs them. The caller closes each.
func Transformations(cfg *config.Config, kinds Kinds) (map[string]*transform.Script, error) {
	p, err := compile(cfg, kinds)
	if err != nil {
		return nil, err
	}
	return p.scripts, nil
}

// checkParts is compile's check of the parts, for LoadConfig and
// ParseConfig: the parts it builds go.
func checkParts(kinds Kinds) func(c *config.Config, fail config.FailFunc) {
	return func(c *config.Config, fail config.FailFunc) { build(c, kinds, fail, nil).close() }
}

// build is compile's work: each part from its field, each field at fault
// reported through fail. What it returns is only whole when nothing failed.
// A transformation prev (the parts running, or nil) compiled from the same
// recipe is taken from it, not compiled again: a change through the API
// rebuilds the whole config, and compiling a script costs milliseconds,
// seconds for a thousand.
func build(cfg *config.Config, kinds Kinds, fail func(field, format string, args ...any), prev *parts) *parts {
	p := &parts{sources: make([]receive.Source, len(cfg.Sources)), scripts: map[string]*transform.Script{},
		recipes: map[string]string{}, reused: map[string]bool{}}
	if cfg.MaxBodySize >= 0 && cfg.MaxInflightBytes >= 0 {
		if _, _, err := receive.Limits(int64(cfg.MaxBodySize), int64(cfg.MaxInflightBytes)); err != nil {
			fail("max_inflight_bytes", "%v", err)
		}
	}
	// Each alert channel's kind checks what it needs (config checked each
	// field's form).
	channel.Check(cfg.Alerts, fail)
	for i, d := range cfg.Destinations {
		f := fmt.Sprintf("destinations[%d]", i)
		if d.Secret != "" {
			if _, err := provider.DecodeStandardSecret(d.Secret); err != nil {
				fail(f+".secret", "%v", err)
			}
		}
		if _, err := deliver.ParseStatusRules(d.RetryOn, d.FinalOn); err != nil {
			var e *deliver.StatusRuleError
			if errors.As(err, &e) {
				fail(f+"."+e.Field, "%v", e.Err)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(d.Headers)) {
			// The one rule a transformation's headers follow too.
			if why := transform.Reserved(http.CanonicalHeaderKey(name), kinds.transportHeaders(d)); why != "" {
				fail(f+".headers", "%s: not a destination's to set (%s)", name, why)
			}
		}
		if d.Transform != nil && p.scripts[d.Name] == nil && config.IsName(d.Name) {
			s, recipe, reused, err := transformOf(cfg, d, kinds, prev)
			if err != nil {
				fail(f+".transform", "%v", err)
				continue
			}
			p.scripts[d.Name], p.recipes[d.Name] = s, recipe
			if reused {
				p.reused[d.Name] = true
			}
			d.Transform.Digest = s.Digest()
		}
	}
	p.limits = tenantLimits(cfg, prev)
	p.tenantClient, p.egress = tenantClient(cfg, prev)
	for i := range cfg.Sources {
		p.sources[i] = receiveSource(fmt.Sprintf("sources[%d]", i), &cfg.Sources[i], fail)
		if t := cfg.Sources[i].Tenant; t != "" {
			p.sources[i].Limit = p.limits[t]
		}
	}
	maxLease := time.Duration(cfg.Effects.MaxLease)
	if maxLease <= 0 {
		maxLease = effect.DefaultMaxLease
	}
	for i, a := range cfg.Upstreams {
		// A key's lease is an effects-ledger lease: one over the ledger's
		// bound would make every request with a key 503.
		if l := time.Duration(a.Idempotency.Lease); l > maxLease {
			fail(fmt.Sprintf("upstreams[%d].idempotency.lease", i), "%s: at most effects.max_lease (%s), which bounds every lease of the ledger it is kept in", l, maxLease)
		}
	}
	return p
}

// receiveSource builds intake's source from the config's at f, filling in
// what its preset decides.
func receiveSource(f string, s *config.Source, fail func(field, format string, args ...any)) receive.Source {
	out := receive.Source{
		Name: s.Name, Window: time.Duration(s.Window), BodyRetention: time.Duration(s.BodyRetention),
		RejectMissingKey: s.OnMissingKey == "reject", DiscardUnauthorized: s.OnBadSignature == "discard",
		Elsewhere: s.Elsewhere(),
	}
	out.Preset = preset(f, s, fail)
	if out.Preset != nil {
		if s.Window == 0 {
			s.Window = config.Duration(out.Preset.DefaultWindow())
		}
		if out.Window = time.Duration(s.Window); out.Window <= 0 {
			fail(f+".window", "must be positive")
		}
	}
	// Without a working preset the window has no default: its error is
	// the preset's, not a second one here.
	if o := s.Order; o != nil {
		if rule, ok := orderRule(f, s.Preset, out.Preset, o, fail); ok {
			out.Order = &receive.Order{Rule: rule, Mode: store.OrderMode(o.Mode), DeliverStale: o.OnStale == "deliver"}
		}
	}
	out.Routes = make(route.Routes, len(s.Destinations))
	for j, d := range s.Destinations {
		at := fmt.Sprintf("%s.destinations[%d]", f, j)
		out.Routes[j] = route.Route{Destination: d.Name, Types: d.Types}
		if err := route.CheckTypes(d.Types); err != nil {
			fail(at+".types", "%v", err)
		}
		if d.Filter != nil {
			var err error
			if out.Routes[j].Filter, err = route.Compile(d.Filter); err != nil {
				fail(at+".filter", "%v", err)
			}
		}
	}
	return out
}

// preset builds the source's preset from its options, or says why it
// cannot (nil).
func preset(f string, s *config.Source, fail func(field, format string, args ...any)) provider.Preset {
	switch {
	case s.Preset == "":
		fail(f+".preset", "required (one of %v)", provider.Names())
	case !provider.Known(s.Preset):
		fail(f+".preset", "unknown preset %q%s (one of %v)", s.Preset, config.Suggest(s.Preset, provider.Names()), provider.Names())
	case slices.Contains(s.Secrets, ""):
		// The config's own check said so (sources[i].secrets[j]: empty),
		// and compile runs both: the preset would say it a second time.
	default:
		p, err := provider.New(s.Preset, providerOptions(s))
		if errors.Is(err, provider.ErrNoSecrets) {
			// Named as the field, so that the API's 400 (a PATCH of
			// {"secrets": null}) names it too, as the file's check does.
			fail(f+".secrets", `required: preset %s verifies every webhook's signature with a secret: give at least one, the signing secret its dashboard shows (to rotate, list the new one first and keep the old: ["new", "old"])`, s.Preset)
			return nil
		}
		if err != nil {
			fail(f, "%v", err)
			return nil
		}
		return p
	}
	return nil
}

// orderRule fills in the order's entity and version that the preset p
// (named preset; nil when it failed to build) decides (when the entity is
// the preset's, so is the version), and parses the rule.
func orderRule(f, preset string, p provider.Preset, o *config.Order, fail func(field, format string, args ...any)) (provider.OrderRule, bool) {
	var d provider.OrderDefault
	if p != nil {
		d = provider.Describe(p).Order
	}
	if o.Entity == "" {
		o.Entity = d.Entity
		if o.Version == "" {
			o.Version = d.Version
			if o.VersionUnit == "" {
				o.VersionUnit = string(d.Unit)
			}
		}
	}
	if o.Version == "" {
		o.Version = provider.Arrival
	}
	if o.Entity == "" && p == nil {
		return provider.OrderRule{}, false // the preset's error says why; no second one here
	}
	if o.Entity == "" {
		fail(f+".order.entity", "required: preset %s names no entity (e.g. json:data.id)", preset)
		return provider.OrderRule{}, false
	}
	rule, err := provider.ParseOrderRule(o.Entity, o.Version, o.VersionUnit, time.Duration(o.MaxAhead))
	if err != nil {
		fail(f+".order", "%v", err)
		return provider.OrderRule{}, false
	}
	return rule, true
}

// providerOptions are the preset options a source configures.
func providerOptions(s *config.Source) provider.Options {
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

// transformOf is a destination's script: prev's (reused) when prev runs
// one for d compiled from the same recipe, else compiled now. recipe is
// what it is compiled from.
func transformOf(cfg *config.Config, d config.Destination, kinds Kinds, prev *parts) (_ *transform.Script, recipe string, reused bool, _ error) {
	t := d.Transform
	if (t.File == "") == (t.Inline == "") {
		return nil, "", false, errors.New("want a script's file (transform: path.js) or its text (transform: {inline: ...}), one of them")
	}
	src := t.Inline
	if t.File != "" {
		b, err := os.ReadFile(cfg.File(t.File))
		if err != nil {
			return nil, "", false, fmt.Errorf("read the script: %w", err)
		}
		src = string(b)
	}
	if t.Timeout < 0 || t.MaxMemory < 0 || t.MaxOutput < 0 {
		return nil, "", false, errors.New("timeout, max_memory and max_output cannot be negative")
	}
	if t.MaxMemory > 0 && t.MaxMemory < 1<<20 {
		return nil, "", false, fmt.Errorf("max_memory %d bytes: at least 1MiB (the sandbox itself needs some)", t.MaxMemory)
	}
	opts := transform.Options{
		Timeout: time.Duration(t.Timeout), MaxMemory: int64(t.MaxMemory), MaxOutput: int64(t.MaxOutput),
		Transport: kinds.transportHeaders(d), Env: t.Env,
	}
	recipe = transformRecipe(t.Name(d.Name), src, d, opts)
	if prev != nil && prev.scripts[d.Name] != nil && prev.recipes[d.Name] == recipe {
		return prev.scripts[d.Name], recipe, true, nil
	}
	s, err := transform.Compile(t.Name(d.Name), src, opts)
	return s, recipe, false, err
}

// transformRecipe identifies everything a script is compiled from: its
// name, its source, its bounds, its env, and its destination's transport
// (the headers it may not set), by the broker d publishes to (a gateway's
// kinds are fixed). Two scripts of one recipe run alike. It is a digest:
// the env's values are secrets.
func transformRecipe(name, src string, d config.Destination, o transform.Options) string {
	h := sha256.New()
	broker := ""
	if d.Publish != nil {
		broker = d.Publish.Broker
	}
	fmt.Fprintf(h, "%q %q %d %d %d %d\n", name, broker, o.Timeout, o.MaxMemory, o.MaxOutput, len(src))
	h.Write([]byte(src))
	for _, k := range slices.Sorted(maps.Keys(o.Env)) {
		fmt.Fprintf(h, "\n%q=%q", k, o.Env[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// catalog is the sources and destinations of a config, as the operator
// surface sees them.
func catalog(cfg *config.Config) ([]admin.Source, []admin.Destination) {
	managedBy := func(api bool) string {
		if api {
			return "api"
		}
		return "file"
	}
	sources := make([]admin.Source, len(cfg.Sources))
	for i, s := range cfg.Sources {
		sources[i] = admin.Source{Name: s.Name, Preset: s.Preset, Window: time.Duration(s.Window), Destinations: s.DestinationNames(), OnMissingKey: s.OnMissingKey,
			Ordered: s.Order != nil, Transport: "http", ManagedBy: managedBy(cfg.SourceFromAPI(s.Name)), Tenant: s.Tenant}
		switch {
		case s.Consume != nil:
			sources[i].Transport, sources[i].Where = s.Consume.Kind(), s.Consume.Where()
		case s.Outbox:
			sources[i].Transport = "outbox"
		}
	}
	dests := make([]admin.Destination, len(cfg.Destinations))
	for i, d := range cfg.Destinations {
		dests[i] = admin.Destination{Name: d.Name, URL: d.URL, Rate: d.Rate.N, RatePer: d.Rate.Per, Kind: d.Kind(), Target: d.Publish.Target(),
			ManagedBy: managedBy(cfg.DestinationFromAPI(d.Name)), Tenant: d.Tenant}
		if d.Pull != nil {
			dests[i].Target = "POST /v1/destinations/" + d.Name + "/pull"
		}
	}
	return sources, dests
}

// upstreamProxy is the user's API a behind the Idempotency-Key
// middleware (idempotency.Proxy), from its config. The bodies the
// middleware holds are read on intake's terms (budget and pace). log names
// the API.
func upstreamProxy(a config.Upstream, ledger effect.Ledger, intake *receive.Handler, maxStored int, m *metrics.Metrics, log *slog.Logger) http.Handler {
	up, _ := url.Parse(a.Upstream) // validated
	idem := a.Idempotency
	client := idempotency.AuthorizationClient
	if len(idem.ClientHeaders) > 0 || len(idem.ClientCookies) > 0 {
		client = idempotency.Credentials(idem.ClientHeaders, idem.ClientCookies)
	}
	return idempotency.Proxy(up, ledger, idempotency.Options{
		Name: a.Name, Methods: idem.Methods, RequireKey: idem.RequireKey, Wait: time.Duration(idem.Wait),
		Lease: time.Duration(idem.Lease), Timeout: time.Duration(idem.Timeout),
		Client: client, SingleTenant: idem.SingleTenant, NotStarted: idem.NotStarted,
		MaxStored: maxStored, Logger: log,
		ReadBody: func(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, func(), error) {
			body, done, err := intake.ReadBody(w, r, limit)
			if err != nil {
				return nil, nil, receive.BodyRejection(err)
			}
			return body, done, nil
		},
		OnAnswer: func(replayed bool) { m.Answered(a.Name, replayed) },
	})
}

func apiTokens(cfg *config.Config) []apiauth.Token {
	tokens := make([]apiauth.Token, len(cfg.API.Tokens))
	for i, t := range cfg.API.Tokens {
		tokens[i] = apiauth.Token{Name: t.Name, Value: t.Token, Hash: t.Hash, ReadOnly: t.ReadOnly, Publish: t.Publish, Pull: t.Pull, Tenant: t.Tenant}
	}
	return tokens
}

// operatorOf is the admin API's Operator for r's caller: a tenant's token
// reaches its tenant's (admin.Service's Tenant), every other token the
// whole Service.
func (g *Gateway) operatorOf(r *http.Request) admin.Operator {
	return g.operatorFor(r.Context())
}

func (g *Gateway) operatorFor(ctx context.Context) admin.Operator {
	if c, ok := apiauth.CallerOf(ctx); ok && c.Tenant != "" {
		return g.admin.Tenant(c.Tenant)
	}
	return g.admin
}

// tenantDashboard is the dashboard's Operator for a tenant's session:
// its tenant's part of the admin Service, its effects included.
func (g *Gateway) tenantDashboard(tenant string) dashboard.Operator {
	return g.admin.Tenant(tenant)
}

// effectsNamespace is where the effects ledger keeps the keys of r's
// caller: a tenant's token, under its tenant's namespace, so that one
// tenant's claim of "order-1" is never answered another's stored result.
func effectsNamespace(r *http.Request) string {
	if c, _ := apiauth.CallerOf(r.Context()); c.Tenant != "" {
		return effect.Namespace(c.Tenant)
	}
	return ""
}

// owned answers a tenant's token 404 for a source or destination (kind;
// its name as name reads it from the request) that is not its tenant's,
// as for one there is none of: its token that may publish or pull (one
// of no publish: or pull: list may do both) reaches its own only.
func (g *Gateway) owned(kind string, name func(*http.Request) string, next http.Handler) http.Handler {
	return g.ownedOr(kind, name, func(w http.ResponseWriter, r *http.Request, n string) {
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no "+kind+" "+n)
	}, next)
}

// ownedOr is owned with deny answering what is not the tenant's: an ack
// of another tenant's delivery is answered as one of a delivery nobody
// leased, never naming its destination.
func (g *Gateway) ownedOr(kind string, name func(*http.Request) string, deny func(http.ResponseWriter, *http.Request, string), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := apiauth.CallerOf(r.Context())
		if n := name(r); c.Tenant != "" && n != "" && g.tenantOf(kind, n) != c.Tenant {
			deny(w, r, n)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// notLeased answers an ack as the pull API answers one of a delivery
// leased to nobody (pull.ErrNoLease).
func notLeased(w http.ResponseWriter, _ *http.Request, _ string) {
	jsonhttp.WriteError(w, http.StatusConflict, "lease_unknown", pull.ErrNoLease.Error())
}

// tenantOf is the tenant of the running config's source or destination
// (kind) name: "" for none, or for no such object. It reads the admin
// Service's index of owners (admin.Service.TenantOf), built once per
// config swap: one answer for intake's routes, the objects API and the
// alerts.
func (g *Gateway) tenantOf(kind, name string) string {
	t, _ := g.admin.TenantOf(kind, name)
	return t
}

// scopeTenant is the tenant of a source or destination, named as the
// alerts' issues and the rollups name them (store.ScopeSource or
// store.ScopeDestination, the same words as the objects' kinds), in the
// running config.
func (g *Gateway) scopeTenant(scope, name string) string {
	return g.tenantOf(scope, name)
}

// tenantTokens are the API tokens' tenants by name, for the admin's
// tenant scope (a tenant's audit entries are its tokens').
func tenantTokens(cfg *config.Config) map[string]string {
	out := make(map[string]string, len(cfg.API.Tokens))
	for _, t := range cfg.API.Tokens {
		out[t.Name] = t.Tenant
	}
	return out
}

// transformed runs destination's transformation (the running config's) on
// a stored event as its next attempt would, for the dashboard's event page;
// nil when the destination has none. Nothing is sent.
func (g *Gateway) transformed(ctx context.Context, e admin.EventDetail, destination string) (*dashboard.Transformed, error) {
	cfg, script := g.cfg.Load(), g.built.Load().scripts[destination]
	if script == nil {
		return nil, nil
	}
	i := slices.IndexFunc(cfg.Destinations, func(d config.Destination) bool { return d.Name == destination })
	if i < 0 {
		return nil, nil
	}
	dest := DeliveryDestination(cfg.Destinations[i], script, nil)
	p, err := deliver.PreviewTransform(ctx, &dest, e.Delivery(destination, 0))
	if err != nil {
		return nil, err
	}
	t := &dashboard.Transformed{Skipped: p.Output.Skip, URL: p.URL, ContentType: p.Message.ContentType,
		Body: string(p.Body), Digest: p.Output.Digest(), TookMS: float64(p.Output.Took.Microseconds()) / 1000}
	if !utf8.Valid(p.Body) {
		t.Body = fmt.Sprintf("(%d bytes, not UTF-8)", len(p.Body))
	}
	names := make([]string, 0, len(p.Header))
	for k := range p.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range p.Header[k] {
			t.Headers = append(t.Headers, dashboard.HeaderLine{Name: k, Value: v})
		}
	}
	return t, nil
}

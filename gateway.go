package oncehook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/deliver/pull"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/internal/alert"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/dashboard"
	"github.com/oncehook/oncehook/internal/forwarded"
	"github.com/oncehook/oncehook/internal/groupcommit"
	"github.com/oncehook/oncehook/internal/hold"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/internal/maintain"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/secretbox"
	"github.com/oncehook/oncehook/internal/seen"
	"github.com/oncehook/oncehook/internal/tracing"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
)

// Options are what a Gateway takes beyond its configuration.
type Options struct {
	// Kinds are the stores and brokers the gateway may use (see Kinds):
	// the config's store and every broker it names must be among them.
	Kinds  Kinds
	Logger *slog.Logger
	// DemoSink mounts POST /_demo/sink, a destination that logs what it
	// receives; `oncehook serve` without a config delivers there.
	DemoSink bool
	// ShutdownTimeout bounds how long Serve waits for in-flight requests,
	// and then for in-flight deliveries, when it stops (default 30s); an
	// attempt still running then is cut and its lease given back.
	ShutdownTimeout time.Duration
	// SweepInterval is how often keys past their window are swept
	// (default 1 minute).
	SweepInterval time.Duration
	// ObjectsPoll is how often the gateway reads the stored objects' mark
	// to apply a source or destination another replica changed through
	// the API (default 10 s on PostgreSQL, where LISTEN/NOTIFY applies a
	// change at once and the poll is the fallback; 30 s on SQLite, which
	// one gateway serves as a rule). Negative: never, and no LISTEN: a
	// change reaches this gateway at its reload (or a 409 it answers).
	ObjectsPoll time.Duration
	// HotKeys is how many recently committed keys intake remembers in
	// memory, to answer their duplicates without a trip to the store
	// (default 100,000, about 100 bytes each; negative: none).
	HotKeys int
	// NoRollups turns the hourly rollups off: only for measuring what they
	// cost (the bench's rollups scenario). The dashboard and /v1/stats then
	// see no new counts.
	NoRollups bool
	// ConfigFile is the file the config was read from: what a reload (SIGHUP
	// in `oncehook serve`, POST /v1/reload) reads anew. Empty: the API's
	// reload answers that there is none (Reload still takes a config).
	ConfigFile string
	// Override, when set, is applied to each config a reload reads from
	// ConfigFile: the command line's overrides (serve's --listen), which
	// must hold across reloads as they did at start.
	Override func(*config.Config)
	// CommitTimeout bounds how long a webhook (a publish, an effect) waits
	// for the durable commit that holds it, queued behind others, or
	// behind a write lock another connection holds (a caller's open
	// outbox transaction on SQLite), before it is answered 503 (default
	// 30 s: the most patient providers wait about that long, and past it
	// an answer would reach nobody).
	CommitTimeout time.Duration
	// TracerProvider traces intake, deliveries and the effects API. Nil:
	// the standard OTEL_* environment decides (off when it names no
	// exporter; see internal/tracing).
	TracerProvider trace.TracerProvider
	// Getenv reads the environment (default os.Getenv): the secret keys'
	// ONCEHOOK_SECRET_KEYS (see internal/secretbox).
	Getenv func(string) string
}

// Gateway is one oncehook instance: intake and the API listener's handlers,
// the store and its one writer, the delivery worker, the effects ledger, the
// operator's service and dashboard, and the upkeep (sweeps, hold refresh,
// alerts). New builds it; Serve (or Handler, APIHandler and Run) runs it.
type Gateway struct {
	// tracer traces requests and attempts; nil when not traced.
	tracer trace.Tracer
	// stops are what New started, with what stops each (Close unwinds
	// them): the store, the tracer, the writer, the publishers.
	stops     stack
	cfg       atomic.Pointer[config.Config] // the config running now: Reload swaps it
	built     atomic.Pointer[parts]         // the parts running: its transformations, by destination (compile)
	opts      Options
	log       *slog.Logger
	store     store.Store
	metrics   *metrics.Metrics
	committer *groupcommit.Committer
	worker    *deliver.Worker
	intake    *receive.Handler
	mux       *http.ServeMux
	// intakeHandler is mux behind intake's check of the path (receive.Handler.Paths).
	intakeHandler http.Handler
	effects       *effect.Local
	admin         *admin.Service
	alerts        *alert.Alerter
	dashboard     *dashboard.Dashboard
	api           *http.ServeMux
	health        writeHealth
	holds         *hold.Holds
	// disabling serializes the pauses receivers ask for (disableAsked),
	// so that attempts in flight that all heard it pause once.
	disabling sync.Mutex
	auth      *apiauth.Auth
	queues    *metrics.StoreCollector // nil: the store has no operator queries
	reloading sync.Mutex              // one change of the config at a time: a reload, an API's source
	// file is the config as its file gave it, and objects the sources
	// created through the API: the config running is both merged
	// (prepareLocked). Both under reloading.
	file    *config.Config
	objects []object
	// behind says this gateway could not apply the objects as stored
	// (watchObjects): nil when it runs them.
	behind atomic.Pointer[objectsBehind]
	// intakeAddr is where Serve's intake listener listens, for the
	// intake URL an API's source is answered with.
	intakeAddr atomic.Pointer[string]
	upstreams  []upstream // the user's APIs on listeners of their own
	maintain   *maintain.Maintainer
	consumers  []broker.Consumer // the queue sources' (consume:)
	publishers *publishers       // the queue destinations' (publish:), kept across reloads
	pulls      *pull.Hub         // the pull destinations' offers and leases (pull:)
	tls        *tls.Config       // every listener's, when the config names a certificate
	// box seals the secrets given through the API; nil without keys
	// (ONCEHOOK_SECRET_KEYS, secret_keys_file): the API refuses secrets.
	box *secretbox.Box

	closeOnce sync.Once
	closeErr  error
}

// upstream is one of the user's APIs behind the Idempotency-Key proxy, on
// a listener of its own (Serve opens it; addr is where it listens then).
type upstream struct {
	name, listen string
	handler      http.Handler
	addr         atomic.Pointer[string]
}

// UpstreamAddr is where the API name's proxy listens, once Serve opened
// it ("" before, or for an API on a prefix of the intake listener).
func (g *Gateway) UpstreamAddr(name string) string {
	for i := range g.upstreams {
		if g.upstreams[i].name == name {
			if a := g.upstreams[i].addr.Load(); a != nil {
				return *a
			}
		}
	}
	return ""
}

// writeHealth remembers the outcome of the store's latest write, an intake
// commit or a readiness probe: readiness is whether the store can commit,
// and a store that answers reads may refuse writes (a full disk).
type writeHealth struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

func (h *writeHealth) record(err error) {
	if errors.Is(err, store.ErrRejected) {
		err = nil // the data was refused; the store itself is fine
	}
	h.mu.Lock()
	h.at, h.err = time.Now(), err
	h.mu.Unlock()
}

func (h *writeHealth) latest() (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at, h.err
}

// New opens the store, applies migrations and builds every part. Nothing
// runs until Serve (or Run). When a step fails, what the steps before it
// started (the store and Redis, the tracer, the writer's goroutines, the
// publishers) is stopped again, in reverse order, before New returns: a
// gateway that was never returned holds no connection, goroutine or file.
func New(ctx context.Context, cfg *config.Config, opts Options) (_ *Gateway, err error) {
	opts.defaults()
	p, err := compile(cfg, opts.Kinds)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var stops stack
	defer func() {
		if err != nil {
			if uErr := stops.unwind(); uErr != nil {
				opts.Logger.Warn("stopping what a gateway that failed to start had started", "err", uErr)
			}
		}
	}()
	g := &Gateway{opts: opts, log: opts.Logger, file: cfg}
	// A key that does not parse stops the start: a gateway that could not
	// read the secrets it stored would answer every provider 401.
	if g.box, err = loadSecretKeys(cfg, opts.Getenv); err != nil {
		p.close()
		return nil, err
	}
	g.cfg.Store(cfg)
	p.owned()
	g.built.Store(p)
	stops.push(func() error { // the ones running now: a reload swaps them
		g.built.Load().close()
		return nil
	})
	for _, w := range cfg.Warnings() {
		opts.Logger.Warn("config: " + w)
	}
	m := metrics.New()
	if !opts.NoRollups {
		m.Hourly = metrics.NewHourly(nil)
	}
	m.Copies = metrics.NewCopies()
	st, writer, err := opts.Kinds.openFronted(ctx, cfg, opts.Logger, m)
	if err != nil {
		return nil, err
	}
	stops.push(st.Close)
	g.store, g.metrics = st, m
	// The sources created through the API join the file's (#45).
	// (What fails here leaves the file's scripts to the stops.)
	if g.objects, err = loadObjects(ctx, st, g.box); err != nil {
		return nil, err
	}
	if cfg, p, err = withObjects(cfg, g.objects, p, opts.Kinds); err != nil {
		return nil, err
	}
	g.cfg.Store(cfg)
	g.built.Store(p)
	if opts.TracerProvider == nil && tracing.Enabled(os.Getenv) {
		var stopTracing func(context.Context) error
		if opts.TracerProvider, stopTracing, err = tracing.Setup(ctx); err != nil {
			return nil, err
		}
		stops.push(func() error { // the last spans flushed
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return stopTracing(ctx)
		})
		g.opts.TracerProvider = opts.TracerProvider
	}
	if opts.TracerProvider != nil {
		g.tracer = opts.TracerProvider.Tracer(tracing.Name)
	}
	if err := g.build(ctx, p, writer, &stops); err != nil {
		return nil, err
	}
	g.stops = stops
	return g, nil
}

// loadSecretKeys reads the keys that seal the API's secrets (see
// internal/secretbox): nil, and no error, when none is configured.
func loadSecretKeys(cfg *config.Config, getenv func(string) string) (*secretbox.Box, error) {
	file := ""
	if cfg.SecretKeysFile != "" {
		file = cfg.File(cfg.SecretKeysFile)
	}
	box, err := secretbox.Load(getenv, file)
	if errors.Is(err, secretbox.ErrNoKeys) {
		return nil, nil
	}
	return box, err
}

// stack is what a gateway started, each with what stops it, in the order
// it started: New unwinds it when a later step fails, Close when the
// gateway is done. Unwound, the last started stops first: the writer
// before the store it commits to.
type stack []func() error

func (s *stack) push(stop func() error) { *s = append(*s, stop) }

// unwind stops everything pushed, last first, once; every stop runs,
// whichever fails.
func (s *stack) unwind() error {
	var errs []error
	for i := len(*s) - 1; i >= 0; i-- {
		errs = append(errs, (*s)[i]())
	}
	*s = nil
	return errors.Join(errs...)
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.HotKeys == 0 {
		o.HotKeys = 100_000
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
}

// build makes every part, each from the config by its own constructor
// (wiring.go translates the config), in the order they depend on each
// other: holds, writer, worker, ledger, operator surface, intake, upkeep.
// Each part that starts something (a goroutine, a connection) pushes what
// stops it onto stops, as soon as it has started.
func (g *Gateway) build(ctx context.Context, p *parts, writer store.Writer, stops *stack) error {
	cfg, log := g.cfg.Load(), g.log
	var err error
	if cfg.TLS.Enabled() {
		if g.tls, err = cfg.TLS.Load(); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	}
	// Held destinations are read before anything runs (hold.New).
	if g.holds, err = hold.New(ctx, g.store, hold.Options{Policies: holdPolicies(cfg), Logger: log.With("component", "hold")}); err != nil {
		return err
	}
	// A pull destination nobody pulls from is held, as a paused one is
	// (pull.Hub.Idle); a pull wakes the worker.
	// Their leases are kept in the store when replicas share it, so that
	// an ack is taken on any (store.Kind.Shared); on SQLite, one process,
	// in memory, which spares a write per pull.
	var leases store.Pulls
	if kind, ok := g.opts.Kinds.storeKind(cfg.Store); ok && kind.Shared {
		leases = g.store
	}
	g.pulls = pull.New(pull.Options{Paused: g.holds.Paused, Wake: func() {
		if g.worker != nil {
			g.worker.Notify()
		}
	}, Store: leases, Record: func(ctx context.Context, d store.LeasedDelivery, started time.Time, r deliver.Result) (deliver.ResultKind, bool) {
		// An ack for a lease another replica handed out: recorded here.
		if g.worker == nil {
			return r.Kind, false
		}
		return g.worker.Record(ctx, d, started, r)
	}})
	g.pulls.Configure(pullNames(cfg))
	// One writer for everything: intake's claims, the worker's outcomes and
	// its leases share commits, and a new event's deliveries are handed to
	// the worker in memory at the commit that stores them.
	lease := time.Duration(cfg.Delivery.Lease)
	g.committer = groupcommit.New(g.store.Commit, g.writerOptions(writer, lease))
	stops.push(func() error { g.committer.Close(); return nil }) // commits what is queued
	g.publishers = newPublishers(g.opts.Kinds, log)
	senders, keep, err := g.publishers.prepare(cfg)
	if err != nil {
		return err
	}
	keep(true)
	stops.push(g.publishers.Close)
	g.worker = deliver.New(g.store, deliver.Options{
		Writer:        g.committer,
		Destinations:  deliverDestinations(cfg, p, senders, g.pulls),
		Concurrency:   cfg.Delivery.Concurrency,
		Lease:         lease,
		ShutdownGrace: min(g.opts.ShutdownTimeout, lease),
		Logger:        log.With("component", "deliver"),
		Metrics:       g.metrics,
		Held:          g.held,
		Gate:          g.holds,
		Unconfigured:  g.holds.Unconfigured, // removed from the config: held
		Disable:       g.disableAsked,
		Tracer:        g.tracer,
		IdlePoll:      idlePoll(cfg, g.store),
	})
	g.committer.Attach(g.worker)
	g.holds.OnRelease(g.worker.Notify) // a resumed destination's deliveries are due

	// The effects ledger rides the same writer: its claims and completions
	// share intake's commits.
	g.effects = effect.New(g.store, effectOptions(cfg, g.committer.Effects))

	samples := admin.NewSamples(100, 64<<10)
	alertOpts, err := alertOptions(cfg, g.store, g.effects, g.metrics, log.With("component", "alerts"))
	if err != nil {
		return err
	}
	alertOpts.TenantOf = g.scopeTenant
	if g.alerts, err = alert.New(alertOpts); err != nil {
		return err
	}
	sources, dests := catalog(cfg)
	var reload admin.Reloader // the demo, or a library caller's config: none to read
	if g.opts.ConfigFile != "" {
		reload = g.reloadFile
	}
	g.admin, err = admin.New(admin.Options{
		Store: g.store, Sources: sources, Destinations: dests, Effects: g.effects,
		Samples: samples, Alerts: g.alerts, Changed: g.changed, Reload: reload,
		Consumers: g.ConsumerStatus, LockWait: g.store.LockWait, ObjectsBehind: g.objectsBehindNow,
	})
	if err != nil {
		return err
	}
	g.admin.SetTenantTokens(tenantTokens(cfg))
	g.queues = metrics.NewStoreCollector(g.store, destinationNames(cfg), 5*time.Second)
	g.metrics.Registry.MustRegister(g.queues)
	g.metrics.Registry.MustRegister(metrics.LockWait(g.store.LockWait)...)

	proxies, _ := cfg.TrustedProxyPrefixes() // validated in New
	g.intake = receive.New(receive.Options{
		Sources: p.sources, Claimer: g.committer, MaxBodySize: int64(cfg.MaxBodySize),
		MaxInflightBytes: int64(cfg.MaxInflightBytes), TrustedProxies: proxies,
		Seen: seen.New(g.opts.HotKeys), OnDuplicate: samples.Add,
		Logger: log.With("component", "receive"), Metrics: g.metrics, Tracer: g.tracer,
	})
	// A consumer starts nothing before Run (broker.Kind's contract): none
	// is stopped here.
	if g.consumers, err = buildConsumers(cfg, g.opts.Kinds, g.intake, log); err != nil {
		return err
	}
	if len(g.consumers) > 0 {
		g.metrics.Registry.MustRegister(metrics.Consumers(g.consumerStates))
	}
	if err := g.buildAPI(proxies); err != nil {
		return err
	}
	g.buildIntakeMux()
	for _, a := range cfg.Upstreams {
		h := upstreamProxy(a, g.effects, g.intake, int(cfg.Effects.MaxResult), g.metrics, log.With("component", "upstream", "upstream", a.Name))
		if a.Prefix != "" {
			h = idempotency.UnderPrefix(h)
			g.mux.Handle(a.Prefix, h)
			g.mux.Handle(a.Prefix+"/", h)
		} else {
			g.upstreams = append(g.upstreams, upstream{name: a.Name, listen: a.Listen, handler: h})
		}
	}
	g.maintain = maintain.New(
		&maintain.Sweeper{Store: g.store, Interval: g.opts.SweepInterval, RollupRetention: time.Duration(cfg.Stats.Retention), Logger: log.With("component", "sweep")},
		g.holds, g.alerts)
	return nil
}

// outboxPoll is how often an idle worker looks for due deliveries when
// the store cannot wake it for commits made by other processes (SQLite has
// no LISTEN/NOTIFY) and an outbox source's events are committed by them:
// a publish is delivered within it, not within the default 5 s. Each look
// is one indexed MIN (NextDue) on a reader: four a second cost nothing
// the writer notices.
const outboxPoll = 250 * time.Millisecond

// idlePoll is the worker's IdlePoll for cfg on st: outboxPoll when an
// outbox source's publishes cannot wake it, else the worker's default.
// (A reload that adds the first outbox source keeps the poll it started
// with: restart to shorten it.)
func idlePoll(cfg *config.Config, st store.Store) time.Duration {
	if st.SupportsListener() {
		return 0
	}
	for _, s := range cfg.Sources {
		if s.Outbox {
			return outboxPoll
		}
	}
	return 0
}

// writerOptions are the group committer's: the hourly rollups and the
// duplicate counts ride its commits, under this process's own rows.
func (g *Gateway) writerOptions(writer store.Writer, lease time.Duration) groupcommit.Options {
	var rollups groupcommit.Stats
	if g.metrics.Hourly != nil {
		rollups = g.metrics.Hourly
	}
	return groupcommit.Options{
		Writers: writer.Writers,
		Linger:  writer.Linger,
		Observe: func(n int) { g.metrics.CommitBatch.Observe(float64(n)) },
		Outcome: g.health.record,
		Lease:   lease,
		// The bound of every commit and of each request's wait for one.
		CommitTimeout: g.opts.CommitTimeout,
		Logger:        g.log.With("component", "writer"),
		Stats:         rollups,
		Copies:        g.metrics.Copies,
		Shard:         store.NewLeaseToken()[:12],
		Held:          g.held,
	}
}

// buildAPI mounts the API listener: the effects ledger, the admin API and
// the dashboard, behind api.tokens.
func (g *Gateway) buildAPI(proxies []netip.Prefix) error {
	g.auth = apiauth.NewWith(apiTokens(g.cfg.Load()), apiauth.Options{
		// Wrong tokens are limited per client, behind a trusted proxy too.
		ClientAddr: func(r *http.Request) string { return forwarded.ClientAddr(r, proxies) },
	})
	auth := g.auth
	g.api = http.NewServeMux()
	effectsAPI := auth.Wrap(g.traced("effects", effect.HandlerIn(g.effects, g.log.With("component", "effects"), effectsNamespace)))
	g.api.Handle("/v1/effects", effectsAPI)
	g.api.Handle("/v1/effects/", effectsAPI)

	adminMux := http.NewServeMux()
	api.RegisterFor(adminMux, g.operatorOf, g.log.With("component", "admin"))
	g.mountSources(adminMux)
	g.mountTokens(adminMux)
	adminMux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.WriteError(w, http.StatusNotFound, receive.ReasonNotFound, "no such endpoint: see docs/api.md")
	})
	adminAPI := auth.Wrap(adminMux)
	source := func(r *http.Request) string { return r.PathValue("source") }
	g.api.Handle(PublishRoute, auth.WrapPublish(g.owned(store.ObjectSource, source, g.traced("publish", http.HandlerFunc(g.publish)))))
	pullFrom := func(r *http.Request) string { return r.PathValue("name") }
	g.api.Handle(pull.PullRoute, auth.WrapPull(pullFrom, g.owned(store.ObjectDestination, pullFrom, g.traced("pull", http.HandlerFunc(g.pulls.ServePull)))))
	g.api.Handle(pull.AckRoute, auth.WrapPull(g.pulls.AckDestination, g.ownedOr(store.ObjectDestination, g.pulls.AckDestination, notLeased, g.traced("ack", http.HandlerFunc(g.pulls.ServeAck)))))
	g.api.Handle("/v1/", adminAPI)
	g.api.Handle(effect.ResetRoute.Pattern(), adminAPI) // the one reset: audited (effect.Handler has none)

	// The dashboard's forms create, change and delete sources and
	// destinations through the API's own handlers (its checks, sealing,
	// store, audit and tenant rules), as the session's caller.
	objects := http.NewServeMux()
	g.mountSources(objects)
	var err error
	g.dashboard, err = dashboard.New(dashboard.Options{Service: g.admin, Tenant: g.tenantDashboard, Auth: auth, Logger: g.log.With("component", "dashboard"),
		Demo: g.opts.DemoSink, Sessions: g.store, TrustedProxies: proxies, UnknownSources: g.intake.UnknownSources,
		Transformed: g.transformed, Objects: objects, Presets: provider.Names()})
	if err != nil {
		return err
	}
	g.api.Handle(dashboard.Prefix, g.dashboard)
	g.api.Handle(dashboard.Prefix+"/", g.dashboard)
	g.probes(g.api)
	g.api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.WriteError(w, http.StatusNotFound, receive.ReasonNotFound, "nothing here: the API is under /v1")
	})
	return nil
}

// buildIntakeMux mounts the intake listener.
func (g *Gateway) buildIntakeMux() {
	g.mux = http.NewServeMux()
	g.mux.HandleFunc("/", g.intake.NotFound)
	g.mux.Handle("/in/{source}", g.intake)
	g.mux.Handle("/in/{source}/{token}", g.intake) // a secret in the path, for providers that send no header
	g.probes(g.mux)
	g.intakeHandler = g.intake.Paths(g.mux)
	if g.cfg.Load().Metrics.Listen == "" {
		g.mux.Handle("GET /metrics", g.MetricsHandler())
	}
	if g.opts.DemoSink {
		g.mux.HandleFunc("POST /_demo/sink", g.demoSink)
	}
}

// traced gives each request to h a server span named for it, continuing
// the caller's trace when its request carries a traceparent (the effects
// API: the user's code that claims an effect is inside its own trace).
func (g *Gateway) traced(name string, h http.Handler) http.Handler {
	if g.tracer == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := g.tracer.Start(ctx, name+" "+r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if key, ok := strings.CutPrefix(r.URL.Path, "/v1/effects/"); ok {
			span.SetAttributes(tracing.Effect.String(strings.SplitN(key, "/", 2)[0]))
		}
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// HealthRoutes are the probes, served alike on the intake listener and on
// the API's (a probe may point at either): GET /livez, the process answers
// (GET /healthz is its older name); GET /readyz, the store can commit.
func HealthRoutes() []string { return []string{"GET /healthz", "GET /livez", "GET /readyz"} }

// probes mounts HealthRoutes on mux.
func (g *Gateway) probes(mux *http.ServeMux) {
	for _, r := range HealthRoutes() {
		if r == "GET /readyz" {
			mux.HandleFunc(r, g.ready)
		} else {
			mux.HandleFunc(r, healthz)
		}
	}
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Handler is the gateway's intake: POST /in/{source}, the probes
// (HealthRoutes) and GET /metrics.
func (g *Gateway) Handler() http.Handler { return g.intakeHandler }

// Store is the gateway's store, for reading what it holds.
func (g *Gateway) Store() store.Store { return g.store }

// Effects is the gateway's effects ledger, in process: its operations share
// the gateway's commits.
func (g *Gateway) Effects() *effect.Local { return g.effects }

// Replay redelivers a stored event on purpose (see store.Replay), as the
// operator's replay does: audited, under the actor admin.WithActor put in
// ctx ("library" when none), and waking this gateway's worker. It returns
// how many deliveries it requeued, or an error wrapping admin.ErrNotFound.
func (g *Gateway) Replay(ctx context.Context, source, key string) (int, error) {
	if admin.ActorOf(ctx) == admin.UnknownActor {
		ctx = admin.WithActor(ctx, "library")
	}
	n, err := g.admin.ReplayEvents(ctx, admin.EventFilter{Source: source, Key: key}, false)
	return n.Count, err
}

// Admin is the gateway's operator surface (what the admin API serves).
func (g *Gateway) Admin() *admin.Service { return g.admin }

// DashboardLoginLink makes a one-time link (a path on the API listener)
// that logs into the dashboard with token, valid for ttl.
func (g *Gateway) DashboardLoginLink(token string, ttl time.Duration) string {
	return g.dashboard.LoginLink(token, ttl)
}

// changed is called after an operator's change: a pause holds at once,
// and a resume, replay or retry wakes the worker.
func (g *Gateway) changed() {
	g.holds.Changed(context.Background())
	g.worker.Notify()
}

// APIHandler is the API listener's handler: /v1/effects (and the admin API
// and dashboard), behind the bearer tokens of api.tokens.
func (g *Gateway) APIHandler() http.Handler { return g.api }

// readyFresh is how long the latest write's outcome stands for the store's
// health. Under load, commits answer readiness without touching the store
// (a probe would queue behind them, and flap); when idle, a probe writes.
const readyFresh = 5 * time.Second

// ready answers /readyz: 200 when the store can commit. That is the latest
// write's outcome (an intake commit or a probe) when it is recent, else a
// probe: a small durable write. Reads are not enough: a full disk answers
// them and refuses every commit.
//
// A write lock another connection holds (SQLite's one writer: a caller's
// open outbox transaction, say) is not a reason to be unready, however
// long: every process that could serve this store waits on the same lock
// (the store has one writer, so one replica), requests queue and are
// answered when it is released (or 503 past the commit bound), and a load
// balancer that dropped the only replica would turn that wait into refused
// connections that outlast it by its probe period. The wait is the
// answer's detail, the metric's and the doctor's.
func (g *Gateway) ready(w http.ResponseWriter, r *http.Request) {
	if lock := g.store.LockWait(); lock.For > 0 {
		g.readyLocked(w, lock)
		return
	}
	if stuck := g.committer.Stuck(); stuck > readyFresh {
		// The store answers a ping but has not finished a commit for
		// seconds (a lock held elsewhere): requests sent here would wait
		// behind it, so they had better go to another replica.
		g.log.Warn("not ready: a commit has waited for the store", "for", stuck.Round(time.Millisecond))
		jsonhttp.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable",
			"error": fmt.Sprintf("a commit has waited %s for the store", stuck.Round(time.Second))})
		return
	}
	at, err := g.health.latest()
	if time.Since(at) > readyFresh || errors.Is(err, store.ErrLocked) {
		// A write that gave up on the lock said nothing of the store:
		// probe it.
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		start := time.Now()
		err = g.store.Ping(ctx)
		cancel()
		g.health.record(err)
		if lock := g.store.LockWait(); lock.For > 0 {
			g.readyLocked(w, lock) // the probe waited behind a commit that waits for the lock
			return
		}
		if errors.Is(err, store.ErrLocked) {
			g.readyLocked(w, store.LockWait{For: time.Since(start)})
			return
		}
	}
	if err != nil {
		g.log.Warn("not ready: the store cannot commit", "err", err)
		jsonhttp.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "the store cannot commit"})
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, g.readyDetail(map[string]any{"status": "ready"}))
}

// readyDetail adds to a ready answer what is part of the detail, not of
// readiness: a queue source's broker (HTTP intake is unaffected by it,
// and the consumer reconnects), and a change to the stored objects this
// gateway could not apply (it serves what it had).
func (g *Gateway) readyDetail(body map[string]any) map[string]any {
	if len(g.consumers) > 0 {
		body["consumers"] = g.ConsumerStatus()
	}
	if b := g.behind.Load(); b != nil {
		body["objects"] = map[string]any{"applied": false, "since": b.Since, "error": b.Error,
			"message": "the sources and destinations as stored (another replica's change) cannot be applied here: this gateway serves what it had"}
	}
	return body
}

// readyLocked answers /readyz while the store's writer waits for a lock
// another connection holds: ready, with the wait (see ready).
func (g *Gateway) readyLocked(w http.ResponseWriter, lock store.LockWait) {
	g.log.Warn("the store's writer waits for a lock another connection holds", "for", lock.For.Round(time.Millisecond))
	body := map[string]any{"status": "ready", "store_lock": map[string]any{
		"waited_seconds": lock.For.Seconds(), "message": lock.String(),
	}}
	jsonhttp.WriteJSON(w, http.StatusOK, g.readyDetail(body))
}

func (g *Gateway) demoSink(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	g.log.Info("demo sink received a delivery",
		"idempotency_key", r.Header.Get("Idempotency-Key"),
		"attempt", r.Header.Get("X-Oncehook-Attempt"),
		"bytes", len(body))
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// Run runs the background parts (delivery, and the upkeep: sweeps, hold
// refresh, alert checks) until ctx ends, then lets in-flight deliveries finish or release their leases.
func (g *Gateway) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { g.worker.Run(ctx) })
	wg.Go(func() { g.maintain.Run(ctx) })
	g.runConsumers(ctx, &wg)
	g.watchObjects(ctx, &wg)
	if g.store.SupportsListener() { // PostgreSQL's NOTIFY: every replica's worker wakes at once
		wg.Go(func() {
			if err := g.store.Listen(ctx, g.worker.Notify); err != nil {
				g.log.Error("delivery notifications", "err", err)
			}
		})
	}
	wg.Wait()
}

// Serve accepts intake requests on ln (and API requests on api, when
// given) and runs delivery until ctx ends. Then it shuts down in order: stop
// accepting and finish in-flight requests (each waits for its own commit),
// let in-flight deliveries finish or give their leases back, commit
// everything queued (claims, outcomes, effects), and close the store.
// Serve owns the listeners it is given: it closes them when it stops, and
// when it cannot start (an upstream's address is taken), with the gateway.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener, api ...net.Listener) error {
	newServer := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			IdleTimeout:       120 * time.Second,
			ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		}
	}
	servers := []*http.Server{newServer(g.intakeHandler)}
	intakeAddr := ln.Addr().String()
	g.intakeAddr.Store(&intakeAddr)
	listeners := []net.Listener{ln}
	for _, l := range api {
		servers = append(servers, newServer(g.api))
		listeners = append(listeners, l)
	}
	for i := range g.upstreams {
		u := &g.upstreams[i]
		l, err := net.Listen("tcp", u.listen)
		if err != nil {
			// Serve stops before it served: what it was given and what it
			// opened close, and so does the gateway, as when it stops.
			for _, open := range listeners {
				open.Close()
			}
			return errors.Join(fmt.Errorf("upstreams %s: listen %s: %w", u.name, u.listen, err), g.Close())
		}
		addr := l.Addr().String()
		u.addr.Store(&addr)
		servers = append(servers, newServer(u.handler))
		listeners = append(listeners, l)
	}
	bgCtx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	bgDone := make(chan struct{})
	go func() { defer close(bgDone); g.Run(bgCtx) }()

	// Intake answers what net/http refuses before any handler (a header
	// over its limit) itself: counted, in its one error shape.
	listeners[0] = g.intake.Listener(listeners[0], g.tls)
	for i := range listeners[1:] {
		listeners[i+1] = g.withTLS(listeners[i+1])
	}
	serveErr := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { serveErr <- srv.Serve(listeners[i]) }()
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), g.opts.ShutdownTimeout)
	defer cancel()
	var stopping sync.WaitGroup
	for _, srv := range servers {
		stopping.Add(1)
		go func() {
			defer stopping.Done()
			if sErr := srv.Shutdown(shutdownCtx); sErr != nil {
				g.log.Warn("http shutdown", "err", sErr)
			}
		}()
	}
	stopping.Wait()
	// The worker stops before the writer: its last outcomes (and the
	// deliveries it gives back) must ride the writer's last commits.
	stopBackground()
	<-bgDone
	if cErr := g.Close(); cErr != nil {
		err = errors.Join(err, cErr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close commits what is queued and closes the store. Serve calls it; call
// it yourself only when you used Handler and Run instead of Serve, after Run
// has returned. It stops what New started, last first: the publishers,
// the writer (its last commits), the tracer (its last spans), the store,
// and the transformations' idle runtimes.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() { g.closeErr = g.stops.unwind() })
	return g.closeErr
}

// MetricsHandler serves GET /metrics (Prometheus). It is on the intake
// listener unless the config's metrics.listen moves it, and then the
// caller serves it there (ServeMetrics).
func (g *Gateway) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(g.metrics.Registry, promhttp.HandlerOpts{})
}

// ServeMetrics serves GET /metrics on ln until ctx ends.
func (g *Gateway) ServeMetrics(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", g.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)}
	ln = g.withTLS(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// withTLS serves ln over TLS when the config names a certificate.
func (g *Gateway) withTLS(ln net.Listener) net.Listener {
	if g.tls == nil {
		return ln
	}
	return tls.NewListener(ln, g.tls)
}

// Scheme is how the gateway's listeners are reached: "https" with the
// config's tls, else "http".
func (g *Gateway) Scheme() string {
	if g.tls != nil {
		return "https"
	}
	return "http"
}

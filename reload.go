package oncehook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
)

// Reload applies next, a config read anew, without a restart: sources
// (secrets, so a rotation is two reloads: the new secret beside the old,
// then the old one gone), routes, filters, order, destinations with their
// retries, rates and breakers, and API tokens. What is bound at start
// (listeners, the store, the delivery lease, ...: config.Reload) keeps its
// running value, and the answer's Restart names what changed there.
//
// Next is validated in full before anything changes: an invalid config is
// refused with every error, and the running one stays (the metric
// oncehook_config_last_reload_successful says 0). A request or an attempt
// in progress finishes under the config it started with. A destination
// that next no longer names keeps its deliveries, held, until a config
// names it again; the dashboard and GET /v1/destinations mark it removed.
//
// Reload is not audited; the API's POST /v1/reload and SIGHUP go through
// the Admin service, which is.
func (g *Gateway) Reload(ctx context.Context, next *config.Config) (admin.ReloadView, error) {
	v, finish, err := g.prepare(ctx, next)
	if err != nil {
		return v, err
	}
	finish(true)
	return v, nil
}

// prepare validates next, a config file read anew, with the sources
// created through the API, against the running config and builds what
// apply swaps in, holding off every other change until finish is called:
// with true it applies next, with false it lets it go (its audit entry
// could not be written). A refused config holds nothing.
func (g *Gateway) prepare(ctx context.Context, next *config.Config) (admin.ReloadView, func(apply bool), error) {
	return g.prepareWith(ctx, next, false)
}

// prepareWith is prepare, with the API's sources read anew from the
// store when reread (under the lock, so that a change this replica takes
// meanwhile is not lost), else the ones running.
func (g *Gateway) prepareWith(ctx context.Context, next *config.Config, reread bool) (admin.ReloadView, func(apply bool), error) {
	g.reloading.Lock()
	objects := g.objects
	if reread {
		var err error
		if objects, err = loadObjects(ctx, g.store, g.box); err != nil {
			g.reloading.Unlock()
			return admin.ReloadView{Config: g.opts.ConfigFile}, nil, g.refused(err)
		}
	}
	v, finish, err := g.prepareLocked(ctx, next, objects, "")
	if err != nil {
		g.reloading.Unlock()
		return v, nil, g.refused(err)
	}
	return v, finish, nil
}

// prepareLocked is prepare's work, under g.reloading, for file (the
// config file's config) and objects (the sources created through the
// API): the config to run is both (config.Merge), checked whole by the
// one check a file gets. change names an API change for the log ("" for a
// reload of the file). finish unlocks g.reloading; an error leaves it
// locked, for the caller to unlock.
func (g *Gateway) prepareLocked(ctx context.Context, file *config.Config, objects []object, change string) (admin.ReloadView, func(apply bool), error) {
	v := admin.ReloadView{Config: g.opts.ConfigFile}
	next, err := file.Merge(sourcesOf(objects), destinationsOf(objects), tokensOf(objects)...)
	if err != nil {
		return v, nil, fmt.Errorf("config: %w", err)
	}
	var p *parts
	r, err := config.Reload(g.cfg.Load(), next, checker{kinds: g.opts.Kinds, parts: func(c *config.Config, fail config.FailFunc) {
		p = build(c, g.opts.Kinds, fail, g.built.Load())
	}})
	var senders map[string]deliver.Sender
	keep := func(bool) {}
	if err == nil {
		senders, keep, err = g.publishers.prepare(r.Config)
	}
	if err != nil {
		if p != nil {
			p.close()
		}
		return v, nil, err
	}
	v.Sources, v.Destinations, v.Changed, v.Restart = len(r.Config.Sources), len(r.Config.Destinations), r.Changed, r.Restart
	if v.Changed == nil {
		v.Changed = []string{}
	}
	var once sync.Once
	finish := func(apply bool) {
		once.Do(func() {
			defer g.reloading.Unlock()
			defer keep(apply) // after the worker has the new senders
			if !apply {
				p.close()
				if change == "" {
					g.log.Warn("config reload not applied: its audit entry could not be written", "config", v.Config)
				}
				return
			}
			g.file, g.objects = file, objects
			g.apply(ctx, r.Config, p, senders)
			if change != "" {
				g.log.Info(change, "changed", v.Changed)
				return
			}
			g.reloaded(v, r)
		})
	}
	return v, finish, nil
}

// reloaded logs and counts a reload of the file that was applied.
func (g *Gateway) reloaded(v admin.ReloadView, r *config.Reloaded) {
	g.metrics.ReloadOK.Set(1)
	g.metrics.ReloadAt.SetToCurrentTime()
	switch {
	case len(v.Changed) > 0:
		g.log.Info("config reloaded", "config", v.Config, "changed", v.Changed)
	case len(r.Restart) > 0:
		// Not "changed=[]" above "listen changed": what changed
		// waits for a restart (the warnings below name it).
		g.log.Info("config reloaded", "config", v.Config, "applied", "nothing now: what changed takes effect at a restart", "restart", r.Restart)
	default:
		g.log.Info("config reloaded", "config", v.Config, "changed", "nothing")
	}
	for _, f := range r.Restart {
		g.log.Warn("config reload: "+f+" changed, and takes effect only at a restart; the running value stays", "field", f)
	}
	for _, w := range r.Config.Warnings() {
		g.log.Warn("config: " + w)
	}
}

// apply swaps cfg into every part that takes it while running, with the
// parts that prepare built from it (so that nothing fails here). The destinations go in before the sources that route to them, so
// that an event of a new route always finds its destination.
func (g *Gateway) apply(ctx context.Context, cfg *config.Config, p *parts, senders map[string]deliver.Sender) {
	if err := g.holds.Configure(ctx, holdPolicies(cfg)); err != nil {
		// The policies are in; only the breakers' fresh read failed, and
		// the next refresh makes it.
		g.log.Warn("config reload: read the breakers", "err", err)
	}
	g.pulls.Configure(pullNames(cfg))
	g.worker.SetDestinations(deliverDestinations(cfg, p, senders, g.pulls))
	g.intake.SetSources(p.sources)
	g.auth.SetTokens(apiTokens(cfg))
	g.admin.SetCatalog(catalog(cfg))
	g.admin.SetTenantTokens(tenantTokens(cfg))
	if g.queues != nil {
		g.queues.SetDestinations(destinationNames(cfg))
	}
	g.cfg.Store(cfg)
	if old := g.built.Swap(p); old != nil {
		// The replaced scripts' idle runtimes go (attempts running on them
		// finish there: a closed script still runs); the unchanged ones p
		// took over keep theirs.
		old.replacedBy(p)
	}
	g.worker.Notify() // a destination added back, a rate raised: look now
}

// reloadFile reads Options.ConfigFile anew and reloads it: the Admin
// service's Reloader, behind POST /v1/reload and SIGHUP.
func (g *Gateway) reloadFile(ctx context.Context) (admin.ReloadView, func(bool), error) {
	v := admin.ReloadView{Config: g.opts.ConfigFile}
	if g.opts.ConfigFile == "" {
		return v, nil, errors.New("no config file: this gateway was given its config, not a file to read")
	}
	// Checked as LoadConfig checks it, but each transformation the running
	// config has from the same recipe is not compiled again for the check.
	running := g.built.Load()
	next, err := config.LoadWith(g.opts.ConfigFile, checker{kinds: g.opts.Kinds, parts: func(c *config.Config, fail config.FailFunc) {
		build(c, g.opts.Kinds, fail, running).close()
	}})
	if err != nil {
		return v, nil, g.refused(err)
	}
	if g.opts.Override != nil {
		g.opts.Override(next)
	}
	// The API's sources are read anew too: a change another replica
	// took reaches this one at its reload.
	return g.prepareWith(ctx, next, true)
}

// refused says a reload was refused: the metric, and every error logged.
func (g *Gateway) refused(err error) error {
	g.metrics.ReloadOK.Set(0)
	g.log.Error("config reload refused: the running config stays", "config", g.opts.ConfigFile)
	for _, e := range unjoin(err) {
		g.log.Error("config reload: " + e.Error())
	}
	return err
}

// unjoin lists the errors err joins (config errors come joined, one a
// field), or err alone.
func unjoin(err error) []error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
	}
	return []error{err}
}

// ReloadOnSignal reloads the config file each time hup receives, until ctx
// ends: `oncehook serve` passes SIGHUP. Each reload goes through the Admin
// service, so it is audited, under the actor "signal".
func (g *Gateway) ReloadOnSignal(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			// A refused config is logged, every error, by Reload.
			if _, err := g.admin.Reload(admin.WithActor(ctx, "signal")); err != nil && !errors.Is(err, admin.ErrInvalid) {
				g.log.Error("config reload", "err", err)
			}
		}
	}
}

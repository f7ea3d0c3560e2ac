package oncehook

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oncehook/oncehook/store"
)

// Every replica applies the objects as stored (#45). A change taken
// through the API on one replica is applied there at once
// (prepareLocked); every other replica hears of it by PostgreSQL's
// NOTIFY, sent in the change's own transaction (store.ListenObjects), and
// reads the objects' mark (store.ObjectsMark) as a fallback every
// ObjectsPoll. When the mark differs from the objects it runs, it reads
// them all anew and applies them through a reload's path: the reload
// lock, the file's check, the same build and swap. One it cannot apply
// (a secret sealed with a key it lacks, a spec it does not read) leaves
// it serving what it had, and says so: its log once per change,
// /readyz's detail (still 200: it serves) and the doctor's findings.

// Defaults of Options.ObjectsPoll (and the config's objects.poll, which
// it overrides when set).
const (
	objectsPollListened = 10 * time.Second // PostgreSQL: NOTIFY first, this behind it
	objectsPollAlone    = 30 * time.Second // SQLite: one gateway as a rule
)

// objectsBehind is a stored state of the objects this gateway could not
// apply: what the store said, and since when.
type objectsBehind struct {
	mark  string
	Error string    `json:"error"`
	Since time.Time `json:"since"`
}

// ObjectsBehind says why this gateway does not run the sources and
// destinations as stored (another replica's change it could not apply),
// and since when; nil when it runs them.
func (g *Gateway) ObjectsBehind() *objectsBehind { return g.behind.Load() }

// objectsBehindNow is ObjectsBehind for the doctor: why, and since when
// ("" when the gateway runs the objects as stored).
func (g *Gateway) objectsBehindNow() (string, time.Time) {
	if b := g.behind.Load(); b != nil {
		return b.Error, b.Since
	}
	return "", time.Time{}
}

// watchObjects starts, on wg, what applies other replicas' changes until
// ctx ends: the listener where the store has one, and the poll.
func (g *Gateway) watchObjects(ctx context.Context, wg *sync.WaitGroup) {
	every := g.opts.ObjectsPoll
	if every < 0 {
		return
	}
	if every == 0 {
		every = time.Duration(g.cfg.Load().Objects.Poll) // the config's objects.poll; 0: the default below
	}
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default: // one is pending: it reads whatever changed since
		}
	}
	if g.store.SupportsListener() {
		if every == 0 {
			every = objectsPollListened
		}
		wg.Go(func() {
			if err := g.store.ListenObjects(ctx, changed); err != nil {
				g.log.Error("object change notifications", "err", err)
			}
		})
	} else if every == 0 {
		every = objectsPollAlone
	}
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			case <-t.C:
			}
			g.syncObjects(ctx)
		}
	})
}

// syncObjects applies the objects as stored when they differ from the
// ones running.
func (g *Gateway) syncObjects(ctx context.Context) {
	g.reloading.Lock()
	mark, err := g.store.ObjectsMark(ctx)
	if err != nil {
		g.reloading.Unlock()
		if ctx.Err() == nil {
			g.log.Warn("the stored sources and destinations could not be read; the next poll tries again", "err", err)
		}
		return
	}
	running := make([]store.Object, len(g.objects))
	for i, o := range g.objects {
		running[i] = o.stored
	}
	if mark == store.MarkOf(running) {
		g.behind.Store(nil) // a reload, or a 409's refresh, caught up
		g.reloading.Unlock()
		return
	}
	if b := g.behind.Load(); b != nil && b.mark == mark {
		g.reloading.Unlock() // said already: once per change
		return
	}
	objects, err := loadObjects(ctx, g.store, g.box, g.objects...)
	var finish func(bool)
	if err == nil {
		_, finish, err = g.prepareLocked(ctx, g.file, objects, "sources and destinations applied as stored: another replica changed them")
	}
	if err != nil {
		g.reloading.Unlock()
		// The first error said, and how many more: /readyz's detail
		// stays short when a thousand objects fail alike; the log has
		// every one.
		errs := unjoin(err)
		why := errs[0].Error()
		if len(errs) > 1 {
			why += fmt.Sprintf(" (and %d more)", len(errs)-1)
		}
		g.behind.Store(&objectsBehind{mark: mark, Error: why, Since: time.Now().UTC()})
		g.log.Error("another replica's change to the sources and destinations cannot be applied here; this gateway keeps serving what it had", "err", err)
		return
	}
	finish(true)
	g.behind.Store(nil)
	g.changed()
}

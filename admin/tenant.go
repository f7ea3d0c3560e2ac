package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/tenant"
	"github.com/oncehook/oncehook/store"
)

// ErrForbidden is an action a caller's token may not take whatever its
// argument (a tenant's token reloading the gateway's config): the API
// answers 403.
var ErrForbidden = errors.New("forbidden")

// Tenant returns the Operator a tenant's token reaches: s, narrowed to
// the sources and destinations whose tenant is tenant, and to what
// belongs to them (their events, deliveries, dead letters, stats, alert
// issues and audit entries).
//
// What it owns is read from the running config at each call, so that an
// object created or deleted at runtime is in or out at once. Another
// tenant's object, or a shared one (of no tenant), answers as one that
// does not exist (ErrNotFound, said as for a name nobody has): a tenant's
// token never learns another's names, nor whether they exist. What
// belongs to no object (a reload, the effects ledger's reset) is
// ErrForbidden.
//
// Every method of Operator is written out here, none embedded: a method
// added to Operator does not compile until it says what a tenant sees.
func (s *Service) Tenant(tenant string) *TenantOperator {
	return &TenantOperator{s: s, tenant: tenant}
}

// TenantOperator is a tenant's part of a Service (Service.Tenant).
type TenantOperator struct {
	s      *Service
	tenant string
}

var _ Operator = (*TenantOperator)(nil)

// sources are the names of the tenant's sources, never nil (an empty
// list narrows a query to nothing).
func (t *TenantOperator) sources() []string { return t.s.tenantSources(t.tenant) }

func (t *TenantOperator) ownsSource(name string) bool {
	return t.s.tenants().Owns(t.tenant, tenant.Source, name)
}

func (t *TenantOperator) ownsDestination(name string) bool {
	return t.s.tenants().Owns(t.tenant, tenant.Destination, name)
}

// names checks the names a filter gives: each the tenant's, or a 404
// that does not list the known ones (Service's would list every
// tenant's).
func (t *TenantOperator) names(source, destination string) error {
	if source != "" && !t.ownsSource(source) {
		return fmt.Errorf("no such source %q: %w", source, ErrNotFound)
	}
	if destination != "" && !t.ownsDestination(destination) {
		return fmt.Errorf("no such destination %q: %w", destination, ErrNotFound)
	}
	return nil
}

// event checks that event id is of one of the tenant's sources.
func (t *TenantOperator) event(ctx context.Context, id int64) (EventDetail, error) {
	e, err := t.s.Event(ctx, id)
	if err != nil {
		return e, err
	}
	if !t.ownsSource(e.Source) {
		return EventDetail{}, fmt.Errorf("event %d: %w", id, ErrNotFound)
	}
	for i := range e.Deliveries {
		t.hideShared(&e.Deliveries[i])
	}
	return e, nil
}

// answerHidden stands for what a shared destination answered, or the
// error its attempt met, in a tenant's view.
const answerHidden = "a shared destination (the operator's): its answer is not shown to a tenant"

// hideShared keeps from a tenant what a delivery to a shared destination
// (one of no tenant, the operator's, which a tenant's source may route
// to) answered or failed with: its response body and its errors, which
// name the operator's URL and show its service's answer (a tester routed
// a tenant's source to a shared destination pointed at an internal
// service, and read that service's answer in the event's history). The
// state, status and times stay: they are the tenant's event's.
func (t *TenantOperator) hideShared(d *DeliveryDetail) {
	if t.ownsDestination(d.Destination) {
		return
	}
	if d.LastError != "" {
		d.LastError = answerHidden
	}
	for i := range d.History {
		a := &d.History[i]
		if a.Error != "" {
			a.Error = answerHidden
		}
		a.Response = ""
	}
}

func (t *TenantOperator) Sources(ctx context.Context) ([]SourceView, error) {
	return t.s.sourceViews(ctx, func(src Source) bool { return t.ownsSource(src.Name) })
}

func (t *TenantOperator) Stats(ctx context.Context, q StatsQuery) (StatsView, error) {
	if err := t.names(q.Source, q.Destination); err != nil {
		return StatsView{}, err
	}
	v, err := t.s.Stats(ctx, q)
	v.Sources = slices.DeleteFunc(v.Sources, func(x SourceSeries) bool { return !t.ownsSource(x.Name) })
	v.Destinations = slices.DeleteFunc(v.Destinations, func(x DestinationSeries) bool { return !t.ownsDestination(x.Name) })
	return v, err
}

func (t *TenantOperator) Events(ctx context.Context, f EventFilter) (EventPage, error) {
	if err := t.names(f.Source, ""); err != nil {
		return EventPage{}, err
	}
	f.Sources = t.sources()
	return t.s.Events(ctx, f)
}

func (t *TenantOperator) Event(ctx context.Context, id int64) (EventDetail, error) {
	return t.event(ctx, id)
}

func (t *TenantOperator) ReplayEvent(ctx context.Context, id int64) (Count, error) {
	if _, err := t.event(ctx, id); err != nil {
		return Count{}, err
	}
	return t.s.ReplayEvent(ctx, id)
}

func (t *TenantOperator) ReplayEvents(ctx context.Context, f EventFilter, dryRun bool) (Count, error) {
	if err := t.names(f.Source, f.Destination); err != nil {
		return Count{}, err
	}
	f.Sources = t.sources()
	return t.s.ReplayEvents(ctx, f, dryRun)
}

func (t *TenantOperator) DeadLetters(ctx context.Context, f DeadFilter) (DeadPage, error) {
	if err := t.names(f.Source, f.Destination); err != nil {
		return DeadPage{}, err
	}
	f.Sources = t.sources()
	page, err := t.s.DeadLetters(ctx, f)
	for i := range page.DeadLetters {
		if d := &page.DeadLetters[i]; d.LastError != "" && !t.ownsDestination(d.Destination) {
			d.LastError = answerHidden
		}
	}
	return page, err
}

func (t *TenantOperator) RetryDeadLetters(ctx context.Context, f DeadFilter, dryRun bool) (Count, error) {
	if err := t.names(f.Source, f.Destination); err != nil {
		return Count{}, err
	}
	f.Sources = t.sources()
	return t.s.RetryDeadLetters(ctx, f, dryRun)
}

func (t *TenantOperator) PurgeDeadLetters(ctx context.Context, f DeadFilter, dryRun bool) (Count, error) {
	if err := t.names(f.Source, f.Destination); err != nil {
		return Count{}, err
	}
	f.Sources = t.sources()
	return t.s.PurgeDeadLetters(ctx, f, dryRun)
}

func (t *TenantOperator) Destinations(ctx context.Context) ([]DestinationView, error) {
	all, err := t.s.Destinations(ctx)
	return slices.DeleteFunc(all, func(v DestinationView) bool { return !t.ownsDestination(v.Name) }), err
}

func (t *TenantOperator) SetPaused(ctx context.Context, destination string, paused bool) (DestinationView, error) {
	if err := t.names("", destination); err != nil {
		return DestinationView{}, err
	}
	return t.s.SetPaused(ctx, destination, paused)
}

func (t *TenantOperator) SetBreaker(ctx context.Context, destination string, open bool) (DestinationView, error) {
	if err := t.names("", destination); err != nil {
		return DestinationView{}, err
	}
	return t.s.SetBreaker(ctx, destination, open)
}

// scanPages bounds how many pages of the whole audit log, or of every
// alert issue, a tenant's page reads to find its own entries: a page of a
// tenant with little to show among many others' ends early, with a
// cursor to go on from.
const scanPages = 20

// Audit is the entries made by the tenant's tokens (the gateway names
// them: SetTenantTokens), those about its sources, destinations and
// tokens ("source acme-hotmart"), and those whose target names it as the
// tenant reached (tenantTarget: the operator's bulk replays, retries,
// purges and deliveries of its data, and acknowledgements and
// resolutions of its alert issues). An entry of a change that spanned
// every tenant ("every tenant: type=order.paid") is shown too, without
// its count: that counts other tenants' events as well.
func (t *TenantOperator) Audit(ctx context.Context, cursor string, limit int) (AuditPage, error) {
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > maxLimit {
		return AuditPage{}, invalid("limit", "want 1 to %d", maxLimit)
	}
	tokens := t.s.tenantTokens()
	mine := func(e *AuditEntry) bool {
		if name, ok := strings.CutPrefix(e.Actor, "token:"); ok && tokens[name] == t.tenant {
			return true
		}
		switch reached, every := tenantOfTarget(e.Target); {
		case every:
			e.Count = 0
			return true
		case reached != "":
			return reached == t.tenant
		}
		kind, name, _ := strings.Cut(e.Target, " ")
		return (kind == "source" && t.ownsSource(name)) || (kind == "destination" && t.ownsDestination(name)) ||
			(kind == "token" && tokens[name] == t.tenant)
	}
	out := AuditPage{Entries: []AuditEntry{}}
	for range scanPages {
		page, err := t.s.Audit(ctx, cursor, maxLimit)
		if err != nil {
			return AuditPage{}, err
		}
		for _, e := range page.Entries {
			if mine(&e) {
				out.Entries = append(out.Entries, e)
			}
			cursor = cursorOf(e.ID)
			if len(out.Entries) == limit {
				out.NextCursor = cursor
				return out, nil
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
	}
	out.NextCursor = cursor
	return out, nil
}

// Doctor checks the tenant's sources only; what concerns every source at
// once (the store's writer, another replica's change) is the operator's.
func (t *TenantOperator) Doctor(ctx context.Context, source string) (DoctorReport, error) {
	if err := t.names(source, ""); err != nil {
		return DoctorReport{}, err
	}
	report := DoctorReport{Sources: []SourceDiagnosis{}, Store: []Finding{}}
	names := []string{source}
	if source == "" {
		names = t.sources()
	}
	for _, name := range names {
		r, err := t.s.Doctor(ctx, name)
		if err != nil {
			return DoctorReport{}, err
		}
		report.Sources = append(report.Sources, r.Sources...)
	}
	return report, nil
}

func (t *TenantOperator) DeliverEvent(ctx context.Context, id int64, destination string) (Count, error) {
	if err := t.names("", destination); err != nil {
		return Count{}, err
	}
	if _, err := t.event(ctx, id); err != nil {
		return Count{}, err
	}
	return t.s.DeliverEvent(ctx, id, destination)
}

func (t *TenantOperator) DeliverEvents(ctx context.Context, f EventFilter, dryRun bool) (Count, error) {
	if err := t.names(f.Source, f.Destination); err != nil {
		return Count{}, err
	}
	f.Sources = t.sources()
	return t.s.DeliverEvents(ctx, f, dryRun)
}

func (t *TenantOperator) SkipEvent(ctx context.Context, id int64, destination string) (Count, error) {
	if err := t.names("", destination); err != nil {
		return Count{}, err
	}
	if _, err := t.event(ctx, id); err != nil {
		return Count{}, err
	}
	return t.s.SkipEvent(ctx, id, destination)
}

func (t *TenantOperator) ResetOrder(ctx context.Context, source, entity, destination string) (Count, error) {
	if err := t.names(source, destination); err != nil {
		return Count{}, err
	}
	if source == "" {
		return Count{}, invalid("source", "missing")
	}
	return t.s.ResetOrder(ctx, source, entity, destination)
}

// ResetEffect reopens one of the tenant's effects: its keys are its own,
// under its namespace (effect.Namespace), as its token claimed them.
func (t *TenantOperator) ResetEffect(ctx context.Context, key string) error {
	return t.s.ResetEffect(ctx, effect.Namespace(t.tenant)+key)
}

// ListEffects lists the tenant's effects, keyed as its token claimed them
// (without the namespace), for the dashboard.
func (t *TenantOperator) ListEffects(ctx context.Context, q store.EffectQuery) ([]effect.Record, error) {
	ns := effect.Namespace(t.tenant)
	q.Prefix = ns + q.Prefix
	if q.After != "" {
		q.After = ns + q.After
	}
	recs, err := t.s.ListEffects(ctx, q)
	for i := range recs {
		recs[i].Key = strings.TrimPrefix(recs[i].Key, ns)
	}
	return recs, err
}

func (t *TenantOperator) Reload(ctx context.Context) (ReloadView, error) {
	return ReloadView{}, fmt.Errorf("the gateway's config is the operator's: a tenant's token does not reload it: %w", ErrForbidden)
}

// ownsIssue is true of an issue about one of the tenant's sources or
// destinations.
func (t *TenantOperator) ownsIssue(v IssueView) bool {
	switch v.Scope {
	case store.ScopeSource:
		return t.ownsSource(v.Name)
	case store.ScopeDestination:
		return t.ownsDestination(v.Name)
	}
	return false
}

func (t *TenantOperator) Issues(ctx context.Context, f IssueFilter) (IssuePage, error) {
	limit := f.Limit
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > maxLimit {
		return IssuePage{}, invalid("limit", "want 1 to %d", maxLimit)
	}
	out := IssuePage{Issues: []IssueView{}}
	f.Limit = maxLimit
	for range scanPages {
		page, err := t.s.Issues(ctx, f)
		if err != nil {
			return IssuePage{}, err
		}
		for _, is := range page.Issues {
			if t.ownsIssue(is) {
				out.Issues = append(out.Issues, is)
			}
			f.Cursor = cursorOf(is.ID)
			if len(out.Issues) == limit {
				out.NextCursor = f.Cursor
				return out, nil
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
	}
	out.NextCursor = f.Cursor
	return out, nil
}

func (t *TenantOperator) issue(ctx context.Context, id int64) error {
	v, err := t.s.Issue(ctx, id)
	if err != nil {
		return err
	}
	if !t.ownsIssue(v) {
		return fmt.Errorf("issue %d: %w", id, ErrNotFound)
	}
	return nil
}

func (t *TenantOperator) Issue(ctx context.Context, id int64) (IssueView, error) {
	if err := t.issue(ctx, id); err != nil {
		return IssueView{}, err
	}
	return t.s.Issue(ctx, id)
}

func (t *TenantOperator) AcknowledgeIssue(ctx context.Context, id int64) (IssueView, error) {
	if err := t.issue(ctx, id); err != nil {
		return IssueView{}, err
	}
	return t.s.AcknowledgeIssue(ctx, id)
}

func (t *TenantOperator) ResolveIssue(ctx context.Context, id int64) (IssueView, error) {
	if err := t.issue(ctx, id); err != nil {
		return IssueView{}, err
	}
	return t.s.ResolveIssue(ctx, id)
}

// everyTenant is reach's answer for a change whose filter names no one
// tenant's objects: it may have reached any tenant's.
const everyTenant = "\x00every"

// reach is whose objects a change reached, as its filter names them:
// source's tenant when it names a source; destination's when it names a
// tenant's destination (which takes its tenant's events only); the one
// tenant of every source in sources (a tenant's narrowing) when they are
// one's; "" for a shared object's or nothing; everyTenant for a filter
// that spans tenants, in a config that has any.
func (s *Service) reach(source, destination string, sources []string) string {
	x := s.tenants()
	if source != "" {
		t, _ := x.Of(tenant.Source, source)
		return t
	}
	if t, _ := x.Of(tenant.Destination, destination); t != "" {
		return t
	}
	if sources != nil {
		one := ""
		for i, name := range sources {
			t, _ := x.Of(tenant.Source, name)
			if i > 0 && t != one {
				return everyTenant
			}
			one = t
		}
		return one
	}
	if x.Tenanted() {
		return everyTenant
	}
	return ""
}

// eventTarget is target, the audit target of a change to event id,
// prefixed with its source's tenant (tenantTarget). An event the store
// does not have leaves target as it is: the change itself then answers
// that it is not found.
func (s *Service) eventTarget(ctx context.Context, id int64, target string) (string, error) {
	e, err := s.admin.Event(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return target, nil
	case err != nil:
		return "", err
	}
	return tenantTarget(s.reach(e.Source, "", nil), target), nil
}

// tenantTarget is an audit entry's target prefixed with whose objects the
// change reached (reach), so that each tenant's audit shows the
// operator's changes to its data (TenantOperator.Audit): "tenant acme:
// source=acme-hotmart", "every tenant: type=order.paid". No other target
// begins so (a filter's begins with its field, an object's with its kind),
// and a tenant's name holds neither a space nor a colon.
func tenantTarget(reach, target string) string {
	switch reach {
	case "":
		return target
	case everyTenant:
		return "every tenant: " + target
	}
	return "tenant " + reach + ": " + target
}

// tenantOfTarget reads tenantTarget's prefix back: the tenant named,
// every (the change spans tenants), or neither.
func tenantOfTarget(target string) (name string, every bool) {
	if strings.HasPrefix(target, "every tenant: ") {
		return "", true
	}
	rest, ok := strings.CutPrefix(target, "tenant ")
	if !ok {
		return "", false
	}
	name, _, ok = strings.Cut(rest, ": ")
	if !ok {
		return "", false
	}
	return name, false
}

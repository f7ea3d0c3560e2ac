package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/store"
)

// The operator's actions, written once. Each is an entry below: its name,
// what it takes and answers, who may take it, how the audit log records
// it, its route in the HTTP API and its command in the CLI. The transports
// are thin adapters that read this table: the API's handler serves every
// entry (package api binds the argument from the path, the query or the
// body), its Client calls the same route, and a drift test in each
// (api, apitest, cmd/oncehook) fails when an entry lacks a route, a client
// method, an OpenAPI path or a CLI command. A new action is one entry, an
// Operator method and the Service's work.

// Role is who may take an action.
type Role string

const (
	// RoleRead is any token, read-only ones included: the action changes
	// nothing (and is a GET, which is how apiauth and the dashboard tell).
	RoleRead Role = "read"
	// RoleOperate is a token that is not read-only: the action changes
	// something, and the audit log records it under the caller's name.
	RoleOperate Role = "operate"
)

// Action is one thing an operator can see or do.
type Action struct {
	// Name names the action in the table (and in a test's failure).
	Name string
	// Method is the Operator method that takes it; two actions share one
	// where a flag tells them apart (SetPaused: pause and resume).
	Method string
	// Route is its method and path in the HTTP API. A GET or a DELETE
	// takes its argument in the query, a POST in a JSON body; a field
	// tagged path:"id" fills the route's wildcard.
	Route jsonhttp.Route
	Role  Role
	// Audit is the audit log's word for the change ("" for a read).
	Audit string
	// CLI is the command that takes it, as `oncehook` is called (its
	// placeholders in capitals: ID a number, the others a name); NoCLI,
	// when there is none, says why.
	CLI   string
	NoCLI string

	newIn func() any
	do    func(ctx context.Context, op Operator, in any) (any, error)
}

// Input returns a pointer to a new, zero argument of the action, for a
// transport to fill before Do.
func (a Action) Input() any { return a.newIn() }

// Do takes the action on op with in, a pointer that Input returned,
// filled.
func (a Action) Do(ctx context.Context, op Operator, in any) (any, error) { return a.do(ctx, op, in) }

// Act is an Action with the types of its argument and answer, for a
// caller that knows them (the API's Client).
type Act[In, Out any] struct{ Action }

func (a Act[In, Out]) action() Action { return a.Action }

// act binds an entry of the table to the Operator method that takes it.
func act[In, Out any](a Action, do func(context.Context, Operator, In) (Out, error)) Act[In, Out] {
	a.newIn = func() any { return new(In) }
	a.do = func(ctx context.Context, op Operator, in any) (any, error) { return do(ctx, op, *in.(*In)) }
	return Act[In, Out]{a}
}

func get(path string) jsonhttp.Route  { return jsonhttp.Route{Method: http.MethodGet, Path: path} }
func post(path string) jsonhttp.Route { return jsonhttp.Route{Method: http.MethodPost, Path: path} }

// The arguments and answers of the actions, as the API carries them.
type (
	// None is the argument of an action that takes none.
	None struct{}
	// EventRef names one stored event.
	EventRef struct {
		ID int64 `json:"-" path:"id"`
	}
	// DeliveryRef names one event's delivery to one destination.
	DeliveryRef struct {
		ID          int64  `json:"-" path:"id"`
		Destination string `json:"destination"`
	}
	// OrderRef names an entity of an ordered source (to one destination,
	// or every one); an entity's id can hold any character, so it
	// travels in the body.
	OrderRef struct {
		Source      string `json:"-" path:"name"`
		Entity      string `json:"entity"`
		Destination string `json:"destination,omitempty"`
	}
	// DestinationRef names one destination.
	DestinationRef struct {
		Name string `json:"-" path:"name"`
	}
	// EffectRef names one record of the effects ledger.
	EffectRef struct {
		Key string `json:"-" path:"key"`
	}
	// StatsArgs is a StatsQuery as the API takes it.
	StatsArgs struct {
		Source      string    `json:"source,omitempty"`
		Destination string    `json:"destination,omitempty"`
		From        time.Time `json:"from,omitzero"`
		To          time.Time `json:"to,omitzero"`
		Granularity string    `json:"granularity,omitempty"` // 1h (default) or 1d
	}
	// EventsBulk is a bulk replay or delivery: every event a filter
	// selects.
	EventsBulk struct {
		EventFilter
		DryRun bool `json:"dry_run,omitempty"`
	}
	// DeadBulk is a bulk retry: every dead letter a filter selects.
	DeadBulk struct {
		DeadFilter
		DryRun bool `json:"dry_run,omitempty"`
	}
	// DeadPurge is a purge, in the query: DELETE bodies are often dropped
	// by proxies.
	DeadPurge struct {
		Destination string `json:"destination,omitempty"`
		Source      string `json:"source,omitempty"`
		All         bool   `json:"all,omitempty"`
		DryRun      bool   `json:"dry_run,omitempty"`
	}
	// AuditArgs is a page of the audit log.
	AuditArgs struct {
		Cursor string `json:"cursor,omitempty"`
		Limit  int    `json:"limit,omitempty"`
	}
	// DoctorArgs names the source to check (every one when empty).
	DoctorArgs struct {
		Source string `json:"source,omitempty"`
	}
	// SourceList is the configured sources.
	SourceList struct {
		Sources []SourceView `json:"sources"`
	}
	// DestinationList is the destinations.
	DestinationList struct {
		Destinations []DestinationView `json:"destinations"`
	}
	// EffectState is an effects ledger record's state after a change.
	EffectState struct {
		State string `json:"state"`
	}
)

// StatsArgsOf is q as the API takes it.
func StatsArgsOf(q StatsQuery) StatsArgs {
	a := StatsArgs{Source: q.Source, Destination: q.Destination, From: q.From, To: q.To}
	if q.Granularity == Daily {
		a.Granularity = "1d"
	}
	return a
}

// query is the StatsQuery a's fields say.
func (a StatsArgs) query() (StatsQuery, error) {
	q := StatsQuery{Source: a.Source, Destination: a.Destination, From: a.From, To: a.To}
	switch a.Granularity {
	case "", "1h":
		q.Granularity = Hourly
	case "1d":
		q.Granularity = Daily
	default:
		return q, invalid("granularity", "want 1h or 1d")
	}
	return q, nil
}

// The table.
var (
	ActSources = act(Action{Name: "sources", Method: "Sources", Route: get("/v1/sources"), Role: RoleRead, CLI: "sources ls"},
		func(ctx context.Context, op Operator, _ None) (SourceList, error) {
			list, err := op.Sources(ctx)
			return SourceList{list}, err
		})
	ActStats = act(Action{Name: "stats", Method: "Stats", Route: get("/v1/stats"), Role: RoleRead, CLI: "stats"},
		func(ctx context.Context, op Operator, in StatsArgs) (StatsView, error) {
			q, err := in.query()
			if err != nil {
				return StatsView{}, err
			}
			return op.Stats(ctx, q)
		})
	ActEvents = act(Action{Name: "events", Method: "Events", Route: get("/v1/events"), Role: RoleRead, CLI: "events ls"},
		func(ctx context.Context, op Operator, in EventFilter) (EventPage, error) { return op.Events(ctx, in) })
	ActReplayEvents = act(Action{Name: "replay_events", Method: "ReplayEvents", Route: post("/v1/events/replay"), Role: RoleOperate,
		Audit: "replay", CLI: "events replay --source S"},
		func(ctx context.Context, op Operator, in EventsBulk) (Count, error) {
			return op.ReplayEvents(ctx, in.EventFilter, in.DryRun)
		})
	ActEvent = act(Action{Name: "event", Method: "Event", Route: get("/v1/events/{id}"), Role: RoleRead, CLI: "events show ID"},
		func(ctx context.Context, op Operator, in EventRef) (EventDetail, error) { return op.Event(ctx, in.ID) })
	ActReplayEvent = act(Action{Name: "replay_event", Method: "ReplayEvent", Route: post("/v1/events/{id}/replay"), Role: RoleOperate,
		Audit: "replay", CLI: "events replay ID"},
		func(ctx context.Context, op Operator, in EventRef) (Count, error) { return op.ReplayEvent(ctx, in.ID) })
	ActDeliverEvent = act(Action{Name: "deliver_event", Method: "DeliverEvent", Route: post("/v1/events/{id}/deliver"), Role: RoleOperate,
		Audit: "deliver", CLI: "events deliver ID --destination D"},
		func(ctx context.Context, op Operator, in DeliveryRef) (Count, error) {
			return op.DeliverEvent(ctx, in.ID, in.Destination)
		})
	ActDeliverEvents = act(Action{Name: "deliver_events", Method: "DeliverEvents", Route: post("/v1/events/deliver"), Role: RoleOperate,
		Audit: "deliver", CLI: "events deliver --source S --destination D"},
		func(ctx context.Context, op Operator, in EventsBulk) (Count, error) {
			return op.DeliverEvents(ctx, in.EventFilter, in.DryRun)
		})
	ActSkipEvent = act(Action{Name: "skip_event", Method: "SkipEvent", Route: post("/v1/events/{id}/skip"), Role: RoleOperate,
		Audit: "skip", CLI: "events skip ID --destination D"},
		func(ctx context.Context, op Operator, in DeliveryRef) (Count, error) {
			return op.SkipEvent(ctx, in.ID, in.Destination)
		})
	ActResetOrder = act(Action{Name: "reset_order", Method: "ResetOrder", Route: post("/v1/sources/{name}/order/reset"), Role: RoleOperate,
		Audit: "order_reset", CLI: "order reset --source S --entity E"},
		func(ctx context.Context, op Operator, in OrderRef) (Count, error) {
			return op.ResetOrder(ctx, in.Source, in.Entity, in.Destination)
		})
	ActDeadLetters = act(Action{Name: "dead_letters", Method: "DeadLetters", Route: get("/v1/dead-letters"), Role: RoleRead, CLI: "dead ls"},
		func(ctx context.Context, op Operator, in DeadFilter) (DeadPage, error) {
			return op.DeadLetters(ctx, in)
		})
	ActRetryDead = act(Action{Name: "retry_dead_letters", Method: "RetryDeadLetters", Route: post("/v1/dead-letters/retry"), Role: RoleOperate,
		Audit: "retry", CLI: "dead retry --all"},
		func(ctx context.Context, op Operator, in DeadBulk) (Count, error) {
			return op.RetryDeadLetters(ctx, in.DeadFilter, in.DryRun)
		})
	ActPurgeDead = act(Action{Name: "purge_dead_letters", Method: "PurgeDeadLetters",
		Route: jsonhttp.Route{Method: http.MethodDelete, Path: "/v1/dead-letters"}, Role: RoleOperate, Audit: "purge", CLI: "dead purge --all"},
		func(ctx context.Context, op Operator, in DeadPurge) (Count, error) {
			return op.PurgeDeadLetters(ctx, DeadFilter{Destination: in.Destination, Source: in.Source, All: in.All}, in.DryRun)
		})
	ActDestinations = act(Action{Name: "destinations", Method: "Destinations", Route: get("/v1/destinations"), Role: RoleRead, CLI: "destinations ls"},
		func(ctx context.Context, op Operator, _ None) (DestinationList, error) {
			list, err := op.Destinations(ctx)
			return DestinationList{list}, err
		})
	ActPause        = setPaused("pause", true)
	ActResume       = setPaused("resume", false)
	ActOpenBreaker  = setBreaker("breaker_open", "open-breaker", "open", true)
	ActCloseBreaker = setBreaker("breaker_close", "close-breaker", "close", false)
	ActAudit        = act(Action{Name: "audit", Method: "Audit", Route: get("/v1/audit"), Role: RoleRead, NoCLI: "the dashboard's audit page lists it"},
		func(ctx context.Context, op Operator, in AuditArgs) (AuditPage, error) {
			return op.Audit(ctx, in.Cursor, in.Limit)
		})
	ActDoctor = act(Action{Name: "doctor", Method: "Doctor", Route: get("/v1/doctor"), Role: RoleRead, CLI: "doctor"},
		func(ctx context.Context, op Operator, in DoctorArgs) (DoctorReport, error) {
			return op.Doctor(ctx, in.Source)
		})
	ActReload = act(Action{Name: "reload", Method: "Reload", Route: post("/v1/reload"), Role: RoleOperate, Audit: "reload", CLI: "reload"},
		func(ctx context.Context, op Operator, _ None) (ReloadView, error) { return op.Reload(ctx) })
	// ActResetEffect is the effects ledger's reset, audited here (the
	// ledger's own handler serves the rest of /v1/effects).
	ActResetEffect = act(Action{Name: "reset_effect", Method: "ResetEffect", Route: effect.ResetRoute, Role: RoleOperate, Audit: "effect_reset",
		NoCLI: "the dashboard's effects page resets a record, and effect.Client.Reset from Go"},
		func(ctx context.Context, op Operator, in EffectRef) (EffectState, error) {
			if err := op.ResetEffect(ctx, in.Key); err != nil {
				return EffectState{}, err
			}
			return EffectState{State: store.EffectPending}, nil
		})
)

// The alerts' issues.
var (
	ActIssues = act(Action{Name: "alert_issues", Method: "Issues", Route: get("/v1/alerts/issues"), Role: RoleRead, CLI: "alerts ls"},
		func(ctx context.Context, op Operator, in IssueFilter) (IssuePage, error) { return op.Issues(ctx, in) })
	ActIssue = act(Action{Name: "alert_issue", Method: "Issue", Route: get("/v1/alerts/issues/{id}"), Role: RoleRead, CLI: "alerts show ID"},
		func(ctx context.Context, op Operator, in IssueRef) (IssueView, error) { return op.Issue(ctx, in.ID) })
	ActAcknowledgeIssue = act(Action{Name: "alert_acknowledge", Method: "AcknowledgeIssue", Route: post("/v1/alerts/issues/{id}/acknowledge"),
		Role: RoleOperate, Audit: "alert_acknowledge", CLI: "alerts ack ID"},
		func(ctx context.Context, op Operator, in IssueRef) (IssueView, error) {
			return op.AcknowledgeIssue(ctx, in.ID)
		})
	ActResolveIssue = act(Action{Name: "alert_resolve", Method: "ResolveIssue", Route: post("/v1/alerts/issues/{id}/resolve"),
		Role: RoleOperate, Audit: "alert_resolve", CLI: "alerts resolve ID"},
		func(ctx context.Context, op Operator, in IssueRef) (IssueView, error) {
			return op.ResolveIssue(ctx, in.ID)
		})
)

// setPaused is the pause (paused) or the resume of a destination.
func setPaused(name string, paused bool) Act[DestinationRef, DestinationView] {
	return act(Action{Name: name, Method: "SetPaused", Route: post("/v1/destinations/{name}/" + name), Role: RoleOperate,
		Audit: name, CLI: "destinations " + name + " NAME"},
		func(ctx context.Context, op Operator, in DestinationRef) (DestinationView, error) {
			return op.SetPaused(ctx, in.Name, paused)
		})
}

// setBreaker opens (open) or closes a destination's breaker by hand.
func setBreaker(name, verb, path string, open bool) Act[DestinationRef, DestinationView] {
	return act(Action{Name: name, Method: "SetBreaker", Route: post("/v1/destinations/{name}/breaker/" + path), Role: RoleOperate,
		Audit: name, CLI: "destinations " + verb + " NAME"},
		func(ctx context.Context, op Operator, in DestinationRef) (DestinationView, error) {
			return op.SetBreaker(ctx, in.Name, open)
		})
}

// Actions is the table, in the order the API lists its routes.
func Actions() []Action {
	return []Action{ActSources.Action, ActStats.Action, ActEvents.Action, ActReplayEvents.Action, ActEvent.Action,
		ActReplayEvent.Action, ActDeliverEvent.Action, ActDeliverEvents.Action, ActSkipEvent.Action, ActResetOrder.Action, ActDeadLetters.Action,
		ActRetryDead.Action, ActPurgeDead.Action, ActDestinations.Action, ActPause.Action, ActResume.Action,
		ActOpenBreaker.Action, ActCloseBreaker.Action, ActAudit.Action, ActDoctor.Action, ActReload.Action, ActResetEffect.Action,
		ActIssues.Action, ActIssue.Action, ActAcknowledgeIssue.Action, ActResolveIssue.Action}
}

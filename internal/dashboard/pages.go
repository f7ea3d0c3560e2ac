package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/store"
)

// sourceCard is a source on the overview.
type sourceCard struct {
	admin.SourceView
	Day      chart
	Week     chart
	Reasons  []reason
	Rejected int64
}

type reason struct {
	Name  string
	Count int64
}

func reasons(c admin.SourceCounts) []reason {
	var out []reason
	for _, k := range sortedKeys(c.Rejected) {
		out = append(out, reason{k, c.Rejected[k]})
	}
	return out
}

// unknownCard is the requests for sources the config does not have: how
// many in the last 24 hours (every replica's, from the rollups) and the
// names lately asked for (this replica's; strangers choose them, so they
// are kept in memory only and shown escaped).
type unknownCard struct {
	Last24h int64
	Names   []metrics.RecentUnknownSource
}

func (d *Dashboard) cards(r *http.Request, only string) ([]sourceCard, *unknownCard, error) {
	ctx := r.Context()
	l := d.langOf(r)
	svc := d.svc(r)
	sources, err := svc.Sources(ctx)
	if err != nil {
		return nil, nil, err
	}
	now := d.opts.Now()
	week, err := svc.Stats(ctx, admin.StatsQuery{Source: only, From: now.Add(-7*24*time.Hour + time.Hour), To: now})
	if err != nil {
		return nil, nil, err
	}
	series := map[string]admin.SourceSeries{}
	for _, s := range week.Sources {
		series[s.Name] = s
	}
	var out []sourceCard
	for _, src := range sources {
		if only != "" && src.Name != only {
			continue
		}
		pts := series[src.Name].Points
		day := pts
		if len(day) > 24 {
			day = day[len(day)-24:]
		}
		out = append(out, sourceCard{SourceView: src, Day: newChart(l, day, src.Baseline, false), Week: newChart(l, pts, src.Baseline, false),
			Reasons: reasons(src.Last24h), Rejected: src.Last24h.RejectedTotal()})
	}
	var unknown *unknownCard
	if only == "" && tenantOf(r) == "" {
		// The names asked for that none has are the operator's to see.
		u := &unknownCard{}
		for _, p := range series[""].Points {
			if !p.At.Before(now.Add(-24 * time.Hour)) {
				u.Last24h += p.Rejected[metrics.UnknownSource]
			}
		}
		if d.opts.UnknownSources != nil {
			u.Names = d.opts.UnknownSources()
		}
		if u.Last24h > 0 || len(u.Names) > 0 {
			unknown = u
		}
	}
	return out, unknown, nil
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request, s session) {
	cards, unknown, err := d.cards(r, "")
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "overview", s, map[string]any{"Sources": cards, "Unknown": unknown})
}

// live answers the overview's script with this hour's counters.
func (d *Dashboard) live(w http.ResponseWriter, r *http.Request, _ session) {
	sources, err := d.svc(r).Sources(r.Context())
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	out := map[string]map[string]int64{}
	for _, s := range sources {
		out[s.Name] = map[string]int64{
			"received": s.LastHour.Received, "duplicate": s.LastHour.Duplicate, "rejected": s.LastHour.RejectedTotal(),
			"keyless": s.LastHour.Keyless, "republished": s.LastHour.Republished,
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (d *Dashboard) source(w http.ResponseWriter, r *http.Request, s session) {
	name := r.PathValue("name")
	cards, _, err := d.cards(r, name)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	if len(cards) == 0 {
		d.fail(w, r, http.StatusNotFound, "not_found")
		return
	}
	rep, err := d.svc(r).Doctor(r.Context(), name)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "source", s, map[string]any{"Source": cards[0], "Doctor": rep.Sources[0]})
}

func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	f := admin.EventFilter{Source: q.Get("source"), Type: q.Get("type"), State: q.Get("state"), KeyPrefix: q.Get("key_prefix"),
		Where: strings.TrimSpace(q.Get("where")), Cursor: q.Get("cursor"), Limit: 50}
	status, unknown, badWhere := http.StatusOK, "", ""
	page, err := d.svc(r).Events(r.Context(), f)
	var invalid *admin.InvalidError
	switch {
	case errors.Is(err, admin.ErrNotFound) && f.Source != "":
		// A source neither configured nor stored (a link typed by hand,
		// a source renamed): the page says so, with its filter to pick
		// another, not a bare "not found".
		status, unknown, err = http.StatusNotFound, f.Source, nil
	case errors.As(err, &invalid) && invalid.Field == "where":
		// A search that does not compile is shown beside its field, kept
		// as typed, to be mended: the page itself is whole (200).
		badWhere, err = invalid.Msg, nil
	}
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	sources, err := d.svc(r).Sources(r.Context())
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	dests, err := d.svc(r).Destinations(r.Context())
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	// After a dry run the page comes back with the action's choices
	// (act, to, dead), its card open, ready to be taken as counted.
	act := bulkChoice{Act: q.Get("act"), To: q.Get("to"), Dead: q.Get("dead") != ""}
	d.render(w, r, status, "events", s, map[string]any{"Page": page, "Filter": f, "Sources": sources, "Destinations": dests,
		"States": store.EventStates(), "Unknown": unknown, "BadWhere": badWhere, "Act": act})
}

// bulkChoice is what the events page's bulk action was asked last: which
// (replay, deliver), to which destination, dead letters only.
type bulkChoice struct {
	Act, To string
	Dead    bool
}

func eventID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

func (d *Dashboard) event(w http.ResponseWriter, r *http.Request, s session) {
	id, ok := eventID(r)
	if !ok {
		d.fail(w, r, http.StatusNotFound, "not_found")
		return
	}
	e, err := d.svc(r).Event(r.Context(), id)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	body := e.Body
	if body == "" && len(e.BodyBase64) > 0 {
		body = fmt.Sprintf("(%d bytes, not UTF-8)", len(e.BodyBase64))
	} else if pretty := prettyJSON(body); pretty != "" {
		body = pretty
	}
	transformed := map[string]*Transformed{}
	if d.opts.Transformed != nil {
		for _, dl := range e.Deliveries {
			t, err := d.opts.Transformed(r.Context(), e, dl.Destination)
			if err != nil {
				t = &Transformed{Error: err.Error()}
			}
			if t != nil {
				if pretty := prettyJSON(t.Body); pretty != "" {
					t.Body = pretty
				}
				transformed[dl.Destination] = t
			}
		}
	}
	d.render(w, r, http.StatusOK, "event", s, map[string]any{"Event": e, "Body": body, "Headers": sortedKeys(e.Headers), "Transformed": transformed})
}

// prettyJSON indents a JSON payload, keeping its fields in their order.
func prettyJSON(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return ""
	}
	return b.String()
}

func (d *Dashboard) replay(w http.ResponseWriter, r *http.Request, _ session) {
	if r.PathValue("id") == "all" {
		d.replayAll(w, r)
		return
	}
	id, ok := eventID(r)
	if !ok {
		d.fail(w, r, http.StatusNotFound, "not_found")
		return
	}
	n, err := d.svc(r).ReplayEvent(r.Context(), id)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	done(w, r, fmt.Sprintf("%s/events/%d", Prefix, id), "replay:"+strconv.Itoa(n.Count))
}

// onDelivery takes a (deliver: to a destination the event's route passed
// over; skip: end an ordered delivery that holds its entity, a fifo head
// that cannot succeed) on the event in the path and the destination the
// form names, and goes back to the event.
func (d *Dashboard) onDelivery(a admin.Act[admin.DeliveryRef, admin.Count]) func(http.ResponseWriter, *http.Request, session) {
	return func(w http.ResponseWriter, r *http.Request, _ session) {
		id, ok := eventID(r)
		if !ok {
			d.fail(w, r, http.StatusNotFound, "not_found")
			return
		}
		if _, err := a.Do(r.Context(), d.svc(r), &admin.DeliveryRef{ID: id, Destination: r.PostFormValue("destination")}); err != nil {
			d.failErr(w, r, err)
			return
		}
		done(w, r, fmt.Sprintf("%s/events/%d", Prefix, id), a.Audit)
	}
}

// resetOrder forgets an entity's version delivered to a destination, from
// a stale delivery's page, and goes back to that event.
func (d *Dashboard) resetOrder(w http.ResponseWriter, r *http.Request, _ session) {
	if _, err := d.svc(r).ResetOrder(r.Context(), r.PostFormValue("source"), r.PostFormValue("entity"), r.PostFormValue("destination")); err != nil {
		d.failErr(w, r, err)
		return
	}
	to := Prefix + "/events"
	if id, err := strconv.ParseInt(r.PostFormValue("event"), 10, 64); err == nil && id > 0 {
		to = fmt.Sprintf("%s/events/%d", Prefix, id)
	}
	done(w, r, to, "order_reset")
}

// bulkFilter is the events page's filter, as its bulk actions' forms
// carry it, with the destination and dead the form chose.
func bulkFilter(r *http.Request) admin.EventFilter {
	return admin.EventFilter{Source: r.PostFormValue("source"), Type: r.PostFormValue("type"), State: r.PostFormValue("state"), KeyPrefix: r.PostFormValue("key_prefix"),
		Where: strings.TrimSpace(r.PostFormValue("where")), Destination: r.PostFormValue("destination"), Dead: r.PostFormValue("dead") != "",
		All: r.PostFormValue("all") != ""}
}

// unfiltered is true when f selects every stored event, whatever it
// narrows the action to.
func unfiltered(f admin.EventFilter) bool {
	f.Destination, f.Dead, f.Sources = "", false, nil
	return reflect.DeepEqual(f, admin.EventFilter{All: f.All})
}

// bulkBack is the events page of f, after a bulk action act: with the
// action's choices when it was a dry run, so that its card opens again
// with them, to be taken as counted.
func bulkBack(f admin.EventFilter, act string, dry bool) string {
	back := Prefix + "/events?" + queryOf("source", f.Source, "type", f.Type, "state", f.State, "key_prefix", f.KeyPrefix, "where", f.Where)
	if dry {
		dead := ""
		if f.Dead {
			dead = "1"
		}
		back += "&" + queryOf("act", act, "to", f.Destination, "dead", dead)
	}
	return back
}

// replayAll replays what the events page's filter selects, narrowed to
// a destination or to dead letters when the form says so.
func (d *Dashboard) replayAll(w http.ResponseWriter, r *http.Request) {
	f := bulkFilter(r)
	dry := r.PostFormValue("dry_run") != ""
	if unfiltered(f) && !dry && r.PostFormValue("confirm") == "" {
		// No filter is every event to every destination: the page asks
		// to confirm it, as it does a purge (the API asks for all: true).
		d.fail(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	n, err := d.svc(r).ReplayEvents(r.Context(), f, dry)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	what := "replay:"
	if dry {
		what = "replay_dry:"
	}
	done(w, r, bulkBack(f, "replay", dry), what+strconv.Itoa(n.Count))
}

// deliverAll gives every event the events page's filter selects a
// delivery to the destination the form chose (where their route passed
// over), and says what it left alone.
func (d *Dashboard) deliverAll(w http.ResponseWriter, r *http.Request, _ session) {
	f := bulkFilter(r)
	f.Dead = false
	dry := r.PostFormValue("dry_run") != ""
	if unfiltered(f) && !dry && r.PostFormValue("confirm") == "" {
		d.fail(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	n, err := d.svc(r).DeliverEvents(r.Context(), f, dry)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	what := "deliver_all:"
	if dry {
		what = "deliver_all_dry:"
	}
	done(w, r, bulkBack(f, "deliver", dry), fmt.Sprintf("%s%d,%d,%d,%s", what, n.Count, n.Already, n.Gone, f.Destination))
}

func (d *Dashboard) dead(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	f := admin.DeadFilter{Destination: q.Get("destination"), Cursor: q.Get("cursor"), Limit: 50}
	page, err := d.svc(r).DeadLetters(r.Context(), f)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	dests, err := d.svc(r).Destinations(r.Context())
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "dead", s, map[string]any{"Page": page, "Filter": f, "Destinations": dests})
}

func deadFilter(r *http.Request) admin.DeadFilter {
	f := admin.DeadFilter{Destination: r.PostFormValue("destination")}
	f.All = f.Destination == ""
	return f
}

func (d *Dashboard) retryDead(w http.ResponseWriter, r *http.Request, _ session) {
	n, err := d.svc(r).RetryDeadLetters(r.Context(), deadFilter(r), false)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	done(w, r, Prefix+"/dead-letters", "retry:"+strconv.Itoa(n.Count))
}

func (d *Dashboard) purgeDead(w http.ResponseWriter, r *http.Request, _ session) {
	if r.PostFormValue("confirm") == "" {
		d.fail(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	n, err := d.svc(r).PurgeDeadLetters(r.Context(), deadFilter(r), false)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	done(w, r, Prefix+"/dead-letters", "purge:"+strconv.Itoa(n.Count))
}

func (d *Dashboard) destinations(w http.ResponseWriter, r *http.Request, s session) {
	dests, err := d.svc(r).Destinations(r.Context())
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "destinations", s, map[string]any{"Destinations": dests})
}

// onDestination takes the action its form names (pause, resume,
// breaker_open, breaker_close: the table's names of the actions on one
// destination) on the destination in the path.
func (d *Dashboard) onDestination(w http.ResponseWriter, r *http.Request, _ session) {
	i := slices.IndexFunc(admin.Actions(), func(a admin.Action) bool {
		_, onOne := a.Input().(*admin.DestinationRef)
		return onOne && a.Name == r.PathValue("action")
	})
	if i < 0 {
		d.fail(w, r, http.StatusNotFound, "not_found")
		return
	}
	a := admin.Actions()[i]
	if _, err := a.Do(r.Context(), d.svc(r), &admin.DestinationRef{Name: r.PathValue("name")}); err != nil {
		d.failErr(w, r, err)
		return
	}
	done(w, r, Prefix+"/destinations", a.Name)
}

func (d *Dashboard) effects(w http.ResponseWriter, r *http.Request, s session) {
	pending, err := d.svc(r).ListEffects(r.Context(), store.EffectQuery{State: store.EffectPending, Limit: 200})
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	// A pending record is held (its lease runs), left halfway (its lease
	// ran out without a word), or released: its owner gave it back after
	// a retryable failure, nobody holds it, and the next claim runs it.
	var held, leaseExpired, released []effect.Record
	for _, rec := range pending {
		switch {
		case rec.LeaseExpired:
			leaseExpired = append(leaseExpired, rec)
		case rec.LeaseExpiresAt == nil:
			released = append(released, rec)
		default:
			held = append(held, rec)
		}
	}
	failed, err := d.svc(r).ListEffects(r.Context(), store.EffectQuery{State: store.EffectFailed, Limit: 100})
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	// The answers of the user's APIs behind the Idempotency-Key proxy
	// (keys idem:<api>:<client>:<key>), the first ones in key order.
	done, err := d.svc(r).ListEffects(r.Context(), store.EffectQuery{State: store.EffectDone, After: idempotency.LedgerKeyPrefix, Limit: 100})
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	var answers []apiAnswer
	for _, rec := range done {
		api, rest, ok := idempotency.ParseLedgerKey(rec.Key)
		if !ok {
			break
		}
		client, key, _ := strings.Cut(rest, ":")
		var kept struct {
			Status  int  `json:"status"`
			NotKept bool `json:"not_kept"`
		}
		json.Unmarshal(rec.Result, &kept)
		answers = append(answers, apiAnswer{API: api, Client: client, Key: key, Status: kept.Status, NotKept: kept.NotKept, At: rec.UpdatedAt})
	}
	d.render(w, r, http.StatusOK, "effects", s, map[string]any{"Held": nonNil(held), "LeaseExpired": nonNil(leaseExpired), "Released": nonNil(released), "Failed": nonNil(failed), "Answers": answers})
}

// apiAnswer is a stored answer of the Idempotency-Key proxy. Client is
// the digest of the credential that scopes it (empty for a single-tenant
// API): one key of two clients is two answers.
type apiAnswer struct {
	API, Client, Key string
	Status           int
	NotKept          bool // too large to keep: a retry gets 422
	At               time.Time
}

func nonNil(rs []effect.Record) []effect.Record {
	if rs == nil {
		return []effect.Record{}
	}
	return rs
}

func (d *Dashboard) resetEffect(w http.ResponseWriter, r *http.Request, _ session) {
	if err := d.svc(r).ResetEffect(r.Context(), r.PostFormValue("key")); err != nil {
		d.failErr(w, r, err)
		return
	}
	done(w, r, Prefix+"/effects", "reset")
}

func (d *Dashboard) audit(w http.ResponseWriter, r *http.Request, s session) {
	page, err := d.svc(r).Audit(r.Context(), r.URL.Query().Get("cursor"), 100)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "audit", s, map[string]any{"Page": page})
}

// alerts lists the alerts' issues: each active one with its timeline
// and its buttons, and the recently resolved.
func (d *Dashboard) alerts(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	var active []admin.IssueView
	for _, state := range []string{store.IssueOpen, store.IssueAcknowledged} {
		page, err := d.svc(r).Issues(ctx, admin.IssueFilter{State: state, Limit: 100})
		if err != nil {
			d.failErr(w, r, err)
			return
		}
		for _, is := range page.Issues {
			whole, err := d.svc(r).Issue(ctx, is.ID)
			if err != nil {
				d.failErr(w, r, err)
				return
			}
			active = append(active, whole)
		}
	}
	resolved, err := d.svc(r).Issues(ctx, admin.IssueFilter{State: store.IssueResolved, Limit: 20})
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "alerts", s, map[string]any{"Active": active, "Resolved": resolved.Issues})
}

// onIssue acknowledges or resolves an issue: the admin table's action
// on one issue that the path names.
func (d *Dashboard) onIssue(w http.ResponseWriter, r *http.Request, _ session) {
	i := slices.IndexFunc(admin.Actions(), func(a admin.Action) bool {
		_, onOne := a.Input().(*admin.IssueRef)
		return onOne && a.Role == admin.RoleOperate && a.Name == r.PathValue("action")
	})
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if i < 0 || err != nil {
		d.fail(w, r, http.StatusNotFound, "not_found")
		return
	}
	a := admin.Actions()[i]
	if _, err := a.Do(r.Context(), d.svc(r), &admin.IssueRef{ID: id}); err != nil {
		d.failErr(w, r, err)
		return
	}
	done(w, r, Prefix+"/alerts", a.Name)
}

// flash turns a done= value ("replay:3") into its message.
func (p page) FlashMessage() string {
	if p.Flash == "" {
		return ""
	}
	kind, n, _ := strings.Cut(p.Flash, ":")
	switch kind {
	case "replay", "replay_dry", "retry", "purge":
		if _, err := strconv.Atoi(n); err != nil {
			return ""
		}
		return p.L.T("done."+kind, n)
	case "deliver_all", "deliver_all_dry":
		// added,already,gone,destination
		parts := strings.SplitN(n, ",", 4)
		if len(parts) != 4 {
			return ""
		}
		for _, c := range parts[:3] {
			if _, err := strconv.Atoi(c); err != nil {
				return ""
			}
		}
		msg := p.L.T("done."+kind, parts[0], parts[3])
		if parts[1] != "0" || parts[2] != "0" {
			msg += " " + p.L.T("done.deliver_left", parts[1], parts[2])
		}
		return msg
	case "pause", "resume", "reset", "skip", "deliver", "breaker_open", "breaker_close", "order_reset", "alert_acknowledge", "alert_resolve", "created", "updated", "deleted":
		return p.L.T("done." + kind)
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

package oncehook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/store"
)

// The API's sources and destinations (#45): POST /v1/sources creates
// one, GET, PATCH and DELETE /v1/sources/{name} read, change and remove
// one; the same under /v1/destinations. The body is the object as the
// config file writes it, in JSON; it is checked by the file's check and
// applied through a reload's swap (prepareLocked), and stored
// (store.Objects) between the check and the swap, with its audit entry:
// a change that cannot be applied is refused before it is stored, and one
// that could not be stored is not applied. An object the file names is
// the file's: changing it here is 409.

// SourceRoutes are the routes of the API's sources and destinations, on
// the API listener behind api.tokens (a read-only token may only read
// them): what docs/openapi.yaml is checked against.
func SourceRoutes() []string {
	var out []string
	for _, k := range objectKinds {
		out = append(out, "POST /v1/"+k.plural, "GET /v1/"+k.plural+"/{name}", "PATCH /v1/"+k.plural+"/{name}", "DELETE /v1/"+k.plural+"/{name}")
	}
	return out
}

// objectKind is one kind of object the API creates: its store kind, the
// config file's list of it, and the audit log's words for it.
type objectKind struct {
	kind, plural, fields string
}

var objectKinds = []objectKind{{store.ObjectSource, "sources", sourceFields}, {store.ObjectDestination, "destinations", destinationFields}}

// maxObjectBody bounds an object's JSON.
const maxObjectBody = 64 << 10

// mountSources mounts the routes on mux (the admin API's, behind auth).
func (g *Gateway) mountSources(mux *http.ServeMux) {
	for _, k := range objectKinds {
		mux.HandleFunc("POST /v1/"+k.plural, func(w http.ResponseWriter, r *http.Request) { g.createObject(w, r, k) })
		mux.HandleFunc("GET /v1/"+k.plural+"/{name}", func(w http.ResponseWriter, r *http.Request) { g.getObject(w, r, k) })
		mux.HandleFunc("PATCH /v1/"+k.plural+"/{name}", func(w http.ResponseWriter, r *http.Request) { g.patchObject(w, r, k) })
		mux.HandleFunc("DELETE /v1/"+k.plural+"/{name}", func(w http.ResponseWriter, r *http.Request) { g.deleteObject(w, r, k) })
	}
}

// ObjectView is a source or destination as the API answers it.
type ObjectView = api.ObjectView

// FieldError is one field at fault in an object refused as invalid.
type FieldError = api.FieldError

// invalidAnswer is a 400: the first field at fault, and every one.
type invalidAnswer struct {
	jsonhttp.Error
	Errors []FieldError `json:"errors"`
}

func (g *Gateway) view(o object) ObjectView {
	st := o.stored
	created, updated := st.CreatedAt.UTC(), st.UpdatedAt.UTC()
	v := ObjectView{Name: st.Name, ManagedBy: "api", Spec: shown(st.Kind, o.spec),
		Version: st.Version, CreatedAt: &created, UpdatedAt: &updated, CreatedBy: st.CreatedBy, UpdatedBy: st.UpdatedBy}
	if st.Kind == store.ObjectSource {
		v.IntakeURL = g.intakeURL(o.source)
	}
	return v
}

// intakeURL is where s takes webhooks: its public_url, or this gateway's
// intake listener's address; "" when its events come from elsewhere.
func (g *Gateway) intakeURL(s config.Source) string {
	if !s.HTTP() {
		return ""
	}
	if s.PublicURL != "" {
		return s.PublicURL
	}
	addr := g.cfg.Load().Listen
	if a := g.intakeAddr.Load(); a != nil {
		addr = *a
	}
	return g.Scheme() + "://" + addr + "/in/" + s.Name
}

// What each kind's body holds, for the answer to a body that is not a
// JSON object.
const (
	sourceFields      = "a source's fields as the config file writes them (name, preset, secrets, destinations, ...)"
	destinationFields = "a destination's fields as the config file writes them (name, url, timeout, retry, transform, ...)"
	tokenFields       = "a token's fields as the config file's api.tokens writes them (name, read_only, publish, pull; the gateway makes its value)"
)

// readBody reads a request's JSON object, bounded; fields says what it
// holds (sourceFields, ...). A body that is not UTF-8, or whose escapes
// hold half a UTF-16 pair, is refused (400, naming the field): the
// decoder would keep U+FFFD in their place, and a secret or a name be
// stored as other bytes than the caller's.
func readBody(w http.ResponseWriter, r *http.Request, fields string) (map[string]any, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxObjectBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			jsonhttp.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", maxObjectBody))
		} else {
			jsonhttp.WriteError(w, http.StatusBadRequest, "unreadable", "could not read the body")
		}
		return nil, false
	}
	if field, fault, bad := textFault(body); bad {
		what := "the body"
		if field != "" {
			what = field
		}
		jsonhttp.WriteJSON(w, http.StatusBadRequest, invalidAnswer{
			Error:  jsonhttp.Error{Error: what + ": " + fault, Reason: "invalid", Field: field},
			Errors: []FieldError{{Field: field, Error: what + ": " + fault}},
		})
		return nil, false
	}
	spec, err := decodeSpec(body)
	if errors.Is(err, errNotObject) {
		err = fmt.Errorf("%w of %s", err, fields)
	}
	if err != nil {
		jsonhttp.WriteError(w, http.StatusBadRequest, "invalid", err.Error())
		return nil, false
	}
	return spec, true
}

var recordField = regexp.MustCompile(`^(sources|destinations|api\.tokens)\[(\d+)\](?:\.|: )`)

// answerInvalid answers err (a refused object's, or the merged config's:
// plural and index are the object's list and place in it, index -1 for
// none) as a 400 whose fields are the object's own ("preset",
// "secrets[0]"), as in the file but without the file's "sources[N].".
func answerInvalid(w http.ResponseWriter, err error, plural string, index int) {
	var out []FieldError
	for _, e := range unjoin(err) {
		msg := strings.TrimPrefix(e.Error(), "config: ")
		for _, line := range unjoin(errors.New(msg)) {
			out = append(out, fieldErrorOf(line.Error(), plural, index))
		}
	}
	var nk errNoKeys
	if errors.As(err, &nk) {
		out = []FieldError{{Field: nk.field, Error: nk.Error()}}
	}
	var msgs []string
	for _, f := range out {
		msgs = append(msgs, f.Error)
	}
	jsonhttp.WriteJSON(w, http.StatusBadRequest, invalidAnswer{
		Error:  jsonhttp.Error{Error: strings.Join(msgs, "; "), Reason: "invalid", Field: out[0].Field},
		Errors: out,
	})
}

// fieldErrorOf reads one error line, "field: message"; a line about the
// object at index of plural in the merged config loses its "sources[N].".
func fieldErrorOf(line, plural string, index int) FieldError {
	if m := recordField.FindStringSubmatch(line); m != nil && m[1] == plural {
		if i, _ := strconv.Atoi(m[2]); i == index {
			rest := line[len(m[0]):]
			if strings.HasSuffix(m[0], ": ") {
				return FieldError{Error: rest} // the object's own, not a field's
			}
			line = rest
		}
	}
	field, _, ok := strings.Cut(line, ": ")
	if !ok || strings.ContainsAny(field, " ") {
		field = ""
	}
	return FieldError{Field: field, Error: line}
}

// callerTenant is the tenant of the request's token ("" for none: the
// operator's, which reaches every object).
func callerTenant(r *http.Request) string {
	c, _ := apiauth.CallerOf(r.Context())
	return c.Tenant
}

// hidden reports whether the object of kind and name (the API's or the
// file's) is out of reach of the request's caller: a tenant's token
// reaches its own tenant's only, and is answered of any other as of one
// there is none of. Called under the lock, which keeps the running
// config's index of owners (admin.Service.TenantOf) the one of g.file
// and g.objects: apply swaps them together.
func (g *Gateway) hidden(r *http.Request, kind, name string) bool {
	t := callerTenant(r)
	if t == "" {
		return false
	}
	owner, ok := g.admin.TenantOf(kind, name)
	return ok && owner != t
}

// nameHoldsData reports whether the store still holds what a source
// (kind) of this name received (an event within its window) or what a
// destination of this name has to deliver (a delivery pending or dead).
func (g *Gateway) nameHoldsData(ctx context.Context, kind, name string) (bool, error) {
	if kind == store.ObjectSource {
		events, err := g.store.ListEvents(ctx, store.EventQuery{Source: name, Limit: 1})
		return len(events) > 0, err
	}
	queues, err := g.store.Queues(ctx, time.Now())
	return slices.ContainsFunc(queues, func(q store.Queue) bool {
		return q.Destination == name && q.Pending+q.Leased+q.Dead > 0
	}), err
}

// tenantMayMake refuses what a tenant's token may not make: a source
// routing to another tenant's destination (routesOthers), a queue
// destination (publish:), and a destination whose settings spend more of
// the gateway than the bounds every tenant shares (tenantBounds). A queue
// destination dials a broker from the gateway's network with a client of
// its broker's own, which the egress guard (internal/egress) does not
// hold to public addresses: a tenant would reach the operator's brokers.
// The operator may still make either for a tenant (the file, or the
// operator's token with "tenant"). old is the object a PATCH changes (nil
// for a create): what it already held is not refused again.
func (g *Gateway) tenantMayMake(r *http.Request, o object, old *object) error {
	if err := g.routesOthers(r, o); err != nil {
		return err
	}
	t := callerTenant(r)
	if t == "" || o.stored.Kind != store.ObjectDestination {
		return nil
	}
	if o.destination.Publish != nil {
		return errors.New("publish: a tenant's token makes url: and pull: destinations only: a queue destination's broker is reached from the gateway's network (ask the operator for one)")
	}
	var was *config.Destination
	if old != nil {
		was = &old.destination
	}
	return overTenantBounds(g.cfg.Load(), t, &o.destination, was)
}

// routesOthers refuses a tenant's source that routes to another tenant's
// destination as one routing to none: the config's check would say
// whose it is, and a tenant's token learns nothing of another's.
func (g *Gateway) routesOthers(r *http.Request, o object) error {
	t := callerTenant(r)
	if t == "" || o.stored.Kind != store.ObjectSource {
		return nil
	}
	for j, d := range o.source.Destinations {
		if owner := g.tenantOf(store.ObjectDestination, d.Name); owner != "" && owner != t {
			return fmt.Errorf("destinations[%d]: no destination named %q", j, d.Name)
		}
	}
	return nil
}

// conflict answers 409.
func conflict(w http.ResponseWriter, reason, msg string) {
	jsonhttp.WriteError(w, http.StatusConflict, reason, msg)
}

// fileOwns answers 409 for an object the config file names.
func (g *Gateway) fileOwns(w http.ResponseWriter, kind, name string) {
	file := g.opts.ConfigFile
	if file == "" {
		file = "the gateway's config"
	}
	conflict(w, "managed_by_file", fmt.Sprintf("%s %s is defined in the config file %s: change it there, and reload", kind, name, file))
}

// storeFailed answers a store's failure to keep a change: 409 for a
// name taken or a version moved on (another replica came first), else
// 503.
//
// The first three mean that another replica changed the object first,
// and this one's copy is behind: it reads the objects anew (refresh), so
// that the caller's next read and retry here see what is stored.
func (g *Gateway) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	const behind = ": another replica changed it first; this one has read what is stored now"
	switch {
	case errors.Is(err, store.ErrObjectExists):
		g.refresh(r.Context())
		conflict(w, "exists", err.Error()+behind)
	case errors.Is(err, store.ErrVersionConflict):
		g.refresh(r.Context())
		conflict(w, "version_conflict", err.Error()+behind+": read it again (GET) and retry")
	case errors.Is(err, store.ErrNotFound):
		g.refresh(r.Context())
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", err.Error()+behind)
	default:
		g.log.Warn("objects API: the store did not keep the change; nothing was applied", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		jsonhttp.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the store is unavailable: nothing changed")
	}
}

// refresh reads the API's objects from the store anew and applies them,
// as a reload does (with the running file's config): this replica's copy
// was behind another's change. What fails is logged; the running config
// stays.
func (g *Gateway) refresh(ctx context.Context) {
	g.reloading.Lock()
	objects, err := loadObjects(ctx, g.store, g.box, g.objects...)
	var finish func(bool)
	if err == nil {
		_, finish, err = g.prepareLocked(ctx, g.file, objects, "the API's sources and destinations read anew: another replica had changed them")
	}
	if err != nil {
		g.reloading.Unlock()
		g.log.Warn("the API's sources and destinations could not be read anew; the running config stays", "err", err)
		return
	}
	finish(true)
	g.changed()
}

// auditOf is the audit entry of a change to an object: source_create,
// destination_update, ...
func auditOf(r *http.Request, kind, change, name string) store.AuditEntry {
	return store.AuditEntry{At: time.Now(), Actor: admin.ActorOf(r.Context()), Action: kind + "_" + change, Target: kind + " " + name}
}

func answerObject(w http.ResponseWriter, status int, v ObjectView) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(v.Version, 10)))
	jsonhttp.WriteJSON(w, status, v)
}

// createObject is POST /v1/sources (/v1/destinations).
func (g *Gateway) createObject(w http.ResponseWriter, r *http.Request, k objectKind) {
	spec, ok := readBody(w, r, k.fields)
	if !ok {
		return
	}
	if t := callerTenant(r); t != "" {
		// A tenant's token makes its own tenant's objects: said, or not.
		if given, ok := spec["tenant"]; ok && given != t {
			answerInvalid(w, fmt.Errorf("tenant: %v: this token is tenant %s's, and creates its objects only (leave tenant out)", given, t), k.plural, -1)
			return
		}
		spec["tenant"] = t
	}
	o, err := readObject(k.kind, spec)
	if err == nil {
		err = g.tenantMayMake(r, o, nil)
	}
	if err != nil {
		answerInvalid(w, err, k.plural, -1)
		return
	}
	name := o.name()
	if !config.IsName(name) {
		answerInvalid(w, fmt.Errorf("name: %q: want letters, digits, '.', '_' or '-'", name), k.plural, -1)
		return
	}
	g.reloading.Lock()
	switch {
	case g.hidden(r, k.kind, name):
		// Another's: taken, and no more said (not whose, nor where).
		g.reloading.Unlock()
		conflict(w, "exists", k.kind+" "+name+" already exists: choose another name")
		return
	case g.fileHas(k.kind, name):
		g.reloading.Unlock()
		g.fileOwns(w, k.kind, name)
		return
	case g.objectAt(k.kind, name) >= 0:
		g.reloading.Unlock()
		conflict(w, "exists", k.kind+" "+name+" already exists: change it with PATCH /v1/"+k.plural+"/"+name)
		return
	}
	tomb := g.tombAt(k.kind, name)
	if tomb >= 0 && !takesTomb(o.tenant(), g.objects[tomb]) {
		// Deleted, and another tenant's (or the operator's): its history
		// is kept by name, so the name stays theirs.
		g.reloading.Unlock()
		conflict(w, "exists", k.kind+" "+name+" already exists: choose another name")
		return
	}
	if o.tenant() != "" && tomb < 0 {
		// A name whose events or held deliveries are still stored is
		// taken for a tenant: they are read, replayed and delivered by
		// name, so the tenant would be handed what the name's earlier
		// owner (another tenant, the operator) left there.
		held, err := g.nameHoldsData(r.Context(), k.kind, name)
		if err != nil {
			g.reloading.Unlock()
			g.storeFailed(w, r, err)
			return
		}
		if held {
			g.reloading.Unlock()
			conflict(w, "exists", k.kind+" "+name+" already exists: choose another name")
			return
		}
	}
	sealed, err := seal(g.box, k.kind, name, spec)
	if err != nil {
		g.reloading.Unlock()
		answerInvalid(w, err, k.plural, -1)
		return
	}
	objects, last := withCreated(g.objects, o, tomb)
	_, finish, err := g.prepareLocked(r.Context(), g.file, objects, k.kind+" "+name+" created through the API")
	if err != nil {
		index := g.mergedIndex(objects, last)
		g.reloading.Unlock()
		answerInvalid(w, err, k.plural, index)
		return
	}
	stored, err := g.storeCreate(r.Context(), store.Object{Kind: k.kind, Name: name, Tenant: o.tenant(), Spec: sealed}, tomb, auditOf(r, k.kind, "create", name))
	if err != nil {
		finish(false)
		g.storeFailed(w, r, err)
		return
	}
	objects[last].stored = stored
	finish(true)
	g.changed()
	answerObject(w, http.StatusCreated, g.view(objects[last]))
}

// withCreated is objects with o created: in place of the tombstone at
// tomb (>= 0), else added; and where o is.
func withCreated(objects []object, o object, tomb int) ([]object, int) {
	objects = slices.Clone(objects)
	if tomb >= 0 {
		objects[tomb] = o
		return objects, tomb
	}
	return append(objects, o), len(objects)
}

// storeCreate stores o, created, with audit: over the tombstone at tomb
// in g.objects (>= 0) as its next version, so that versions go on
// across a delete and a create again, else as a new row. Another
// replica's create over the same tombstone first is ErrObjectExists,
// as a create of a name taken.
func (g *Gateway) storeCreate(ctx context.Context, o store.Object, tomb int, audit store.AuditEntry) (store.Object, error) {
	if tomb < 0 {
		return g.store.CreateObject(ctx, o, audit)
	}
	stored, err := g.store.UpdateObject(ctx, o, g.objects[tomb].stored.Version, audit)
	switch {
	case errors.Is(err, store.ErrVersionConflict):
		return stored, fmt.Errorf("%w", store.ErrObjectExists)
	case errors.Is(err, store.ErrNotFound):
		return g.store.CreateObject(ctx, o, audit) // its row was purged meanwhile
	}
	return stored, err
}

// storeDelete stores old's tombstone in place of old, with audit (its
// delete), if old's version is still the stored one, and returns it as
// stored.
func (g *Gateway) storeDelete(ctx context.Context, old object, audit store.AuditEntry) (object, error) {
	tomb := tombstoneOf(old)
	stored, err := g.store.UpdateObject(ctx, tomb.stored, old.stored.Version, audit)
	tomb.stored = stored
	return tomb, err
}

// getObject is GET /v1/sources/{name} (/v1/destinations/{name}).
func (g *Gateway) getObject(w http.ResponseWriter, r *http.Request, k objectKind) {
	name := r.PathValue("name")
	g.reloading.Lock()
	defer g.reloading.Unlock()
	if g.hidden(r, k.kind, name) {
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no "+k.kind+" "+name)
		return
	}
	if i := g.objectAt(k.kind, name); i >= 0 {
		answerObject(w, http.StatusOK, g.view(g.objects[i]))
		return
	}
	if g.fileHas(k.kind, name) {
		v := ObjectView{Name: name, ManagedBy: "file", Config: g.opts.ConfigFile}
		if i := slices.IndexFunc(g.file.Sources, func(s config.Source) bool { return s.Name == name }); i >= 0 && k.kind == store.ObjectSource {
			v.IntakeURL = g.intakeURL(g.file.Sources[i])
		}
		jsonhttp.WriteJSON(w, http.StatusOK, v)
		return
	}
	jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no "+k.kind+" "+name)
}

// ifMatch is the version a request's If-Match asks for (0: none given).
func ifMatch(r *http.Request) (int64, bool) {
	h := strings.TrimSpace(r.Header.Get("If-Match"))
	if h == "" || h == "*" {
		return 0, true
	}
	v, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(h, "W/"), `"`), 10, 64)
	return v, err == nil && v > 0
}

// found finds the API's object of the request's {name} under the lock,
// or answers (404, 409 for the file's, 412 for an If-Match that is not
// its version) and unlocks.
func (g *Gateway) found(w http.ResponseWriter, r *http.Request, k objectKind) (int, bool) {
	name := r.PathValue("name")
	want, ok := ifMatch(r)
	if !ok {
		jsonhttp.WriteFieldError(w, "If-Match", `want the version an answer's ETag gave, e.g. "3"`)
		return 0, false
	}
	g.reloading.Lock()
	i := g.objectAt(k.kind, name)
	switch {
	case g.hidden(r, k.kind, name):
		g.reloading.Unlock()
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no "+k.kind+" "+name)
	case i < 0 && g.fileHas(k.kind, name):
		g.reloading.Unlock()
		g.fileOwns(w, k.kind, name)
	case i < 0:
		g.reloading.Unlock()
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no "+k.kind+" "+name)
	case want != 0 && want != g.objects[i].stored.Version:
		v := g.objects[i].stored.Version
		g.reloading.Unlock()
		jsonhttp.WriteError(w, http.StatusPreconditionFailed, "version_conflict",
			fmt.Sprintf("%s %s is at version %d, not %d: read it again (GET) and retry", k.kind, name, v, want))
	default:
		return i, true
	}
	return 0, false
}

// patchObject is PATCH /v1/sources/{name} (/v1/destinations/{name}): a
// JSON merge patch (RFC 7396) of the object as given: a field given
// replaces it, a field given null goes back to its default, a field left
// out stays (a secret too).
func (g *Gateway) patchObject(w http.ResponseWriter, r *http.Request, k objectKind) {
	patch, ok := readBody(w, r, k.fields)
	if !ok {
		return
	}
	i, ok := g.found(w, r, k)
	if !ok {
		return
	}
	old := g.objects[i]
	name := old.name()
	spec := mergePatch(old.spec, patch)
	changed := changedFields(old.spec, spec, "")
	if len(changed) == 0 {
		// Nothing to change (a second apply of one file): nothing stored,
		// no audit entry, no replica told; the version stays.
		v := g.view(old)
		g.reloading.Unlock()
		answerObject(w, http.StatusOK, v)
		return
	}
	if n, _ := spec["name"].(string); n != name {
		g.reloading.Unlock()
		answerInvalid(w, fmt.Errorf("name: a %s's name does not change (a source's is part of its intake URL and of its events' keys, a destination's of its deliveries): create another, and delete this one", k.kind), k.plural, -1)
		return
	}
	o, err := readObject(k.kind, spec)
	if err != nil {
		g.reloading.Unlock()
		answerInvalid(w, err, k.plural, -1)
		return
	}
	if err := g.tenantMayMake(r, o, &old); err != nil {
		g.reloading.Unlock()
		answerInvalid(w, err, k.plural, -1)
		return
	}
	if o.tenant() != old.tenant() {
		g.reloading.Unlock()
		answerInvalid(w, fmt.Errorf("tenant: a %s's tenant does not change (its events, deliveries and audit are the tenant's): create another, and delete this one", k.kind), k.plural, -1)
		return
	}
	sealed, err := seal(g.box, k.kind, name, spec)
	if err != nil {
		g.reloading.Unlock()
		answerInvalid(w, err, k.plural, -1)
		return
	}
	objects := slices.Clone(g.objects)
	objects[i] = o
	_, finish, err := g.prepareLocked(r.Context(), g.file, objects, k.kind+" "+name+" changed through the API")
	if err != nil {
		index := g.mergedIndex(objects, i)
		g.reloading.Unlock()
		answerInvalid(w, err, k.plural, index)
		return
	}
	stored, err := g.store.UpdateObject(r.Context(), store.Object{Kind: k.kind, Name: name, Tenant: old.stored.Tenant, Spec: sealed},
		old.stored.Version, auditOf(r, k.kind, "update", name))
	if err != nil {
		finish(false)
		g.storeFailed(w, r, err)
		return
	}
	objects[i].stored = stored
	finish(true)
	g.changed()
	v := g.view(objects[i])
	v.Changed = changed
	answerObject(w, http.StatusOK, v)
}

// deleteObject is DELETE /v1/sources/{name} (/v1/destinations/{name}).
// A source's intake answers 404 from then on; its events, deliveries and
// dead letters stay, as a source removed from the file leaves them. A
// destination's pending deliveries are held, marked removed, as one
// removed from the file; a destination a source routes to is refused
// (409, naming the route).
func (g *Gateway) deleteObject(w http.ResponseWriter, r *http.Request, k objectKind) {
	i, ok := g.found(w, r, k)
	if !ok {
		return
	}
	old := g.objects[i]
	if k.kind == store.ObjectDestination {
		// Said by name: the check below would say the route names a
		// destination there is none of, by its index in the merged config.
		var routed []string
		for _, s := range g.cfg.Load().Sources {
			if slices.Contains(s.DestinationNames(), old.name()) {
				routed = append(routed, s.Name)
			}
		}
		if len(routed) > 0 {
			g.reloading.Unlock()
			jsonhttp.WriteError(w, http.StatusConflict, "in_use", fmt.Sprintf("destination %s is routed to by source %s: take it out of their destinations first",
				old.name(), strings.Join(routed, ", ")))
			return
		}
	}
	objects := slices.Clone(g.objects)
	objects[i] = tombstoneOf(old)
	_, finish, err := g.prepareLocked(r.Context(), g.file, objects, k.kind+" "+old.name()+" deleted through the API")
	if err != nil {
		// What else names it (a route, a token's publish:) refuses its
		// removal.
		g.reloading.Unlock()
		jsonhttp.WriteError(w, http.StatusConflict, "in_use", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "config: "), "\n", "; "))
		return
	}
	if objects[i], err = g.storeDelete(r.Context(), old, auditOf(r, k.kind, "delete", old.name())); err != nil {
		finish(false)
		g.storeFailed(w, r, err)
		return
	}
	finish(true)
	g.changed()
	w.WriteHeader(http.StatusNoContent)
}

// changedFields are the fields that differ between a and b, an object's
// spec before and after a change, by their dotted path under prefix
// ("url", "retry.max_attempts", "secrets": a secret's field is named,
// never its value), sorted.
func changedFields(a, b map[string]any, prefix string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(union(a, b))) {
		av, bv := a[k], b[k]
		am, aok := av.(map[string]any)
		bm, bok := bv.(map[string]any)
		switch {
		case aok && bok:
			out = append(out, changedFields(am, bm, prefix+k+".")...)
		case !reflect.DeepEqual(av, bv):
			out = append(out, prefix+k)
		}
	}
	return out
}

func union(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, b)
	return out
}

// mergePatch is target with patch applied as RFC 7396 says (new maps;
// target is not changed).
func mergePatch(target, patch map[string]any) map[string]any {
	out := make(map[string]any, len(target))
	for k, v := range target {
		out[k] = v
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			t, _ := out[k].(map[string]any)
			out[k] = mergePatch(t, pv)
		default:
			out[k] = v
		}
	}
	return out
}

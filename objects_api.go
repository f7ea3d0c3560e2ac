package oncehook

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/store"
)

// The API's sources (#45): POST /v1/sources creates one, GET, PATCH and
// DELETE /v1/sources/{name} read, change and remove one. The body is the
// source as the config file writes it, in JSON; it is checked by the
// file's check and applied through a reload's swap (prepareLocked), and
// stored (store.Objects) between the check and the swap, with its audit
// entry: a change that cannot be applied is refused before it is stored,
// and one that could not be stored is not applied. A source the file
// names is the file's: changing it here is 409.

// SourceRoutes are the routes of the API's sources, on the API listener
// behind api.tokens (a read-only token may only read them): what
// docs/openapi.yaml is checked against.
func SourceRoutes() []string {
	return []string{"POST /v1/sources", "GET /v1/sources/{name}", "PATCH /v1/sources/{name}", "DELETE /v1/sources/{name}"}
}

// maxObjectBody bounds a source's JSON.
const maxObjectBody = 64 << 10

// The audit log's words for the API's sources.
const (
	auditSourceCreate = "source_create"
	auditSourceUpdate = "source_update"
	auditSourceDelete = "source_delete"
)

// mountSources mounts the routes on mux (the admin API's, behind auth).
func (g *Gateway) mountSources(mux *http.ServeMux) {
	r := SourceRoutes()
	mux.HandleFunc(r[0], g.createSource)
	mux.HandleFunc(r[1], g.getSource)
	mux.HandleFunc(r[2], g.patchSource)
	mux.HandleFunc(r[3], g.deleteSource)
}

// SourceView is a source as the API answers it.
type SourceView struct {
	Name string `json:"name"`
	// ManagedBy is "api" (created through the API: it may change it) or
	// "file" (the config file's: change it there).
	ManagedBy string `json:"managed_by"`
	// Config is the file a file's source is in.
	Config string `json:"config,omitempty"`
	// IntakeURL is where the provider sends the source's webhooks (its
	// public_url when set); empty for a source whose events come from a
	// queue or the outbox.
	IntakeURL string `json:"intake_url,omitempty"`
	// Spec is the source as given, each secret shown as its fingerprint.
	Spec      map[string]any `json:"spec,omitempty"`
	Version   int64          `json:"version,omitempty"`
	CreatedAt *time.Time     `json:"created_at,omitempty"`
	UpdatedAt *time.Time     `json:"updated_at,omitempty"`
	CreatedBy string         `json:"created_by,omitempty"`
	UpdatedBy string         `json:"updated_by,omitempty"`
}

// FieldError is one field at fault in a source refused as invalid.
type FieldError struct {
	Field string `json:"field"`
	Error string `json:"error"`
}

// invalidAnswer is a 400: the first field at fault, and every one.
type invalidAnswer struct {
	jsonhttp.Error
	Errors []FieldError `json:"errors"`
}

func (g *Gateway) view(o object) SourceView {
	st := o.stored
	created, updated := st.CreatedAt.UTC(), st.UpdatedAt.UTC()
	return SourceView{Name: o.source.Name, ManagedBy: "api", IntakeURL: g.intakeURL(o.source), Spec: shown(o.spec),
		Version: st.Version, CreatedAt: &created, UpdatedAt: &updated, CreatedBy: st.CreatedBy, UpdatedBy: st.UpdatedBy}
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

// readBody reads a request's JSON object, bounded.
func readBody(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
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
	spec, err := decodeSpec(body)
	if err != nil {
		jsonhttp.WriteError(w, http.StatusBadRequest, "invalid", err.Error())
		return nil, false
	}
	return spec, true
}

var recordField = regexp.MustCompile(`^sources\[(\d+)\](?:\.|: )`)

// answerInvalid answers errs (a refused source's, or the merged config's:
// index is the source's place in it, -1 for none) as a 400 whose fields
// are the source's own ("preset", "secrets[0]"), as in the file but
// without the file's "sources[N].".
func answerInvalid(w http.ResponseWriter, err error, index int) {
	var out []FieldError
	for _, e := range unjoin(err) {
		msg := strings.TrimPrefix(e.Error(), "config: ")
		for _, line := range unjoin(errors.New(msg)) {
			out = append(out, fieldErrorOf(line.Error(), index))
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
// source at index in the merged config loses its "sources[N].".
func fieldErrorOf(line string, index int) FieldError {
	if m := recordField.FindStringSubmatch(line); m != nil {
		if i, _ := strconv.Atoi(m[1]); i == index {
			rest := line[len(m[0]):]
			if strings.HasSuffix(m[0], ": ") {
				return FieldError{Error: rest} // the source's own, not a field's
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

// conflict answers 409.
func conflict(w http.ResponseWriter, reason, msg string) {
	jsonhttp.WriteError(w, http.StatusConflict, reason, msg)
}

// fileOwns answers 409 for a source the config file names.
func (g *Gateway) fileOwns(w http.ResponseWriter, name string) {
	file := g.opts.ConfigFile
	if file == "" {
		file = "the gateway's config"
	}
	conflict(w, "managed_by_file", fmt.Sprintf("source %s is defined in the config file %s: change it there, and reload", name, file))
}

// stored answers a store's failure to keep a change: 409 for a name
// taken or a version moved on (another replica came first), else 503.
func (g *Gateway) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrObjectExists):
		conflict(w, "exists", err.Error())
	case errors.Is(err, store.ErrVersionConflict):
		conflict(w, "version_conflict", err.Error()+": read it again (GET) and retry")
	case errors.Is(err, store.ErrNotFound):
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", err.Error())
	default:
		g.log.Warn("sources API: the store did not keep the change; nothing was applied", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		jsonhttp.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the store is unavailable: nothing changed")
	}
}

func auditOf(r *http.Request, action, name string) store.AuditEntry {
	return store.AuditEntry{At: time.Now(), Actor: admin.ActorOf(r.Context()), Action: action, Target: "source " + name}
}

func answerObject(w http.ResponseWriter, status int, v SourceView) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(v.Version, 10)))
	jsonhttp.WriteJSON(w, status, v)
}

// createSource is POST /v1/sources.
func (g *Gateway) createSource(w http.ResponseWriter, r *http.Request) {
	spec, ok := readBody(w, r)
	if !ok {
		return
	}
	src, err := readSource(spec)
	if err != nil {
		answerInvalid(w, err, -1)
		return
	}
	if !config.IsName(src.Name) {
		answerInvalid(w, fmt.Errorf("name: %q: want letters, digits, '.', '_' or '-'", src.Name), -1)
		return
	}
	g.reloading.Lock()
	switch {
	case g.fileSource(src.Name):
		g.reloading.Unlock()
		g.fileOwns(w, src.Name)
		return
	case g.objectAt(src.Name) >= 0:
		g.reloading.Unlock()
		conflict(w, "exists", "source "+src.Name+" already exists: change it with PATCH /v1/sources/"+src.Name)
		return
	}
	sealed, err := seal(g.box, store.ObjectSource, src.Name, spec)
	if err != nil {
		g.reloading.Unlock()
		answerInvalid(w, err, -1)
		return
	}
	objects := append(slices.Clone(g.objects), object{spec: spec, source: src})
	_, finish, err := g.prepareLocked(r.Context(), g.file, objects, "source "+src.Name+" created through the API")
	if err != nil {
		index := len(g.file.Sources) + len(objects) - 1
		g.reloading.Unlock()
		answerInvalid(w, err, index)
		return
	}
	o, err := g.store.CreateObject(r.Context(), store.Object{Kind: store.ObjectSource, Name: src.Name, Spec: sealed}, auditOf(r, auditSourceCreate, src.Name))
	if err != nil {
		finish(false)
		g.storeFailed(w, r, err)
		return
	}
	objects[len(objects)-1].stored = o
	finish(true)
	g.changed()
	answerObject(w, http.StatusCreated, g.view(objects[len(objects)-1]))
}

// getSource is GET /v1/sources/{name}.
func (g *Gateway) getSource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.reloading.Lock()
	defer g.reloading.Unlock()
	if i := g.objectAt(name); i >= 0 {
		answerObject(w, http.StatusOK, g.view(g.objects[i]))
		return
	}
	if i := slices.IndexFunc(g.file.Sources, func(s config.Source) bool { return s.Name == name }); i >= 0 {
		jsonhttp.WriteJSON(w, http.StatusOK, SourceView{Name: name, ManagedBy: "file", Config: g.opts.ConfigFile, IntakeURL: g.intakeURL(g.file.Sources[i])})
		return
	}
	jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no source "+name)
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

// found finds the API's source of the request's {name} under the lock,
// or answers (404, 409 for the file's, 412 for an If-Match that is not
// its version) and unlocks.
func (g *Gateway) found(w http.ResponseWriter, r *http.Request) (int, bool) {
	name := r.PathValue("name")
	want, ok := ifMatch(r)
	if !ok {
		jsonhttp.WriteFieldError(w, "If-Match", `want the version an answer's ETag gave, e.g. "3"`)
		return 0, false
	}
	g.reloading.Lock()
	i := g.objectAt(name)
	switch {
	case i < 0 && g.fileSource(name):
		g.reloading.Unlock()
		g.fileOwns(w, name)
	case i < 0:
		g.reloading.Unlock()
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no source "+name)
	case want != 0 && want != g.objects[i].stored.Version:
		v := g.objects[i].stored.Version
		g.reloading.Unlock()
		jsonhttp.WriteError(w, http.StatusPreconditionFailed, "version_conflict",
			fmt.Sprintf("source %s is at version %d, not %d: read it again (GET) and retry", name, v, want))
	default:
		return i, true
	}
	return 0, false
}

// patchSource is PATCH /v1/sources/{name}: a JSON merge patch (RFC 7396)
// of the source as given: a field given replaces it, a field given null
// goes back to its default, a field left out stays (a secret too).
func (g *Gateway) patchSource(w http.ResponseWriter, r *http.Request) {
	patch, ok := readBody(w, r)
	if !ok {
		return
	}
	i, ok := g.found(w, r)
	if !ok {
		return
	}
	old := g.objects[i]
	spec := mergePatch(old.spec, patch)
	if n, _ := spec["name"].(string); n != old.source.Name {
		g.reloading.Unlock()
		answerInvalid(w, errors.New("name: a source's name is part of its intake URL and of its events' keys: it does not change (create another, and delete this one)"), -1)
		return
	}
	src, err := readSource(spec)
	if err != nil {
		g.reloading.Unlock()
		answerInvalid(w, err, -1)
		return
	}
	sealed, err := seal(g.box, store.ObjectSource, src.Name, spec)
	if err != nil {
		g.reloading.Unlock()
		answerInvalid(w, err, -1)
		return
	}
	objects := slices.Clone(g.objects)
	objects[i] = object{spec: spec, source: src}
	_, finish, err := g.prepareLocked(r.Context(), g.file, objects, "source "+src.Name+" changed through the API")
	if err != nil {
		index := len(g.file.Sources) + i
		g.reloading.Unlock()
		answerInvalid(w, err, index)
		return
	}
	o, err := g.store.UpdateObject(r.Context(), store.Object{Kind: store.ObjectSource, Name: src.Name, Tenant: old.stored.Tenant, Spec: sealed},
		old.stored.Version, auditOf(r, auditSourceUpdate, src.Name))
	if err != nil {
		finish(false)
		g.storeFailed(w, r, err)
		return
	}
	objects[i].stored = o
	finish(true)
	g.changed()
	answerObject(w, http.StatusOK, g.view(objects[i]))
}

// deleteSource is DELETE /v1/sources/{name}: intake answers it 404 from
// then on; its events, deliveries and dead letters stay, as a source
// removed from the file leaves them.
func (g *Gateway) deleteSource(w http.ResponseWriter, r *http.Request) {
	i, ok := g.found(w, r)
	if !ok {
		return
	}
	old := g.objects[i]
	objects := slices.Delete(slices.Clone(g.objects), i, i+1)
	_, finish, err := g.prepareLocked(r.Context(), g.file, objects, "source "+old.source.Name+" deleted through the API")
	if err != nil {
		// What else names it (a token's publish:) refuses its removal.
		g.reloading.Unlock()
		jsonhttp.WriteError(w, http.StatusConflict, "in_use", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "config: "), "\n", "; "))
		return
	}
	if err := g.store.DeleteObject(r.Context(), store.ObjectSource, old.source.Name, old.stored.Version, auditOf(r, auditSourceDelete, old.source.Name)); err != nil {
		finish(false)
		g.storeFailed(w, r, err)
		return
	}
	finish(true)
	g.changed()
	w.WriteHeader(http.StatusNoContent)
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

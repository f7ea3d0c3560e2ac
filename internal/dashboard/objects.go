package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/setup"
)

// The forms that create, change and delete the API's sources and
// destinations (#45). They check nothing themselves: each builds the JSON
// the API takes and hands it to the API's own handler (Options.Objects)
// as the session's caller, so that the file's check, the sealing of
// secrets, the store, the audit entry (under the session's token) and a
// tenant's limits are the API's, and its refusals are shown as it words
// them, beside the field they name.

// objectKind is what the forms of one kind differ in.
type objectKind struct {
	kind, plural string
}

var (
	sourceKind      = objectKind{"source", "sources"}
	destinationKind = objectKind{"destination", "destinations"}
)

// objectAnswer is the API's answer to one request of the forms.
type objectAnswer struct {
	status int
	view   api.ObjectView
	err    jsonhttpError
}

// jsonhttpError is the API's error body (jsonhttp.Error, with a refused
// object's fields).
type jsonhttpError struct {
	Error  string           `json:"error"`
	Reason string           `json:"reason"`
	Field  string           `json:"field"`
	Errors []api.FieldError `json:"errors"`
}

func (a objectAnswer) ok() bool { return a.status >= 200 && a.status < 300 }

// recorder keeps the answer of the API's handler, run in process.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}

// callObjects runs one request of the objects API (method, path under
// /v1/, If-Match version when not 0, a JSON body) as ctx's caller.
func (d *Dashboard) callObjects(ctx context.Context, method, path string, version int64, body any) (objectAnswer, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return objectAnswer{}, fmt.Errorf("dashboard: encode the object: %w", err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return objectAnswer{}, fmt.Errorf("dashboard: objects request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if version > 0 {
		req.Header.Set("If-Match", strconv.Quote(strconv.FormatInt(version, 10)))
	}
	rec := &recorder{h: http.Header{}}
	d.opts.Objects.ServeHTTP(rec, req)
	a := objectAnswer{status: rec.status}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if rec.body.Len() == 0 {
		return a, nil
	}
	if a.ok() {
		err = json.Unmarshal(rec.body.Bytes(), &a.view)
	} else {
		err = json.Unmarshal(rec.body.Bytes(), &a.err)
	}
	if err != nil {
		return a, fmt.Errorf("dashboard: read the objects API's answer (%d): %w", a.status, err)
	}
	return a, nil
}

func objectPath(k objectKind, name string) string {
	if name == "" {
		return "/v1/" + k.plural
	}
	return "/v1/" + k.plural + "/" + url.PathEscape(name)
}

// objectForm is what the form pages show: the fields as given (or as
// stored, on an edit), and the API's refusal.
type objectForm struct {
	Kind    string // source, destination
	Edit    bool
	Name    string
	Version int64
	// A source's.
	Preset       string
	Presets      []string
	Destinations []choice
	Secrets      int // how many secrets it has (an edit: fingerprints, never values)
	VerifyToken  bool
	// A destination's.
	URL        string
	HasSecret  bool
	HeaderKeys []string
	Headers    string
	Timeout    string
	Advanced   string
	// The refusal: by the form's field, and what names none of them.
	Errors  map[string][]string
	General []string
	// Stale: the object changed since the form was filled (412).
	Stale bool
}

type choice struct {
	Name    string
	Checked bool
}

// clean makes what the form shows again valid UTF-8: a value posted as
// any bytes (html/template escapes markup, not broken sequences), and a
// message that quotes it, cut mid-character (the YAML parser's).
func (f *objectForm) clean() {
	for _, p := range []*string{&f.Name, &f.Preset, &f.URL, &f.Headers, &f.Timeout, &f.Advanced} {
		*p = strings.ToValidUTF8(*p, "\uFFFD")
	}
	for i := range f.General {
		f.General[i] = strings.ToValidUTF8(f.General[i], "\uFFFD")
	}
	for k, msgs := range f.Errors {
		for i := range msgs {
			msgs[i] = strings.ToValidUTF8(msgs[i], "\uFFFD")
		}
		f.Errors[k] = msgs
	}
	for i := range f.Destinations {
		f.Destinations[i].Name = strings.ToValidUTF8(f.Destinations[i].Name, "\uFFFD")
	}
}

// formFields are the fields the forms have inputs of; the advanced box
// takes the rest.
var formFields = map[string][]string{
	"source":      {"name", "preset", "secrets", "destinations", "tenant", "verify_token"},
	"destination": {"name", "url", "secret", "headers", "timeout", "tenant", "transform.env"},
}

// inputs are the fields the forms show an error beside.
var inputs = map[string][]string{
	"source":      {"name", "preset", "secrets", "destinations"},
	"destination": {"name", "url", "secret", "headers", "timeout"},
}

// errorsOf sorts the API's refusal by the form's fields: "secrets[0]"
// beside the secrets, "retry.max_attempts" (no input of its own) under
// the advanced box.
func (f *objectForm) errorsOf(e jsonhttpError) {
	f.Errors = map[string][]string{}
	f.Stale = e.Reason == "version_conflict"
	list := e.Errors
	if len(list) == 0 {
		list = []api.FieldError{{Field: e.Field, Error: e.Error}}
	}
	for _, fe := range list {
		field := fe.Field
		if i := strings.IndexAny(field, "[."); i >= 0 {
			field = field[:i]
		}
		if field != "" && slices.Contains(inputs[f.Kind], field) {
			f.Errors[field] = append(f.Errors[field], fe.Error)
			continue
		}
		f.General = append(f.General, fe.Error)
	}
}

// parseAdvanced reads the advanced box: a JSON or YAML mapping of fields
// ("" is none).
func parseAdvanced(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return map[string]any{}, nil
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("advanced: want a JSON or YAML mapping of the config file's fields: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if m == nil {
		return nil, errors.New("advanced: want a JSON or YAML mapping of the config file's fields")
	}
	return m, nil
}

// formValues are the posted values of a repeated field, trimmed, empty
// ones left out.
func formValues(r *http.Request, name string) []string {
	var out []string
	for _, v := range r.PostForm[name] {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseHeaders reads "Name: value" lines.
func parseHeaders(s string) (map[string]any, error) {
	out := map[string]any{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("headers: %q: want one \"Name: value\" a line", line)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// kindOf is the kind a route serves.
func kindOf(r *http.Request) objectKind {
	if strings.HasPrefix(r.URL.Path, Prefix+"/destinations") {
		return destinationKind
	}
	return sourceKind
}

// listPage is where a kind's objects are listed.
func listPage(k objectKind) string {
	if k.kind == "source" {
		return Prefix + "/"
	}
	return Prefix + "/destinations"
}

// choices are the destinations the session sees, those in picked
// checked.
func (d *Dashboard) choices(r *http.Request, picked []string) ([]choice, error) {
	dests, err := d.svc(r).Destinations(r.Context())
	if err != nil {
		return nil, err
	}
	var out []choice
	for _, x := range dests {
		if x.Removed {
			continue
		}
		out = append(out, choice{Name: x.Name, Checked: slices.Contains(picked, x.Name)})
	}
	return out, nil
}

func (d *Dashboard) renderForm(w http.ResponseWriter, r *http.Request, s session, status int, f *objectForm) {
	f.clean()
	if f.Kind == "source" {
		f.Presets = d.opts.Presets
		var picked []string
		for _, c := range f.Destinations {
			if c.Checked {
				picked = append(picked, c.Name)
			}
		}
		var err error
		if f.Destinations, err = d.choices(r, picked); err != nil {
			d.failErr(w, r, err)
			return
		}
	}
	d.render(w, r, status, "object_form", s, f)
}

func checked(names []string) []choice {
	var out []choice
	for _, n := range names {
		out = append(out, choice{Name: n, Checked: true})
	}
	return out
}

// newObject is GET /ui/sources/new (/ui/destinations/new).
func (d *Dashboard) newObject(w http.ResponseWriter, r *http.Request, s session) {
	if s.caller.ReadOnly {
		d.fail(w, r, http.StatusForbidden, "read_only")
		return
	}
	d.renderForm(w, r, s, http.StatusOK, &objectForm{Kind: kindOf(r).kind})
}

// formSpec is the object the posted form describes, and the form to show
// again if the API refuses it. On an edit, old is the object as stored
// (its spec, secrets as fingerprints), and the spec is a merge patch of
// it: a secret left blank stays, a field taken out of the advanced box
// goes back to its default.
func formSpec(r *http.Request, k objectKind, old *api.ObjectView) (map[string]any, *objectForm, error) {
	f := &objectForm{Kind: k.kind, Edit: old != nil, Name: strings.TrimSpace(r.PostFormValue("name")), Advanced: r.PostFormValue("advanced")}
	adv, err := parseAdvanced(f.Advanced)
	if err != nil {
		return nil, f, err
	}
	spec := map[string]any{}
	if old != nil {
		// Whatever the advanced box held and holds no more: null.
		for key, v := range old.Spec {
			if _, ok := adv[key]; !ok && !slices.Contains(formFields[k.kind], key) && !holdsSecret(v) {
				spec[key] = nil
			}
		}
		f.Name = old.Name
		f.Version, _ = strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	}
	maps.Copy(spec, adv)
	if old == nil {
		spec["name"] = f.Name
	}
	switch k.kind {
	case "source":
		f.Preset = strings.TrimSpace(r.PostFormValue("preset"))
		if f.Preset != "" {
			spec["preset"] = f.Preset
		} else if old != nil && old.Spec["preset"] != nil {
			spec["preset"] = nil
		}
		if secrets := formValues(r, "secret"); len(secrets) > 0 {
			spec["secrets"] = secrets
		}
		picked := formValues(r, "destination")
		f.Destinations = checked(picked)
		if old != nil {
			f.Secrets = countSecrets(old.Spec["secrets"])
		}
		switch {
		case len(picked) > 0:
			spec["destinations"] = routesOf(picked, old)
		case old != nil && old.Spec["destinations"] != nil:
			spec["destinations"] = nil
		}
	case "destination":
		f.URL = strings.TrimSpace(r.PostFormValue("url"))
		f.Timeout = strings.TrimSpace(r.PostFormValue("timeout"))
		f.Headers = r.PostFormValue("headers")
		// An edit shows the URL as the API does (a password, a query's
		// values masked): given back unchanged, it stays as stored.
		if old == nil || f.URL != fmt.Sprint(old.Spec["url"]) {
			spec["url"] = f.URL
		}
		if sec := strings.TrimSpace(r.PostFormValue("secret")); sec != "" {
			spec["secret"] = sec
		}
		if f.Timeout != "" {
			spec["timeout"] = f.Timeout
		} else if old != nil && old.Spec["timeout"] != nil {
			spec["timeout"] = nil
		}
		if strings.TrimSpace(f.Headers) != "" {
			h, err := parseHeaders(f.Headers)
			if err != nil {
				return nil, f, err
			}
			spec["headers"] = h
		}
		if old != nil {
			f.HasSecret = old.Spec["secret"] != nil
			f.HeaderKeys = slices.Sorted(maps.Keys(mapOf(old.Spec["headers"])))
		}
	}
	return spec, f, nil
}

// routesOf is a source's destinations as picked: a route of the stored
// source that carries more than a name (a filter) is kept as it was.
func routesOf(picked []string, old *api.ObjectView) []any {
	var was []any
	if old != nil {
		was, _ = old.Spec["destinations"].([]any)
	}
	out := make([]any, 0, len(picked))
	for _, name := range picked {
		var route any = name
		for _, w := range was {
			if m, ok := w.(map[string]any); ok && m["name"] == name {
				route = m
			}
		}
		out = append(out, route)
	}
	return out
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func countSecrets(v any) int {
	switch v := v.(type) {
	case []any:
		return len(v)
	case nil:
		return 0
	}
	return 1
}

// holdsSecret reports whether v, a field of a spec the API answered, is
// or holds a secret's fingerprint: it cannot be given back as text.
func holdsSecret(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["fingerprint"]; ok && len(v) == 1 {
			return true
		}
		for _, x := range v {
			if holdsSecret(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if holdsSecret(x) {
				return true
			}
		}
	}
	return false
}

// createObject is POST /ui/sources/new (/ui/destinations/new): the API's
// create; then a source's setup page, a destination's list.
func (d *Dashboard) createObject(w http.ResponseWriter, r *http.Request, s session) {
	k := kindOf(r)
	spec, f, err := formSpec(r, k, nil)
	if err != nil {
		f.General = []string{err.Error()}
		d.renderForm(w, r, s, http.StatusBadRequest, f)
		return
	}
	a, err := d.callObjects(r.Context(), http.MethodPost, objectPath(k, ""), 0, spec)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	if !a.ok() {
		f.errorsOf(a.err)
		d.renderForm(w, r, s, a.status, f)
		return
	}
	if k.kind == "source" {
		http.Redirect(w, r, Prefix+"/sources/"+url.PathEscape(a.view.Name)+"/setup?created=1", http.StatusSeeOther)
		return
	}
	done(w, r, listPage(k), "created")
}

// stored reads the API's object of the request's {name}; false when it
// answered (a page saying what is wrong).
func (d *Dashboard) stored(w http.ResponseWriter, r *http.Request, k objectKind) (api.ObjectView, bool) {
	a, err := d.callObjects(r.Context(), http.MethodGet, objectPath(k, r.PathValue("name")), 0, nil)
	if err != nil {
		d.failErr(w, r, err)
		return api.ObjectView{}, false
	}
	if a.status == http.StatusNotFound {
		d.fail(w, r, http.StatusNotFound, "not_found")
		return api.ObjectView{}, false
	}
	if !a.ok() {
		d.failMsg(w, r, a.status, a.err.Error)
		return api.ObjectView{}, false
	}
	return a.view, true
}

// failMsg is the error page with the API's own words.
func (d *Dashboard) failMsg(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s, _, _ := d.sessionOf(r)
	d.render(w, r, status, "error", s, map[string]any{"Status": status, "Reason": "refused", "Message": msg})
}

// fileManaged answers for an object the config file owns: no form.
func (d *Dashboard) fileManaged(w http.ResponseWriter, r *http.Request, v api.ObjectView) bool {
	if v.ManagedBy == "api" {
		return false
	}
	msg := v.Name
	if v.Config != "" {
		msg += " — " + v.Config
	}
	s, _, _ := d.sessionOf(r)
	d.render(w, r, http.StatusConflict, "error", s, map[string]any{"Status": http.StatusConflict, "Reason": "managed_by_file", "Message": msg})
	return true
}

// editObject is GET /ui/sources/{name}/edit: the form, filled with the
// object as stored (secrets never: blank keeps them).
func (d *Dashboard) editObject(w http.ResponseWriter, r *http.Request, s session) {
	if s.caller.ReadOnly {
		d.fail(w, r, http.StatusForbidden, "read_only")
		return
	}
	k := kindOf(r)
	v, ok := d.stored(w, r, k)
	if !ok || d.fileManaged(w, r, v) {
		return
	}
	d.renderForm(w, r, s, http.StatusOK, filled(k, v))
}

// filled is the edit form of v.
func filled(k objectKind, v api.ObjectView) *objectForm {
	f := &objectForm{Kind: k.kind, Edit: true, Name: v.Name, Version: v.Version}
	rest := map[string]any{}
	for key, x := range v.Spec {
		if !slices.Contains(formFields[k.kind], key) && !holdsSecret(x) {
			rest[key] = x
		}
	}
	if k.kind == "source" {
		f.Preset, _ = v.Spec["preset"].(string)
		f.Secrets = countSecrets(v.Spec["secrets"])
		f.VerifyToken = v.Spec["verify_token"] != nil
		var picked []string
		routes, _ := v.Spec["destinations"].([]any)
		for _, x := range routes {
			switch x := x.(type) {
			case string:
				picked = append(picked, x)
			case map[string]any:
				n, _ := x["name"].(string)
				picked = append(picked, n)
			}
		}
		f.Destinations = checked(picked)
	} else {
		f.URL, _ = v.Spec["url"].(string)
		f.Timeout, _ = v.Spec["timeout"].(string)
		f.HasSecret = v.Spec["secret"] != nil
		f.HeaderKeys = slices.Sorted(maps.Keys(mapOf(v.Spec["headers"])))
	}
	if len(rest) > 0 {
		b, err := yaml.Marshal(rest)
		if err == nil {
			f.Advanced = string(b)
		}
	}
	return f
}

// updateObject is POST /ui/sources/{name}/edit: the API's PATCH, with
// the version the form was filled from as If-Match.
func (d *Dashboard) updateObject(w http.ResponseWriter, r *http.Request, s session) {
	k := kindOf(r)
	v, ok := d.stored(w, r, k)
	if !ok || d.fileManaged(w, r, v) {
		return
	}
	spec, f, err := formSpec(r, k, &v)
	if err != nil {
		f.General = []string{err.Error()}
		d.renderForm(w, r, s, http.StatusBadRequest, f)
		return
	}
	if f.Version <= 0 {
		f.Version = -1 // no version posted: never "whatever is stored"
	}
	a, err := d.callObjects(r.Context(), http.MethodPatch, objectPath(k, v.Name), f.Version, spec)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	if !a.ok() {
		f.errorsOf(a.err)
		d.renderForm(w, r, s, a.status, f)
		return
	}
	done(w, r, listPage(k), "updated")
}

// deletePage is GET /ui/sources/{name}/delete: what deleting it does,
// and the button that does it.
func (d *Dashboard) deletePage(w http.ResponseWriter, r *http.Request, s session) {
	if s.caller.ReadOnly {
		d.fail(w, r, http.StatusForbidden, "read_only")
		return
	}
	k := kindOf(r)
	v, ok := d.stored(w, r, k)
	if !ok || d.fileManaged(w, r, v) {
		return
	}
	d.render(w, r, http.StatusOK, "object_delete", s, map[string]any{"Kind": k.kind, "Name": v.Name, "Version": v.Version})
}

// deleteObject is POST /ui/sources/{name}/delete: the API's DELETE, with
// the version the confirmation showed.
func (d *Dashboard) deleteObject(w http.ResponseWriter, r *http.Request, s session) {
	k := kindOf(r)
	name := r.PathValue("name")
	version, _ := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	if version <= 0 {
		version = -1
	}
	a, err := d.callObjects(r.Context(), http.MethodDelete, objectPath(k, name), version, nil)
	if err != nil {
		d.failErr(w, r, err)
		return
	}
	if !a.ok() {
		data := map[string]any{"Kind": k.kind, "Name": name, "Version": version, "Refused": a.err.Error}
		d.render(w, r, a.status, "object_delete", s, data)
		return
	}
	done(w, r, listPage(k), "deleted")
}

// setupPage is GET /ui/sources/{name}/setup: the intake URL and what to
// do at the provider, in the session's language.
func (d *Dashboard) setupPage(w http.ResponseWriter, r *http.Request, s session) {
	v, ok := d.stored(w, r, sourceKind)
	if !ok {
		return
	}
	preset, _ := v.Spec["preset"].(string)
	if v.ManagedBy == "file" {
		// The API shows a file's source without its fields: its preset
		// is on the operator's list.
		sources, err := d.svc(r).Sources(r.Context())
		if err != nil {
			d.failErr(w, r, err)
			return
		}
		for _, src := range sources {
			if src.Name == v.Name {
				preset = src.Preset
			}
		}
	}
	lang := setup.EN
	if d.langOf(r).Code == "pt-BR" {
		lang = setup.PTBR
	}
	d.render(w, r, http.StatusOK, "object_setup", s, map[string]any{"Name": v.Name, "Preset": preset, "IntakeURL": v.IntakeURL,
		"Steps": setup.Steps(preset, lang), "Created": r.URL.Query().Get("created") != "", "ManagedBy": v.ManagedBy})
}

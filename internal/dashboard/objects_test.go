package dashboard_test

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/setup"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

const (
	formsKey   = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes, standard base64
	acmeToken  = "acme-token-0123456789"
	acmeHottok = "hottok-acme-7f3a9c"
	destSecret = "whsec_ZGVzdC1zaWduaW5nLXNlY3JldC01NTIx"
)

// startFormsGateway is a gateway with a key for secrets at rest, the
// operator's token, a read-only one and a tenant's, and a source and a
// destination of the config file.
func startFormsGateway(t *testing.T, store string) *oncehooktest.Gateway {
	t.Helper()
	return oncehooktest.StartWith(t, `
store: `+store+`
api:
  tokens:
    - {name: ops, token: `+token+`}
    - {name: viewer, token: `+viewer+`, read_only: true}
    - {name: acme, token: `+acmeToken+`, tenant: acme}
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app]}
destinations:
  - {name: app, url: http://127.0.0.1:9/never}
`, oncehook.Options{Getenv: func(name string) string {
		if name == "ONCEHOOK_SECRET_KEYS" {
			return formsKey
		}
		return ""
	}})
}

// apiGet reads an object through the API, as the operator.
func apiGet(t *testing.T, gw *oncehooktest.Gateway, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, gw.APIURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func fingerprints(v map[string]any) string {
	b, _ := json.Marshal(v["spec"].(map[string]any)["secrets"])
	return string(b)
}

// testObjectFormsGoThroughTheAPI signs in, creates a destination and a
// source with the forms, sees them in the API (created by the session's
// token, secrets as fingerprints), sends the source a signed webhook that
// is delivered, reads the setup steps in both languages, edits with the
// version (a stale edit is refused), and deletes after a confirmation;
// the file's objects have no forms.
func TestObjectFormsGoThroughTheAPISQLite(t *testing.T) {
	testObjectFormsGoThroughTheAPI(t, "sqlite://$DIR/oncehook.db")
}

func TestObjectFormsGoThroughTheAPIPostgres(t *testing.T) {
	testObjectFormsGoThroughTheAPI(t, testenv.Postgres(t))
}

func testObjectFormsGoThroughTheAPI(t *testing.T, store string) {
	gw := startFormsGateway(t, store)
	sink := testenv.NewSink(t)
	c, csrf := login(t, gw, token)
	origin := gw.APIURL

	_, page := get(t, c, gw.APIURL+"/ui/")
	if !strings.Contains(page, `id="new-source"`) || !strings.Contains(page, `data-test="managed-by-file"`) || strings.Contains(page, "/ui/sources/stripe/edit") {
		t.Fatalf("the overview shows no New source, or offers to edit the file's source:\n%s", page)
	}

	// A destination, then a source routed to it.
	resp, page := postForm(t, c, gw.APIURL+"/ui/destinations/new", url.Values{"csrf": {csrf}, "name": {"acme-app"}, "url": {sink.URL},
		"secret": {destSecret}, "headers": {"X-Team: acme\r\nX-Other: 2"}, "timeout": {"5s"}}, origin)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/destinations?done=created" {
		t.Fatalf("create destination: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	resp, page = postForm(t, c, gw.APIURL+"/ui/sources/new", url.Values{"csrf": {csrf}, "name": {"acme-hotmart"}, "preset": {"hotmart"},
		"secret": {acmeHottok, ""}, "destination": {"acme-app"}, "advanced": {"window: 48h\n"}}, origin)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/sources/acme-hotmart/setup?created=1" {
		t.Fatalf("create source: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	status, v := apiGet(t, gw, "/v1/sources/acme-hotmart")
	if status != 200 || v["managed_by"] != "api" || v["created_by"] != "token:ops" || v["intake_url"] != gw.URL+"/in/acme-hotmart" ||
		v["spec"].(map[string]any)["window"] != "48h" || strings.Contains(fmt.Sprint(v), acmeHottok) {
		t.Fatalf("the API's source: %d %v", status, v)
	}
	fp := fingerprints(v)
	status, dv := apiGet(t, gw, "/v1/destinations/acme-app")
	if status != 200 || dv["created_by"] != "token:ops" || strings.Contains(fmt.Sprint(dv), destSecret) || !strings.Contains(fmt.Sprint(dv), "X-Team") {
		t.Fatalf("the API's destination: %d %v", status, dv)
	}

	// The provider sends: accepted, and delivered to the destination.
	req := testenv.SignedRequest(t, gw.URL+"/in/acme-hotmart", "hotmart", acmeHottok,
		[]byte(`{"id":"4c1e-approved","event":"PURCHASE_APPROVED","version":"2.0.0","data":{"purchase":{"transaction":"HP1"}}}`), "")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 200 {
		t.Fatalf("a signed webhook to the created source: %d", r2.StatusCode)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatalf("delivered %d", len(sink.Deliveries()))
	}
	if h := sink.Deliveries()[0].Header.Get("X-Team"); h != "acme" {
		t.Errorf("the form's header reached the destination as %q", h)
	}

	// The setup page: the intake URL to copy, and the provider's steps,
	// in each language.
	for lang, l := range map[string]string{"en": setup.EN, "pt-BR": setup.PTBR} {
		said := map[string]string{"en": "Source acme-hotmart created.", "pt-BR": "Origem acme-hotmart criada."}[lang]
		_, page = get(t, c, gw.APIURL+"/ui/sources/acme-hotmart/setup?created=1&lang="+lang)
		if !strings.Contains(page, `id="intake-url" class="wide" value="`+gw.URL+`/in/acme-hotmart"`) || strings.Contains(page, acmeHottok) || !strings.Contains(page, said) {
			t.Fatalf("%s: setup page without the intake URL, or with the secret:\n%s", lang, page)
		}
		for _, step := range setup.Steps("hotmart", l) {
			if !strings.Contains(page, html.EscapeString(step)) {
				t.Errorf("%s: setup page lacks the step %q", lang, step)
			}
		}
	}

	// Edit: filled with what is stored, no secret; a blank secret stays.
	_, page = get(t, c, gw.APIURL+"/ui/sources/acme-hotmart/edit?lang=en")
	if !strings.Contains(page, `name="version" value="1"`) || !strings.Contains(page, `<option value="hotmart" selected>`) ||
		!regexp.MustCompile(`value="acme-app" checked`).MatchString(page) || !strings.Contains(page, "window: 48h") || strings.Contains(page, acmeHottok) {
		t.Fatalf("edit form:\n%s", page)
	}
	edit := url.Values{"csrf": {csrf}, "version": {"1"}, "preset": {"hotmart"}, "destination": {"acme-app"}, "advanced": {"window: 72h"}}
	resp, page = postForm(t, c, gw.APIURL+"/ui/sources/acme-hotmart/edit", edit, origin)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", resp.StatusCode, page)
	}
	_, v = apiGet(t, gw, "/v1/sources/acme-hotmart")
	if v["version"] != 2.0 || v["spec"].(map[string]any)["window"] != "72h" || fingerprints(v) != fp || v["updated_by"] != "token:ops" {
		t.Fatalf("after the edit: %v (secrets %s, were %s)", v, fingerprints(v), fp)
	}
	// The same form again, filled from version 1: stale.
	resp, page = postForm(t, c, gw.APIURL+"/ui/sources/acme-hotmart/edit?lang=pt-BR", edit, origin)
	if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(page, "is at version 2, not 1") || !strings.Contains(page, "Não salvo") ||
		!strings.Contains(page, "carregue de novo") {
		t.Fatalf("stale edit: %d\n%s", resp.StatusCode, page)
	}

	// A destination's edit: its URL, secret and headers left as shown
	// (the secret and headers blank) stay as stored; the timeout changes.
	_, page = get(t, c, gw.APIURL+"/ui/destinations/acme-app/edit?lang=en")
	if strings.Contains(page, destSecret) || strings.Contains(page, "X-Team: acme") || !strings.Contains(page, "It has X-Other, X-Team") ||
		!strings.Contains(page, `value="`+sink.URL+`"`) || !strings.Contains(page, `value="5s"`) {
		t.Fatalf("destination edit form:\n%s", page)
	}
	resp, page = postForm(t, c, gw.APIURL+"/ui/destinations/acme-app/edit", url.Values{"csrf": {csrf}, "version": {"1"}, "url": {sink.URL},
		"secret": {""}, "headers": {""}, "timeout": {"7s"}}, origin)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("destination edit: %d\n%s", resp.StatusCode, page)
	}
	_, dv2 := apiGet(t, gw, "/v1/destinations/acme-app")
	spec, was := dv2["spec"].(map[string]any), dv["spec"].(map[string]any)
	if dv2["version"] != 2.0 || spec["timeout"] != "7s" || fmt.Sprint(spec["secret"]) != fmt.Sprint(was["secret"]) ||
		fmt.Sprint(spec["headers"]) != fmt.Sprint(was["headers"]) || spec["url"] != was["url"] {
		t.Fatalf("after the destination's edit: %v (was %v)", spec, was)
	}

	// Refused fields, beside their inputs, in the API's words.
	resp, page = postForm(t, c, gw.APIURL+"/ui/sources/new", url.Values{"csrf": {csrf}, "name": {"bad name"}, "preset": {"stripe"}}, origin)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `data-field="name"`) || !strings.Contains(page, `value="bad name"`) {
		t.Fatalf("invalid name: %d\n%s", resp.StatusCode, page)
	}
	resp, page = postForm(t, c, gw.APIURL+"/ui/sources/new", url.Values{"csrf": {csrf}, "name": {"nosuch-preset"}, "preset": {"nosuch"}, "secret": {"s"}}, origin)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `data-field="preset"`) || !strings.Contains(page, "nosuch") {
		t.Fatalf("unknown preset: %d\n%s", resp.StatusCode, page)
	}

	// The file's: no form, and a delete is refused with the API's 409.
	resp, page = get(t, c, gw.APIURL+"/ui/sources/stripe/edit?lang=en")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "config file") {
		t.Fatalf("editing the file's source: %d\n%s", resp.StatusCode, page)
	}
	resp, page = postForm(t, c, gw.APIURL+"/ui/sources/stripe/delete", url.Values{"csrf": {csrf}, "version": {"1"}}, origin)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "is defined in the config file") {
		t.Fatalf("deleting the file's source: %d\n%s", resp.StatusCode, page)
	}

	// Delete: a confirmation first; a destination still routed to is
	// refused, saying by whom.
	_, page = get(t, c, gw.APIURL+"/ui/destinations/acme-app/delete")
	if !strings.Contains(page, `id="confirm-delete"`) || !strings.Contains(page, `name="version" value="2"`) {
		t.Fatalf("confirmation page:\n%s", page)
	}
	resp, page = postForm(t, c, gw.APIURL+"/ui/destinations/acme-app/delete", url.Values{"csrf": {csrf}, "version": {"2"}}, origin)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "routed to by source acme-hotmart") {
		t.Fatalf("deleting a routed destination: %d\n%s", resp.StatusCode, page)
	}
	resp, _ = postForm(t, c, gw.APIURL+"/ui/sources/acme-hotmart/delete", url.Values{"csrf": {csrf}, "version": {"2"}}, origin)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete source: %d", resp.StatusCode)
	}
	if status, _ := apiGet(t, gw, "/v1/sources/acme-hotmart"); status != 404 {
		t.Fatalf("deleted source answers %d", status)
	}
	resp, _ = postForm(t, c, gw.APIURL+"/ui/destinations/acme-app/delete", url.Values{"csrf": {csrf}, "version": {"2"}}, origin)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete destination: %d", resp.StatusCode)
	}
	// Each change is in the audit log under the session's token, in the
	// reader's language.
	_, page = get(t, c, gw.APIURL+"/ui/audit?lang=pt-BR")
	for _, want := range []string{"origem criada", "origem alterada", "origem excluída", "destino criado", "destino alterado", "destino excluído", "origem acme-hotmart"} {
		if !strings.Contains(page, want) {
			t.Errorf("the audit page lacks %q", want)
		}
	}
	if n := strings.Count(page, "token:ops"); n < 5 {
		t.Errorf("the audit page names the session's token %d times", n)
	}
}

// TestObjectFormsRefuseReadOnlyAndKeepTenants: a read-only session has no
// forms and its posts are refused; a tenant's session creates its own
// tenant's objects only, and reaches no other's.
func TestObjectFormsRefuseReadOnlyAndKeepTenants(t *testing.T) {
	gw := startFormsGateway(t, "sqlite://$DIR/oncehook.db")

	c, csrf := login(t, gw, viewer)
	_, page := get(t, c, gw.APIURL+"/ui/")
	if strings.Contains(page, `id="new-source"`) || strings.Contains(page, "managed-by-file") {
		t.Fatalf("a read-only session is offered the forms:\n%s", page)
	}
	for _, path := range []string{"/ui/sources/new", "/ui/destinations/new"} {
		if resp, _ := get(t, c, gw.APIURL+path); resp.StatusCode != http.StatusForbidden {
			t.Errorf("read-only GET %s: %d", path, resp.StatusCode)
		}
	}
	resp, _ := postForm(t, c, gw.APIURL+"/ui/sources/new", url.Values{"csrf": {csrf}, "name": {"ro"}, "preset": {"stripe"}, "secret": {"s"}}, gw.APIURL)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("read-only create: %d", resp.StatusCode)
	}
	if status, _ := apiGet(t, gw, "/v1/sources/ro"); status != 404 {
		t.Fatalf("a read-only post made a source: %d", status)
	}

	c, csrf = login(t, gw, acmeToken)
	resp, page = postForm(t, c, gw.APIURL+"/ui/sources/new", url.Values{"csrf": {csrf}, "name": {"acme-stripe"}, "preset": {"stripe"}, "secret": {"whsec_acme"}}, gw.APIURL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("tenant create: %d\n%s", resp.StatusCode, page)
	}
	if status, v := apiGet(t, gw, "/v1/sources/acme-stripe"); status != 200 || v["spec"].(map[string]any)["tenant"] != "acme" || v["created_by"] != "token:acme" {
		t.Fatalf("the tenant's source: %d %v", status, v)
	}
	resp, page = postForm(t, c, gw.APIURL+"/ui/sources/new", url.Values{"csrf": {csrf}, "name": {"acme-other"}, "preset": {"stripe"}, "secret": {"s"},
		"advanced": {`{"tenant": "globex"}`}}, gw.APIURL)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "creates its objects only") {
		t.Fatalf("a tenant naming another tenant: %d\n%s", resp.StatusCode, page)
	}
	// The file's source (no tenant) and a name taken by it: not the
	// tenant's to see.
	if resp, _ := get(t, c, gw.APIURL+"/ui/sources/stripe/edit"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a tenant editing the operator's source: %d", resp.StatusCode)
	}
	resp, page = postForm(t, c, gw.APIURL+"/ui/destinations/new", url.Values{"csrf": {csrf}, "name": {"app"}, "url": {"http://127.0.0.1:9/x"}}, gw.APIURL)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "already exists: choose another name") {
		t.Errorf("a tenant taking the operator's name: %d\n%s", resp.StatusCode, page)
	}
	_, page = get(t, c, gw.APIURL+"/ui/")
	if strings.Contains(page, `data-source="stripe"`) || !strings.Contains(page, `data-source="acme-stripe"`) {
		t.Errorf("the tenant's overview:\n%s", page)
	}
}

// TestObjectFormsTakeHostileBytes posts NUL, invalid UTF-8, CR/LF and long
// values in every field of both forms: each is refused or kept as the API
// decides, never a 500, never a page that is not UTF-8 or that carries a
// raw NUL or an unescaped tag, never a header of the poster's.
func TestObjectFormsTakeHostileBytes(t *testing.T) {
	gw := startFormsGateway(t, "sqlite://$DIR/oncehook.db")
	c, csrf := login(t, gw, token)
	hostile := []string{"a\x00b", "\xff\xfe\xfd", "a\r\nX-Injected: 1", "<script>alert(1)</script>", strings.Repeat("é", 5000), strings.Repeat("x", 70<<10)}
	forms := map[string]url.Values{
		"sources":      {"name": {""}, "preset": {"stripe"}, "secret": {"whsec_x"}, "destination": {"app"}, "advanced": {""}},
		"destinations": {"name": {""}, "url": {"http://127.0.0.1:9/x"}, "secret": {""}, "headers": {""}, "timeout": {""}, "advanced": {""}},
	}
	n := 0
	for kind, base := range forms {
		for field := range base {
			for i, bad := range hostile {
				n++
				form := url.Values{"csrf": {csrf}}
				for k, v := range base {
					form[k] = v
				}
				form.Set("name", fmt.Sprintf("h%d", n))
				form.Set(field, bad)
				resp, page := postForm(t, c, gw.APIURL+"/ui/"+kind+"/new", form, gw.APIURL)
				what := fmt.Sprintf("%s %s #%d", kind, field, i)
				switch {
				case resp.StatusCode >= 500:
					t.Errorf("%s: %d\n%.2000s", what, resp.StatusCode, page)
				case !utf8.ValidString(page) || strings.ContainsRune(page, 0):
					t.Errorf("%s: the page is not clean UTF-8", what)
				case strings.Contains(page, "<script>alert"):
					t.Errorf("%s: unescaped", what)
				case resp.Header.Get("X-Injected") != "":
					t.Errorf("%s: a header was injected", what)
				case resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusConflict:
					t.Errorf("%s: %d", what, resp.StatusCode)
				}
				if field == "name" && resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%s: a hostile name answered %d", what, resp.StatusCode)
				}
				if len(bad) > 64<<10 && resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%s: a body over 64 KiB answered %d", what, resp.StatusCode)
				}
			}
		}
	}
	// The gateway still serves, and its stored objects all read.
	if resp, _ := get(t, c, gw.APIURL+"/ui/destinations"); resp.StatusCode != 200 {
		t.Fatalf("destinations page after the hostile posts: %d", resp.StatusCode)
	}
	if resp, page := get(t, c, gw.APIURL+"/ui/"); resp.StatusCode != 200 || !utf8.ValidString(page) {
		t.Fatalf("overview after the hostile posts: %d", resp.StatusCode)
	}
}

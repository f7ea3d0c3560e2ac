package oncehook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/internal/secretbox"
	"github.com/oncehook/oncehook/store"
)

// Sources created at runtime, through the API (#45). The config the
// gateway runs is the file's config and these, merged (config.Merge):
// one check (the file's own, with its field names), one swap (prepare and
// apply, as a reload takes). The store keeps each as JSON under the
// file's field names, its secrets sealed (internal/secretbox); the
// gateway keeps them opened, for a PATCH to merge into, and never shows a
// secret, only its fingerprint.

// object is a source or destination created through the API, as the
// gateway runs it.
type object struct {
	stored store.Object   // as stored: its secrets sealed
	spec   map[string]any // as given, its secrets in clear
	// source or destination: spec, read as the file's are (by
	// stored.Kind).
	source      config.Source
	destination config.Destination
	// token: an API token (store.ObjectToken), its Hash from the spec.
	token config.APIToken
	// tomb marks a deleted object's tombstone (tombstoneSpec): its row
	// kept, with its tenant and version, so that the name stays its
	// tenant's. It runs nothing, and the API answers it as a name nobody
	// has.
	tomb bool
}

// tombstoneSpec is the spec a deleted object's row keeps. A tenant's
// views (audit, alerts, stats, breakers) tell history apart by name, and
// a deleted row forgot whose a name was: another tenant creating it took
// over the first one's history. The row stays, marked so, and the name
// stays its tenant's (createObject, createToken). No real spec reads as
// it: every one has a name.
var tombstoneSpec = []byte(`{"deleted":true}`)

// isTombstone reports whether so is a deleted object's tombstone.
func isTombstone(so store.Object) bool { return bytes.Equal(so.Spec, tombstoneSpec) }

// tombstoneOf is o, deleted: its tombstone, as stored once the store
// keeps it.
func tombstoneOf(o object) object {
	st := o.stored
	st.Spec = tombstoneSpec
	return object{stored: st, tomb: true}
}

// takesTomb reports whether an object of tenant may be created over
// tomb, a deleted object's tombstone: one of the same tenant's, or the
// operator's own (tenantless), who sees every tenant's history anyway.
// An operator's tombstone is held against every tenant.
func takesTomb(tenant string, tomb object) bool {
	return tenant == "" || tenant == tomb.stored.Tenant
}

// name is the object's name.
func (o object) name() string { return o.stored.Name }

// tenant is the object's tenant, as its spec gives it ("" for none).
func (o object) tenant() string {
	switch o.stored.Kind {
	case store.ObjectSource:
		return o.source.Tenant
	case store.ObjectToken:
		return o.token.Tenant
	}
	return o.destination.Tenant
}

// sourcesOf are objects' sources, in order.
func sourcesOf(objects []object) []config.Source {
	var out []config.Source
	for _, o := range objects {
		if o.stored.Kind == store.ObjectSource && !o.tomb {
			out = append(out, o.source)
		}
	}
	return out
}

// destinationsOf are objects' destinations, in order.
func destinationsOf(objects []object) []config.Destination {
	var out []config.Destination
	for _, o := range objects {
		if o.stored.Kind == store.ObjectDestination && !o.tomb {
			out = append(out, o.destination)
		}
	}
	return out
}

// tokensOf are objects' API tokens, in order.
func tokensOf(objects []object) []config.APIToken {
	var out []config.APIToken
	for _, o := range objects {
		if o.stored.Kind == store.ObjectToken && !o.tomb {
			out = append(out, o.token)
		}
	}
	return out
}

// secretFields are the fields of each kind that hold secrets: sealed at
// rest, shown as fingerprints. A list's strings and a mapping's values
// (a destination's headers: an Authorization) are sealed one by one; a
// dotted path reaches into a block (a transformation's env).
var secretFields = map[string][]string{
	store.ObjectSource:      {"secrets", "verify_token"},
	store.ObjectDestination: {"secret", "headers", "transform.env"},
}

// sealContext binds a sealed value to its object: copied to another
// object's row, it does not open.
// (A list's values share their field's: secrets[0] and secrets[1] are
// "secrets", so that a rotation may reorder them.)
func sealContext(kind, name, field string) string {
	if i := strings.IndexAny(field, "[:"); i >= 0 {
		field = field[:i]
	}
	return kind + "/" + name + "/" + field
}

// errNoKeys is a secret given to a gateway without keys to seal it.
type errNoKeys struct{ field string }

func (e errNoKeys) Error() string {
	return e.field + ": this gateway has no key to encrypt secrets at rest, so it takes none through the API: " + secretbox.HowToSet
}

// mapSecrets returns spec, an object of kind, with fn applied to each
// secret's value (new maps and lists where it changes one; spec is not
// changed). fn is told the field: "secrets[0]", "headers:Authorization".
func mapSecrets(kind string, spec map[string]any, fn func(field, v string) (any, error)) (map[string]any, error) {
	out := maps.Clone(spec)
	for _, path := range secretFields[kind] {
		if err := mapPath(out, strings.Split(path, "."), path, fn); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mapPath applies fn to the secrets at path under m, which it may change
// (m is a copy its caller owns: what is under it is copied as it changes).
func mapPath(m map[string]any, path []string, field string, fn func(field, v string) (any, error)) error {
	if len(path) > 1 {
		inner, ok := m[path[0]].(map[string]any)
		if !ok {
			return nil
		}
		inner = maps.Clone(inner)
		m[path[0]] = inner
		return mapPath(inner, path[1:], field, fn)
	}
	switch v := m[path[0]].(type) {
	case string:
		if v == "" {
			return nil
		}
		nv, err := fn(field, v)
		if err != nil {
			return err
		}
		m[path[0]] = nv
	case []any:
		list := slices.Clone(v)
		for i, e := range list {
			if s, ok := e.(string); ok && s != "" {
				nv, err := fn(fmt.Sprintf("%s[%d]", field, i), s)
				if err != nil {
					return err
				}
				list[i] = nv
			}
		}
		m[path[0]] = list
	case map[string]any:
		vals := maps.Clone(v)
		for _, k := range slices.Sorted(maps.Keys(vals)) {
			if s, ok := vals[k].(string); ok && s != "" {
				nv, err := fn(field+":"+k, s)
				if err != nil {
					return err
				}
				vals[k] = nv
			}
		}
		m[path[0]] = vals
	}
	return nil
}

// seal is spec as it is stored: each secret sealed with box (nil: a
// secret is errNoKeys).
func seal(box *secretbox.Box, kind, name string, spec map[string]any) ([]byte, error) {
	sealed, err := mapSecrets(kind, spec, func(field, v string) (any, error) {
		if box == nil {
			return nil, errNoKeys{strings.Replace(field, ":", ".", 1)}
		}
		return box.Seal(v, sealContext(kind, name, field)), nil
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(sealed)
}

// open reads a stored object's spec, its secrets opened with box.
func open(box *secretbox.Box, o store.Object) (map[string]any, error) {
	spec, err := decodeSpec(o.Spec)
	if err != nil {
		return nil, err
	}
	return mapSecrets(o.Kind, spec, func(field, v string) (any, error) {
		if !secretbox.Sealed(v) {
			return v, nil
		}
		if box == nil {
			return nil, fmt.Errorf("%s is encrypted, and no key is configured: %s", field, secretbox.HowToSet)
		}
		plain, err := box.Open(v, sealContext(o.Kind, o.Name, field))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return plain, nil
	})
}

// shown is spec as answers show it: each secret replaced by its
// fingerprint ({"fingerprint": "sha256:..."}), never the secret, and each
// URL as every URL shown is (redact.URL: a password and the query's values
// masked), where a destination's url?api_key=... was answered whole, to a
// read-only token too.
func shown(kind string, spec map[string]any) map[string]any {
	out, _ := mapSecrets(kind, spec, func(_, v string) (any, error) {
		return map[string]string{"fingerprint": secretbox.Fingerprint(v)}, nil
	})
	return redactURLs(out).(map[string]any)
}

// redactURLs is v with every string under a key named url redacted: a
// copy, v itself unchanged.
func redactURLs(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if s, ok := x.(string); ok && k == "url" {
				out[k] = redact.URL(s)
				continue
			}
			out[k] = redactURLs(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = redactURLs(x)
		}
		return out
	}
	return v
}

// errNotObject is decodeSpec's error for what is not one JSON object: the
// API's answer says which object's fields it wants.
var errNotObject = errors.New("want a JSON object")

// decodeSpec reads a JSON object, its numbers kept as written.
func decodeSpec(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var spec map[string]any
	if err := dec.Decode(&spec); err != nil || spec == nil {
		return nil, errNotObject
	}
	if dec.More() {
		return nil, errors.New("want one JSON object, and nothing after it")
	}
	return spec, nil
}

// readObject reads spec, an object of kind, as the file's sources (or
// destinations) are read (config.ReadSource): the same field names, the
// same checks. A destination's script is given inline: the API does not
// read the gateway's files.
func readObject(kind string, spec map[string]any) (object, error) {
	o := object{spec: spec}
	text, err := json.Marshal(spec)
	if err != nil {
		return o, err
	}
	if kind == store.ObjectToken {
		return readToken(spec)
	}
	if kind == store.ObjectSource {
		o.source, err = config.ReadSource(text)
		o.stored = store.Object{Kind: kind, Name: o.source.Name}
		return o, err
	}
	o.destination, err = config.ReadDestination(text)
	o.stored = store.Object{Kind: kind, Name: o.destination.Name}
	if err == nil && o.destination.Transform != nil && o.destination.Transform.File != "" {
		err = errors.New("transform: a destination created through the API gives its script inline ({\"inline\": \"...\"}): the API reads no file of the gateway's")
	}
	return o, err
}

// readToken reads spec, a stored API token (the fields api.tokens gives
// one, and its hash): its name, tenant and rights checked as the file's
// are, its hash in HashOf's form.
func readToken(spec map[string]any) (object, error) {
	o := object{spec: spec}
	fields := maps.Clone(spec)
	delete(fields, "hash")
	text, err := json.Marshal(fields)
	if err != nil {
		return o, err
	}
	o.token, err = config.ReadToken(text)
	o.stored = store.Object{Kind: store.ObjectToken, Name: o.token.Name}
	if err != nil {
		return o, err
	}
	if o.token.Hash, _ = spec["hash"].(string); !apiauth.ValidHash(o.token.Hash) {
		return o, errors.New("hash: want the token's sha256:<hex>, as the gateway stores it")
	}
	return o, nil
}

// loadObjects reads the sources created through the API from the store,
// their secrets opened: at start, so that they survive a restart. One
// that cannot be read (its key is gone, its spec no longer reads) stops
// the start, naming it, rather than a gateway that answers its provider
// 404 or 401 without saying why.
//
// running, when given, are the objects the gateway runs: one stored
// unchanged since it was read (the same version, tenant and sealed bytes:
// one deleted and created again is sealed anew) is taken as it is, not
// opened and read again. A replica told of one change among a thousand
// objects read and parsed all thousand, and under a stream of changes
// that was most of what it did (internal/e2e/objects).
func loadObjects(ctx context.Context, st store.Store, box *secretbox.Box, running ...object) ([]object, error) {
	list, err := st.ListObjects(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read the sources and destinations created through the API: %w", err)
	}
	type key struct{ kind, name string }
	had := make(map[key]object, len(running))
	for _, o := range running {
		had[key{o.stored.Kind, o.stored.Name}] = o
	}
	out := []object{}
	var errs []error
	for _, so := range list {
		if isTombstone(so) {
			out = append(out, object{stored: so, tomb: true})
			continue
		}
		if o, ok := had[key{so.Kind, so.Name}]; ok && o.stored.Version == so.Version && o.stored.Tenant == so.Tenant &&
			len(so.Spec) > 0 && bytes.Equal(o.stored.Spec, so.Spec) {
			o.stored = so
			out = append(out, o)
			continue
		}
		spec, err := open(box, so)
		if err == nil {
			var o object
			if o, err = readObject(so.Kind, spec); err == nil {
				o.stored = so
				out = append(out, o)
				continue
			}
		}
		errs = append(errs, fmt.Errorf("%s %s (created through the API, version %d): %w", so.Kind, so.Name, so.Version, err))
	}
	return out, errors.Join(errs...)
}

// withObjects is cfg, the file's config, with objects merged in and
// checked whole, and its parts built (p, the file's alone, is closed):
// New's step once the store is open.
func withObjects(cfg *config.Config, objects []object, p *parts, kinds Kinds) (*config.Config, *parts, error) {
	if len(objects) == 0 {
		return cfg, p, nil
	}
	merged, err := cfg.Merge(sourcesOf(objects), destinationsOf(objects), tokensOf(objects)...)
	if err == nil {
		var np *parts
		if np, err = compileReusing(merged, checker{kinds: kinds}, p); err == nil {
			p.replacedBy(np)
			return merged, np, nil
		}
	}
	return nil, nil, fmt.Errorf("the sources and destinations created through the API do not fit the config file: %w", err)
}

// fileHas reports whether the config file names an object of kind.
func (g *Gateway) fileHas(kind, name string) bool {
	if kind == store.ObjectSource {
		return slices.ContainsFunc(g.file.Sources, func(s config.Source) bool { return s.Name == name })
	}
	return slices.ContainsFunc(g.file.Destinations, func(d config.Destination) bool { return d.Name == name })
}

// objectAt is the index of the API's object of kind and name in
// g.objects, or -1 (a tombstone's too: deleted).
func (g *Gateway) objectAt(kind, name string) int {
	return slices.IndexFunc(g.objects, func(o object) bool { return o.stored.Kind == kind && o.stored.Name == name && !o.tomb })
}

// tombAt is the index of the tombstone of kind and name in g.objects (a
// deleted object's), or -1.
func (g *Gateway) tombAt(kind, name string) int {
	return slices.IndexFunc(g.objects, func(o object) bool { return o.stored.Kind == kind && o.stored.Name == name && o.tomb })
}

// mergedIndex is where the API's object at i of objects is in the merged
// config's list of its kind (config.Merge puts the file's first).
func (g *Gateway) mergedIndex(objects []object, i int) int {
	n := len(g.file.Sources)
	switch objects[i].stored.Kind {
	case store.ObjectDestination:
		n = len(g.file.Destinations)
	case store.ObjectToken:
		n = len(g.file.API.Tokens)
	}
	for _, o := range objects[:i] {
		if o.stored.Kind == objects[i].stored.Kind && !o.tomb {
			n++
		}
	}
	return n
}

// StoredCatalog is Catalog of cfg, a config file's, with the sources and
// destinations created through the API that st keeps, each marked api:
// what an operator's command on the store directly (--config) lists, as
// the running gateway lists them. Their secrets stay sealed (a catalog
// shows none), so it needs no key.
func StoredCatalog(ctx context.Context, cfg *config.Config, st store.Store) ([]admin.Source, []admin.Destination, error) {
	list, err := st.ListObjects(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("read the sources and destinations created through the API: %w", err)
	}
	var objects []object
	for _, so := range list {
		if isTombstone(so) {
			continue
		}
		spec, err := decodeSpec(so.Spec)
		var o object
		if err == nil {
			o, err = readObject(so.Kind, spec)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s (created through the API, version %d): %w", so.Kind, so.Name, so.Version, err)
		}
		objects = append(objects, o)
	}
	merged, err := cfg.Merge(sourcesOf(objects), destinationsOf(objects))
	if err != nil {
		return nil, nil, err
	}
	sources, dests := catalog(merged)
	return sources, dests, nil
}

// StoredObjects are the sources and destinations created through the API
// that st keeps, as the API shows them (ObjectView: each secret as its
// fingerprint, each URL masked), by kind: what `oncehook export --config`
// writes without a running gateway. Their secrets are opened with the
// keys cfg's gateway would use (ONCEHOOK_SECRET_KEYS by getenv, or the
// config's secret_keys_file), only to take their fingerprints; without
// them it says which is sealed and how to set a key.
func StoredObjects(ctx context.Context, cfg *config.Config, st store.Store, getenv func(string) string) (sources, destinations []ObjectView, err error) {
	box, err := loadSecretKeys(cfg, getenv)
	if err != nil {
		return nil, nil, err
	}
	objects, err := loadObjects(ctx, st, box)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range objects {
		s := o.stored
		if o.tomb {
			continue // deleted
		}
		if s.Kind == store.ObjectToken {
			continue // a token is not exported: its value is kept nowhere
		}
		created, updated := s.CreatedAt.UTC(), s.UpdatedAt.UTC()
		// As a client reads an answer (JSON's maps and numbers), so that
		// export writes the same file from either.
		var spec map[string]any
		b, err := json.Marshal(shown(s.Kind, o.spec))
		if err == nil {
			err = json.Unmarshal(b, &spec)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", s.Kind, s.Name, err)
		}
		v := ObjectView{Name: s.Name, ManagedBy: "api", Spec: spec, Version: s.Version,
			CreatedAt: &created, UpdatedAt: &updated, CreatedBy: s.CreatedBy, UpdatedBy: s.UpdatedBy}
		if s.Kind == store.ObjectSource {
			sources = append(sources, v)
		} else {
			destinations = append(destinations, v)
		}
	}
	return sources, destinations, nil
}

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

	"github.com/oncehook/oncehook/config"
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

// object is a source created through the API, as the gateway runs it.
type object struct {
	stored store.Object   // as stored: its secrets sealed
	spec   map[string]any // as given, its secrets in clear
	source config.Source  // spec, read as the file's sources are
}

// sourcesOf are objects' sources, in order.
func sourcesOf(objects []object) []config.Source {
	out := make([]config.Source, len(objects))
	for i, o := range objects {
		out[i] = o.source
	}
	return out
}

// secretFields are a source's fields that hold secrets: sealed at rest,
// shown as fingerprints. A list's strings are sealed one by one.
var secretFields = []string{"secrets", "verify_token"}

// sealContext binds a sealed value to its object: copied to another
// object's row, it does not open.
// (A list's values share their field's: secrets[0] and secrets[1] are
// "secrets", so that a rotation may reorder them.)
func sealContext(kind, name, field string) string {
	field, _, _ = strings.Cut(field, "[")
	return kind + "/" + name + "/" + field
}

// errNoKeys is a secret given to a gateway without keys to seal it.
type errNoKeys struct{ field string }

func (e errNoKeys) Error() string {
	return e.field + ": this gateway has no key to encrypt secrets at rest, so it takes none through the API: " + secretbox.HowToSet
}

// mapSecrets returns spec with fn applied to each secret's value (a new
// map; spec is not changed).
func mapSecrets(spec map[string]any, fn func(field, v string) (any, error)) (map[string]any, error) {
	out := maps.Clone(spec)
	for _, f := range secretFields {
		switch v := spec[f].(type) {
		case string:
			if v == "" {
				continue
			}
			nv, err := fn(f, v)
			if err != nil {
				return nil, err
			}
			out[f] = nv
		case []any:
			list := make([]any, len(v))
			for i, e := range v {
				list[i] = e
				if s, ok := e.(string); ok && s != "" {
					nv, err := fn(fmt.Sprintf("%s[%d]", f, i), s)
					if err != nil {
						return nil, err
					}
					list[i] = nv
				}
			}
			out[f] = list
		}
	}
	return out, nil
}

// seal is spec as it is stored: each secret sealed with box (nil: a
// secret is errNoKeys).
func seal(box *secretbox.Box, kind, name string, spec map[string]any) ([]byte, error) {
	sealed, err := mapSecrets(spec, func(field, v string) (any, error) {
		if box == nil {
			return nil, errNoKeys{field}
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
	return mapSecrets(spec, func(field, v string) (any, error) {
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
// fingerprint ({"fingerprint": "sha256:..."}), never the secret.
func shown(spec map[string]any) map[string]any {
	out, _ := mapSecrets(spec, func(_, v string) (any, error) {
		return map[string]string{"fingerprint": secretbox.Fingerprint(v)}, nil
	})
	return out
}

// decodeSpec reads a JSON object, its numbers kept as written.
func decodeSpec(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var spec map[string]any
	if err := dec.Decode(&spec); err != nil || spec == nil {
		return nil, errors.New("want a JSON object of the config file's fields for a source (name, preset, secrets, destinations, ...)")
	}
	if dec.More() {
		return nil, errors.New("want one JSON object, and nothing after it")
	}
	return spec, nil
}

// readSource reads spec as the file's sources are read (config.ReadSource):
// the same field names, the same checks.
func readSource(spec map[string]any) (config.Source, error) {
	text, err := json.Marshal(spec)
	if err != nil {
		return config.Source{}, err
	}
	return config.ReadSource(text)
}

// loadObjects reads the sources created through the API from the store,
// their secrets opened: at start, so that they survive a restart. One
// that cannot be read (its key is gone, its spec no longer reads) stops
// the start, naming it, rather than a gateway that answers its provider
// 404 or 401 without saying why.
func loadObjects(ctx context.Context, st store.Store, box *secretbox.Box) ([]object, error) {
	list, err := st.ListObjects(ctx, store.ObjectSource)
	if err != nil {
		return nil, fmt.Errorf("read the sources created through the API: %w", err)
	}
	var out []object
	var errs []error
	for _, o := range list {
		spec, err := open(box, o)
		if err == nil {
			var src config.Source
			if src, err = readSource(spec); err == nil {
				out = append(out, object{stored: o, spec: spec, source: src})
				continue
			}
		}
		errs = append(errs, fmt.Errorf("source %s (created through the API, version %d): %w", o.Name, o.Version, err))
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
	merged, err := cfg.Merge(sourcesOf(objects))
	if err == nil {
		var np *parts
		if np, err = compile(merged, kinds); err == nil {
			p.close()
			return merged, np, nil
		}
	}
	return nil, nil, fmt.Errorf("the sources created through the API do not fit the config file: %w", err)
}

// fileSource reports whether the config file names a source name.
func (g *Gateway) fileSource(name string) bool {
	return slices.ContainsFunc(g.file.Sources, func(s config.Source) bool { return s.Name == name })
}

// objectAt is the index of the API's source name in g.objects, or -1.
func (g *Gateway) objectAt(name string) int {
	return slices.IndexFunc(g.objects, func(o object) bool { return o.source.Name == name })
}

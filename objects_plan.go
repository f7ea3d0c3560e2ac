package oncehook

import (
	"encoding/json"
	"slices"
	"strings"
)

// What `oncehook apply` needs of the objects' rules (#45): the merge
// patch that makes an API object what a file says, and what it would
// change, from the object as the API shows it (secrets as fingerprints,
// URLs masked), never its secrets.

// ObjectPatch is the JSON merge patch that makes the API's object of
// kind ("source" or "destination"), as GET shows it (shownSpec), what
// desired says (the object as a file writes it, its secrets in clear):
// every field desired gives, and null for each field it leaves out,
// except a secret's field (secrets, verify_token; a destination's secret,
// headers, transform.env) and a field kept says to keep (a secret whose
// variable is not set): the stored value stays. changed are the fields
// the patch would change as the API shows them ("secrets": a secret
// compared by fingerprint); a change inside a masked part of a URL (an
// api_key in its query) does not show there, and the gateway, which
// compares the values themselves, is the judge of it (a PATCH that
// changes nothing stores nothing).
func ObjectPatch(kind string, shownSpec, desired map[string]any, kept func(path string) bool) (patch map[string]any, changed []string) {
	shownSpec, desired = normalized(shownSpec), normalized(desired)
	patch = planPatch(kind, shownSpec, desired, "", kept)
	return patch, changedFields(shownSpec, mergePatch(shownSpec, normalized(shown(kind, patch))), "")
}

// normalized is m as JSON reads it back (numbers as json.Number, every
// mapping a map[string]any), so that two specs compare by value whoever
// decoded them.
func normalized(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		return m
	}
	out, err := decodeSpec(b)
	if err != nil {
		return m
	}
	return out
}

func planPatch(kind string, stored, desired map[string]any, prefix string, kept func(string) bool) map[string]any {
	out := make(map[string]any, len(desired))
	for k, dv := range desired {
		sm, sok := stored[k].(map[string]any)
		dm, dok := dv.(map[string]any)
		if sok && dok && !isFingerprint(sm) {
			out[k] = planPatch(kind, sm, dm, prefix+k+".", kept)
			continue
		}
		out[k] = dv
	}
	for k := range stored {
		if _, given := desired[k]; given || isSecretField(kind, prefix+k) || (kept != nil && kept(prefix+k)) {
			continue
		}
		out[k] = nil
	}
	return out
}

// isFingerprint reports whether m is a secret as the API shows it.
func isFingerprint(m map[string]any) bool {
	_, ok := m["fingerprint"]
	return ok && len(m) == 1
}

// isSecretField reports whether path (dotted) is a secret's field of
// kind, or under one.
func isSecretField(kind, path string) bool {
	return slices.ContainsFunc(secretFields[kind], func(f string) bool { return path == f || strings.HasPrefix(path, f+".") })
}

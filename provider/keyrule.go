package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// KeyRule extracts an event key from a header or a JSON path, or a
// composite of several, each part escaped and joined with ":" (see joinKey).
// A composite is found only when every part is found: a half key would merge
// events that differ.
type KeyRule struct {
	parts []keyPart
}

type keyPart struct {
	header string   // set for header:Name
	path   []string // set for json:a.b.c
}

// ParseKeyRule parses rules of the form "header:Name" and "json:a.b.c".
func ParseKeyRule(rules []string) (KeyRule, error) {
	var kr KeyRule
	for _, r := range rules {
		kind, arg, ok := strings.Cut(r, ":")
		if !ok || arg == "" {
			return kr, fmt.Errorf("key rule %q: want header:Name or json:path", r)
		}
		switch kind {
		case "header":
			kr.parts = append(kr.parts, keyPart{header: http.CanonicalHeaderKey(arg)})
		case "json":
			kr.parts = append(kr.parts, keyPart{path: strings.Split(arg, ".")})
		default:
			return kr, fmt.Errorf("key rule %q: unknown kind %q (want header or json)", r, kind)
		}
	}
	return kr, nil
}

// NeedsJSON reports whether any part reads the body.
func (kr KeyRule) NeedsJSON() bool {
	for _, p := range kr.parts {
		if p.path != nil {
			return true
		}
	}
	return false
}

// Values returns each part's value ("" for one not found). It returns
// ErrMalformed when a part reads a body that is not JSON.
func (kr KeyRule) Values(h http.Header, body []byte) ([]string, error) {
	var doc json.RawMessage
	if kr.NeedsJSON() {
		if err := decodeJSON(body, &doc); err != nil {
			return nil, err
		}
	}
	vals := make([]string, len(kr.parts))
	for i, p := range kr.parts {
		if p.header != "" {
			vals[i] = h.Get(p.header)
		} else {
			vals[i] = lookupJSON(doc, p.path)
		}
	}
	return vals, nil
}

// Extract returns the key, or "" when a part is missing. It returns
// ErrMalformed when a part reads a body that is not JSON.
func (kr KeyRule) Extract(h http.Header, body []byte) (string, error) {
	var doc json.RawMessage
	if kr.NeedsJSON() {
		if err := decodeJSON(body, &doc); err != nil {
			return "", err
		}
	}
	vals := make([]string, 0, len(kr.parts))
	for _, p := range kr.parts {
		var v string
		if p.header != "" {
			v = h.Get(p.header)
		} else {
			v = lookupJSON(doc, p.path)
		}
		if v == "" {
			return "", nil
		}
		vals = append(vals, v)
	}
	if len(vals) == 1 {
		return vals[0], nil // one part: every key of this rule has one, so it needs no escaping
	}
	return joinKey(vals...), nil
}

// lookupJSON follows path through objects (and arrays, by index) and returns
// a string or number as text (without loss: see keyText), a boolean as
// "true" or "false"; anything else is "".
func lookupJSON(doc json.RawMessage, path []string) string {
	v := rawField(doc, path)
	switch string(v) {
	case "true", "false":
		return string(v)
	}
	var k keyText
	k.UnmarshalJSON(v)
	return string(k)
}

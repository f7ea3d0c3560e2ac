package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// ReadSource reads one source as the API takes it: a JSON object with the
// file's field names (a source of sources: as it would be written there),
// each field checked as the file's are (an unknown field named with its
// closest known one, a value of the wrong type), and nothing expanded: a
// value given through the API is taken as sent, a "$" in a secret is a
// "$". What a source means with the rest of the config (its destinations
// exist, its preset takes its options) is checked where it is added to
// one (Merge, then a reload's check). Errors name the field as it is in
// the object ("preset", "destinations[0]").
func ReadSource(text []byte) (Source, error) { return readObject[Source](text) }

// ReadToken is ReadSource for an API token created through the API: its
// name, tenant, read_only, publish and pull, as api.tokens writes them.
// Its value is not among them: the gateway makes it, and keeps only its
// hash (APIToken.Hash, set by the caller).
func ReadToken(text []byte) (APIToken, error) {
	f, err := readObject[tokenFields](text)
	return APIToken{Name: f.Name, Tenant: f.Tenant, ReadOnly: f.ReadOnly, Publish: f.Publish, Pull: f.Pull}, err
}

// tokenFields are the fields of APIToken that a token created through
// the API is given.
type tokenFields struct {
	Name     string   `yaml:"name"`
	Tenant   string   `yaml:"tenant"`
	ReadOnly bool     `yaml:"read_only"`
	Publish  []string `yaml:"publish"`
	Pull     []string `yaml:"pull"`
}

// ReadDestination is ReadSource for a destination (one of destinations:).
func ReadDestination(text []byte) (Destination, error) { return readObject[Destination](text) }

func readObject[T any](text []byte) (T, error) {
	var v T
	root, err := objectNode(text)
	if err != nil {
		return v, err
	}
	var faulty pathSet
	if errs := checkNode(root, reflect.TypeFor[T](), "", &faulty, nil); len(errs) > 0 {
		return v, errors.Join(unlined(errs)...)
	}
	if err := root.Decode(&v); err != nil {
		return v, err
	}
	return v, nil
}

// objectNode is text's one JSON object (or YAML mapping) as a node.
func objectNode(text []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("want a JSON object of the config file's fields")
	}
	return doc.Content[0], nil
}

var lineSuffix = regexp.MustCompile(` \(line \d+\)`)

// unlined is errs without the " (line N)" that names a file's line: an
// API object has none.
func unlined(errs []error) []error {
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = errors.New(lineSuffix.ReplaceAllString(e.Error(), ""))
	}
	return out
}

// Merge is c, a config as its file gave it, with sources and
// destinations added after the file's (the ones created through the API),
// each given the defaults the file's get, and with tokens (the API's,
// each with its Hash) after api.tokens. c is not changed. A name the
// file already gives a source (a destination, a token) is an error naming
// the file: the file's objects are the file's.
func (c *Config) Merge(sources []Source, destinations []Destination, tokens ...APIToken) (*Config, error) {
	m := *c
	m.fromAPI = map[string]bool{}
	m.Sources = slices.Clone(c.Sources)
	m.Destinations = slices.Clone(c.Destinations)
	m.API.Tokens = slices.Clone(c.API.Tokens)
	var errs []error
	for _, t := range tokens {
		if slices.ContainsFunc(c.API.Tokens, func(f APIToken) bool { return f.Name == t.Name }) {
			errs = append(errs, fmt.Errorf("token %s: defined in the config file%s and created through the API: remove one (DELETE /v1/tokens/%s, or its entry in api.tokens)", t.Name, c.fileName(), t.Name))
			continue
		}
		m.API.Tokens = append(m.API.Tokens, t)
		m.fromAPI["token/"+t.Name] = true
	}
	for _, d := range destinations {
		if slices.ContainsFunc(c.Destinations, func(f Destination) bool { return f.Name == d.Name }) {
			errs = append(errs, fmt.Errorf("destination %s: defined in the config file%s and created through the API: remove one (DELETE /v1/destinations/%s, or its entry in the file)", d.Name, c.fileName(), d.Name))
			continue
		}
		m.Destinations = append(m.Destinations, d)
		m.fromAPI["destination/"+d.Name] = true
	}
	for _, s := range sources {
		if slices.ContainsFunc(c.Sources, func(f Source) bool { return f.Name == s.Name }) {
			errs = append(errs, fmt.Errorf("source %s: defined in the config file%s and created through the API: remove one (DELETE /v1/sources/%s, or its entry in the file)", s.Name, c.fileName(), s.Name))
			continue
		}
		m.Sources = append(m.Sources, s)
		m.fromAPI["source/"+s.Name] = true
	}
	if err := m.setDefaults(); err != nil {
		errs = append(errs, err)
	}
	return &m, errors.Join(errs...)
}

// SourceFromAPI reports whether the source named is one Merge added
// (created through the API), not the file's.
func (c *Config) SourceFromAPI(name string) bool { return c.fromAPI["source/"+name] }

// TokenFromAPI is SourceFromAPI for an API token.
func (c *Config) TokenFromAPI(name string) bool { return c.fromAPI["token/"+name] }

// DestinationFromAPI is SourceFromAPI for a destination.
func (c *Config) DestinationFromAPI(name string) bool { return c.fromAPI["destination/"+name] }

// fileName is " <the config's folder>" for an error that names where
// the config came from, or "".
func (c *Config) fileName() string {
	if c.dir == "" {
		return ""
	}
	return " (in " + c.dir + ")"
}

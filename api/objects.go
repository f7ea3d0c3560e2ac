package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// The sources and destinations created at runtime (#45): POST
// /v1/sources, GET, PATCH and DELETE /v1/sources/{name}, the same under
// /v1/destinations. The gateway serves them itself (they go through a
// reload's check and swap, not an admin.Operator); the Client calls them
// here. The list is the operator's: Sources and Destinations, each
// marked managed_by file or api.

// ObjectView is a source or destination as the API answers it.
type ObjectView struct {
	Name string `json:"name"`
	// ManagedBy is "api" (created through the API: it may change it) or
	// "file" (the config file's: change it there).
	ManagedBy string `json:"managed_by"`
	// Config is the file a file's object is in.
	Config string `json:"config,omitempty"`
	// IntakeURL is where the provider sends a source's webhooks (its
	// public_url when set); empty for a destination, or a source whose
	// events come from a queue or the outbox.
	IntakeURL string `json:"intake_url,omitempty"`
	// Spec is the object as given, each secret shown as its fingerprint.
	Spec      map[string]any `json:"spec,omitempty"`
	Version   int64          `json:"version,omitempty"`
	CreatedAt *time.Time     `json:"created_at,omitempty"`
	UpdatedAt *time.Time     `json:"updated_at,omitempty"`
	CreatedBy string         `json:"created_by,omitempty"`
	UpdatedBy string         `json:"updated_by,omitempty"`
	// Changed are the fields a PATCH changed, by their dotted path
	// ("secrets", "retry.max_attempts"): none, and the version as it
	// was, when the patch changed nothing (nothing is stored then, and no
	// audit entry written). Only a PATCH's answer has it.
	Changed []string `json:"changed,omitempty"`
}

// FieldError is one field at fault in an object refused as invalid (a
// 400's errors; Error.Fields on the Client's side).
type FieldError struct {
	Field string `json:"field"`
	Error string `json:"error"`
}

// The object routes, by kind.
var (
	sourceRoutes      = objectRoutes("sources")
	destinationRoutes = objectRoutes("destinations")
)

type objectRouteSet struct{ create, get, patch, delete jsonhttp.Route }

func objectRoutes(plural string) objectRouteSet {
	one := "/v1/" + plural + "/{name}"
	return objectRouteSet{
		create: jsonhttp.Route{Method: http.MethodPost, Path: "/v1/" + plural},
		get:    jsonhttp.Route{Method: http.MethodGet, Path: one},
		patch:  jsonhttp.Route{Method: http.MethodPatch, Path: one},
		delete: jsonhttp.Route{Method: http.MethodDelete, Path: one},
	}
}

// CreateSource creates a source through the API: spec is the source as
// the config file writes it, under its field names (a map, a struct with
// json tags, or a json.RawMessage). The answer carries its intake URL.
// A name the file or the API has is a 409, an invalid field a 400 whose
// Error names it (Error.Fields has every one).
func (c *Client) CreateSource(ctx context.Context, spec any) (ObjectView, error) {
	return c.createObject(ctx, sourceRoutes, spec)
}

// Source reads one source, the file's (managed_by file, no spec) or the
// API's (its spec, secrets as fingerprints, and version).
func (c *Client) Source(ctx context.Context, name string) (ObjectView, error) {
	return c.object(ctx, sourceRoutes, name)
}

// UpdateSource changes an API source by a JSON merge patch (RFC 7396): a
// field given replaces it, a field given null goes back to its default,
// a field left out stays. ifVersion, when not 0, is the version it must
// be at (412 otherwise: another change came first).
func (c *Client) UpdateSource(ctx context.Context, name string, patch any, ifVersion int64) (ObjectView, error) {
	return c.patchObject(ctx, sourceRoutes, name, patch, ifVersion)
}

// DeleteSource removes an API source: its intake answers 404 from then
// on; its events stay. ifVersion as UpdateSource's.
func (c *Client) DeleteSource(ctx context.Context, name string, ifVersion int64) error {
	return c.deleteObject(ctx, sourceRoutes, name, ifVersion)
}

// CreateDestination is CreateSource for a destination.
func (c *Client) CreateDestination(ctx context.Context, spec any) (ObjectView, error) {
	return c.createObject(ctx, destinationRoutes, spec)
}

// Destination is Source for a destination.
func (c *Client) Destination(ctx context.Context, name string) (ObjectView, error) {
	return c.object(ctx, destinationRoutes, name)
}

// UpdateDestination is UpdateSource for a destination.
func (c *Client) UpdateDestination(ctx context.Context, name string, patch any, ifVersion int64) (ObjectView, error) {
	return c.patchObject(ctx, destinationRoutes, name, patch, ifVersion)
}

// DeleteDestination removes an API destination; one a source routes to
// is a 409 naming the route.
func (c *Client) DeleteDestination(ctx context.Context, name string, ifVersion int64) error {
	return c.deleteObject(ctx, destinationRoutes, name, ifVersion)
}

func (c *Client) createObject(ctx context.Context, rs objectRouteSet, spec any) (ObjectView, error) {
	var out ObjectView
	err := c.doHeader(ctx, rs.create, nil, nil, nil, spec, &out)
	return out, err
}

func (c *Client) object(ctx context.Context, rs objectRouteSet, name string) (ObjectView, error) {
	var out ObjectView
	err := c.doHeader(ctx, rs.get, []string{name}, nil, nil, nil, &out)
	return out, err
}

func (c *Client) patchObject(ctx context.Context, rs objectRouteSet, name string, patch any, ifVersion int64) (ObjectView, error) {
	var out ObjectView
	err := c.doHeader(ctx, rs.patch, []string{name}, nil, ifMatch(ifVersion), patch, &out)
	return out, err
}

func (c *Client) deleteObject(ctx context.Context, rs objectRouteSet, name string, ifVersion int64) error {
	return c.doHeader(ctx, rs.delete, []string{name}, nil, ifMatch(ifVersion), nil, nil)
}

// ifMatch is the If-Match of a change at version v (none for 0).
func ifMatch(v int64) http.Header {
	if v == 0 {
		return nil
	}
	return http.Header{"If-Match": {strconv.Quote(strconv.FormatInt(v, 10))}}
}

// TokenView is an API token as the API answers it (GET /v1/tokens): never
// its value, but on the answer to its create (Token), once.
type TokenView struct {
	Name string `json:"name"`
	// ManagedBy is "api" (created through the API: DELETE revokes it) or
	// "file" (api.tokens in the config file: change it there).
	ManagedBy string `json:"managed_by"`
	// Config is the file a file's token is in.
	Config   string   `json:"config,omitempty"`
	Tenant   string   `json:"tenant,omitempty"`
	ReadOnly bool     `json:"read_only,omitempty"`
	Publish  []string `json:"publish,omitempty"`
	Pull     []string `json:"pull,omitempty"`
	// Fingerprint tells a token's value from another's
	// ("sha256:" and the first 6 bytes of its SHA-256, hex), without
	// giving it.
	Fingerprint string `json:"fingerprint"`
	// Token is the token's value: only in the answer to its create, and
	// nowhere ever again (the gateway keeps its hash only).
	Token     string     `json:"token,omitempty"`
	Version   int64      `json:"version,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	CreatedBy string     `json:"created_by,omitempty"`
}

// TokenSpec is what a token is created with (POST /v1/tokens): a tenant's
// token makes its own tenant's only, with no more than it may do.
type TokenSpec struct {
	Name     string   `json:"name"`
	Tenant   string   `json:"tenant,omitempty"`
	ReadOnly bool     `json:"read_only,omitempty"`
	Publish  []string `json:"publish,omitempty"`
	Pull     []string `json:"pull,omitempty"`
}

var (
	tokensRoute = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/tokens"}
	tokenRoutes = objectRoutes("tokens")
)

// CreateToken creates an API token; the answer's Token is its value,
// shown this once.
func (c *Client) CreateToken(ctx context.Context, spec TokenSpec) (TokenView, error) {
	var out TokenView
	err := c.doHeader(ctx, tokenRoutes.create, nil, nil, nil, spec, &out)
	return out, err
}

// Tokens lists the API tokens the caller may see: the file's and the
// API's (a tenant's token: its tenant's), without their values.
func (c *Client) Tokens(ctx context.Context) ([]TokenView, error) {
	var out struct {
		Tokens []TokenView `json:"tokens"`
	}
	err := c.doHeader(ctx, tokensRoute, nil, nil, nil, nil, &out)
	return out.Tokens, err
}

// Token reads one API token, without its value.
func (c *Client) Token(ctx context.Context, name string) (TokenView, error) {
	var out TokenView
	err := c.doHeader(ctx, tokenRoutes.get, []string{name}, nil, nil, nil, &out)
	return out, err
}

// DeleteToken revokes an API token created through the API, on every
// replica; one of the config file's is a 409.
func (c *Client) DeleteToken(ctx context.Context, name string) error {
	return c.doHeader(ctx, tokenRoutes.delete, []string{name}, nil, nil, nil, nil)
}

// Package api is the operator's HTTP API, under /v1 on the gateway's API
// listener: Register serves an admin.Operator (the gateway's Service), and
// Client is an admin.Operator over HTTP (what `oncehook ... --api` uses).
// Both read one route table, so a path is written once. docs/api.md is the
// reference.
package api

import (
	"net/http"

	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// The routes, for Register and the Client alike.
var (
	routeSources      = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/sources"}
	routeStats        = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/stats"}
	routeEvents       = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/events"}
	routeReplayEvents = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/events/replay"}
	routeEvent        = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/events/{id}"}
	routeReplayEvent  = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/events/{id}/replay"}
	routeDeliverEvent = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/events/{id}/deliver"}
	routeSkipEvent    = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/events/{id}/skip"}
	routeResetOrder   = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/sources/{name}/order/reset"}
	routeDeadLetters  = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/dead-letters"}
	routeRetryDead    = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/dead-letters/retry"}
	routePurgeDead    = jsonhttp.Route{Method: http.MethodDelete, Path: "/v1/dead-letters"}
	routeDestinations = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/destinations"}
	routePause        = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/destinations/{name}/pause"}
	routeResume       = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/destinations/{name}/resume"}
	routeBreakerOpen  = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/destinations/{name}/breaker/open"}
	routeBreakerClose = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/destinations/{name}/breaker/close"}
	routeAudit        = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/audit"}
	routeDoctor       = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/doctor"}
	routeReload       = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/reload"}
)

// Package api is the operator's HTTP API, under /v1 on the gateway's API
// listener: Register serves an admin.Operator (the gateway's Service), and
// Client is an admin.Operator over HTTP (what `oncehook ... --api` uses).
// Both read one route table, so a path is written once. docs/api.md is the
// reference.
package api

import (
	"net/http"

	"github.com/oncehook/oncehook/internal/httpapi"
)

// The routes, for Register and the Client alike.
var (
	routeSources      = httpapi.Route{Method: http.MethodGet, Path: "/v1/sources"}
	routeStats        = httpapi.Route{Method: http.MethodGet, Path: "/v1/stats"}
	routeEvents       = httpapi.Route{Method: http.MethodGet, Path: "/v1/events"}
	routeReplayEvents = httpapi.Route{Method: http.MethodPost, Path: "/v1/events/replay"}
	routeEvent        = httpapi.Route{Method: http.MethodGet, Path: "/v1/events/{id}"}
	routeReplayEvent  = httpapi.Route{Method: http.MethodPost, Path: "/v1/events/{id}/replay"}
	routeDeliverEvent = httpapi.Route{Method: http.MethodPost, Path: "/v1/events/{id}/deliver"}
	routeSkipEvent    = httpapi.Route{Method: http.MethodPost, Path: "/v1/events/{id}/skip"}
	routeResetOrder   = httpapi.Route{Method: http.MethodPost, Path: "/v1/sources/{name}/order/reset"}
	routeDeadLetters  = httpapi.Route{Method: http.MethodGet, Path: "/v1/dead-letters"}
	routeRetryDead    = httpapi.Route{Method: http.MethodPost, Path: "/v1/dead-letters/retry"}
	routePurgeDead    = httpapi.Route{Method: http.MethodDelete, Path: "/v1/dead-letters"}
	routeDestinations = httpapi.Route{Method: http.MethodGet, Path: "/v1/destinations"}
	routePause        = httpapi.Route{Method: http.MethodPost, Path: "/v1/destinations/{name}/pause"}
	routeResume       = httpapi.Route{Method: http.MethodPost, Path: "/v1/destinations/{name}/resume"}
	routeBreakerOpen  = httpapi.Route{Method: http.MethodPost, Path: "/v1/destinations/{name}/breaker/open"}
	routeBreakerClose = httpapi.Route{Method: http.MethodPost, Path: "/v1/destinations/{name}/breaker/close"}
	routeAudit        = httpapi.Route{Method: http.MethodGet, Path: "/v1/audit"}
	routeDoctor       = httpapi.Route{Method: http.MethodGet, Path: "/v1/doctor"}
	routeReload       = httpapi.Route{Method: http.MethodPost, Path: "/v1/reload"}
)

package oncehook

import (
	"net/http"

	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/forwarded"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/receive"
)

// PublishRoute is the outbox over HTTP, on the API listener: for the
// user's services not written in Go, or not on the gateway's database.
const PublishRoute = "POST /v1/publish/{source}"

// reasonInvalidKey counts a publish refused for its Idempotency-Key (one
// ParseKey cannot read: not printable ASCII, over 255 characters, given
// twice): the reason its 400 answers with.
const reasonInvalidKey = "invalid"

// publish serves PublishRoute behind apiauth's WrapPublish: the body is
// one event of an outbox source, its key the Idempotency-Key header, read
// as the proxy reads it (else the source's key rules over the body). It is claimed through Accept,
// as intake claims a request's events, and answered only once durable:
// 202 accepted, 200 duplicate (published before: nothing written, no
// second delivery), or intake's rejections.
//
// It cannot join the caller's transaction: a caller that commits and
// then dies before its publish is answered publishes again with the same
// key (a duplicate if the first one made it), which its reconciliation
// pass does for every row it wrote.
func (g *Gateway) publish(w http.ResponseWriter, r *http.Request) {
	source := r.PathValue("source")
	cfg := g.cfg.Load()
	if !isOutbox(cfg, source) {
		// Counted as intake counts a request for a source it lacks: under
		// no source (the name is the caller's, not the config's).
		g.metrics.Request("", receive.ReasonUnknownSource)
		jsonhttp.WriteError(w, http.StatusNotFound, receive.ReasonUnknownSource, "no outbox source named "+source+" (outbox: true)")
		return
	}
	// The key is read as the proxy reads one (idempotency.ParseKey):
	// "ord_q1" and ord_q1 are one event, and the header given twice is
	// refused rather than one of its values taken. A refused key is
	// counted under its source, by the answer's reason, as intake counts
	// every refusal.
	key, err := idempotency.KeyFrom(r.Header)
	if err != nil {
		g.intake.Refuse(r.Context(), source, forwarded.ClientAddr(r, nil), http.StatusBadRequest, reasonInvalidKey, err.Error())
		idempotency.RefuseKey(w, err)
		return
	}
	body, done, err := g.intake.ReadBody(w, r, g.intake.MaxBodySize())
	if err != nil {
		receive.BodyRejection(err).Answer(w)
		return
	}
	defer done()
	// The caller's credentials are not the event's: no rule reads them,
	// and nothing stores them.
	header := r.Header.Clone()
	header.Del("Authorization")
	header.Del("Cookie")
	client := forwarded.ClientAddr(r, nil)
	if c, ok := apiauth.CallerOf(r.Context()); ok {
		client = "token:" + c.Name + " " + client
	}
	resp, err := g.intake.Accept(r.Context(), source, receive.Envelope{
		Header: header, Body: body, SkipVerify: true, Key: key, Client: client,
	})
	if rej, ok := err.(*receive.Rejection); ok {
		rej.Answer(w)
		return
	}
	if err != nil {
		jsonhttp.WriteError(w, http.StatusServiceUnavailable, receive.ReasonUnavailable, "the event could not be stored; retry later")
		return
	}
	status := http.StatusOK
	if resp.Status == receive.StatusAccepted {
		status = http.StatusAccepted
	}
	jsonhttp.WriteJSON(w, status, resp)
}

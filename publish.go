package oncehook

import (
	"fmt"
	"net/http"
	"strconv"

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
// second delivery), or intake's rejections. ?reconcile=true marks a
// reconciliation pass (receive.Envelope.Reconcile): a key published before
// is answered 200 republished and counted so, not as a duplicate.
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
	reconcile, err := reconcileParam(r)
	if err != nil {
		g.intake.Refuse(r.Context(), source, forwarded.ClientAddr(r, nil), http.StatusBadRequest, reasonInvalidKey, err.Error())
		jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: err.Error(), Reason: reasonInvalidKey, Field: "reconcile"})
		return
	}
	if rej := g.intake.Admit(r.Context(), source); rej != nil {
		rej.Answer(w)
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
		Header: header, Body: body, SkipVerify: true, Key: key, Client: client, Reconcile: reconcile,
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

// reconcileParam reads ?reconcile: absent is false; true or false (1 or 0,
// as strconv reads them) otherwise. Anything else, or the parameter given
// twice, is refused rather than guessed: a pass counted as a provider's
// duplicates would raise the very alert it must not.
func reconcileParam(r *http.Request) (bool, error) {
	values, ok := r.URL.Query()["reconcile"]
	if !ok {
		return false, nil
	}
	if len(values) != 1 {
		return false, fmt.Errorf("reconcile: give the parameter once (it came %d times)", len(values))
	}
	v, err := strconv.ParseBool(values[0])
	if err != nil {
		given := values[0]
		if len(given) > 40 {
			given = given[:40] + "..."
		}
		return false, fmt.Errorf("reconcile: %q is not true or false", given)
	}
	return v, nil
}

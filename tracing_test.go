package oncehook_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	oncehook "github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// One event's trace, as an operator's tracing backend sees it: the intake
// request's span, its claim (the wait for the durable commit) under it,
// and each delivery attempt under it too, in the same trace; the
// destination receives a traceparent naming the attempt's span, so the
// user's service continues the trace. A destination that turns it off
// gets none. The effects API continues the caller's trace.
func TestOneEventsTraceRunsFromIntakeIntoTheDestination(t *testing.T) {
	const token = "ops-token-0123456789"
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	var mu sync.Mutex
	got := map[string]string{} // destination → traceparent received
	sink := func(name string) string {
		s := testenv.NewSink(t)
		s.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
			mu.Lock()
			got[name] = r.Header.Get("Traceparent")
			mu.Unlock()
		}
		return s.URL
	}
	gw := oncehooktest.StartWith(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+token+`}]}
sources:
  - {name: hooks, preset: generic, unsigned: true, key: ["json:id"], destinations: [app, quiet]}
destinations:
  - {name: app, url: `+sink("app")+`}
  - {name: quiet, url: `+sink("quiet")+`, traceparent: false}
`, oncehook.Options{TracerProvider: tp})
	resp, err := http.Post(gw.URL+"/in/hooks", "application/json", strings.NewReader(`{"id":"evt_traced"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("intake: %v %v", resp, err)
	}
	resp.Body.Close()
	if !testenv.WaitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 }) {
		t.Fatalf("delivered to %v", got)
	}
	var intake, claim sdktrace.ReadOnlySpan
	attempts := map[string]sdktrace.ReadOnlySpan{}
	if !testenv.WaitFor(5*time.Second, func() bool {
		for _, s := range spans.GetSpans().Snapshots() {
			switch {
			case s.Name() == "receive hooks":
				intake = s
			case s.Name() == "claim":
				claim = s
			case strings.HasPrefix(s.Name(), "deliver "):
				attempts[strings.TrimPrefix(s.Name(), "deliver ")] = s
			}
		}
		return intake != nil && claim != nil && len(attempts) == 2
	}) {
		t.Fatalf("spans: intake %v, claim %v, attempts %v", intake != nil, claim != nil, len(attempts))
	}
	trace0 := intake.SpanContext().TraceID()
	if intake.SpanKind() != trace.SpanKindServer || !hasAttr(intake, "oncehook.verdict", "accepted") {
		t.Fatalf("intake span %v %v", intake.SpanKind(), intake.Attributes())
	}
	if claim.Parent().SpanID() != intake.SpanContext().SpanID() {
		t.Fatal("the claim is not under the intake span")
	}
	for name, a := range attempts {
		if a.SpanContext().TraceID() != trace0 || a.Parent().SpanID() != intake.SpanContext().SpanID() {
			t.Fatalf("attempt to %s is not in the intake's trace, under its span", name)
		}
		if !hasAttr(a, "oncehook.outcome", "delivered") || !hasAttr(a, "oncehook.key", "hooks:evt_traced") {
			t.Fatalf("attempt to %s: %v", name, a.Attributes())
		}
	}
	mu.Lock()
	tpApp, tpQuiet := got["app"], got["quiet"]
	mu.Unlock()
	want := "00-" + trace0.String() + "-" + attempts["app"].SpanContext().SpanID().String() + "-01"
	if tpApp != want {
		t.Fatalf("app received traceparent %q, want %q (the attempt's span)", tpApp, want)
	}
	if tpQuiet != "" {
		t.Fatalf("quiet (traceparent: false) received %q", tpQuiet)
	}

	// The effects API continues the caller's trace.
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req, _ := http.NewRequest(http.MethodPost, gw.APIURL+"/v1/effects/invoice:1/claim", strings.NewReader(`{"lease":"30s"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", caller)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("claim: %v %v", resp, err)
	}
	resp.Body.Close()
	parent := propagation.TraceContext{}.Extract(t.Context(), propagation.MapCarrier{"traceparent": caller})
	pc := trace.SpanContextFromContext(parent)
	found := false
	for _, s := range spans.GetSpans().Snapshots() {
		if strings.HasPrefix(s.Name(), "effects ") && s.SpanContext().TraceID() == pc.TraceID() && s.Parent().SpanID() == pc.SpanID() {
			found = hasAttr(s, "oncehook.effect", "invoice:1")
		}
	}
	if !found {
		t.Fatal("no effects span in the caller's trace, under its span, naming the key")
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, a := range s.Attributes() {
		if string(a.Key) == key && a.Value.Emit() == value {
			return true
		}
	}
	return false
}

// Invariant 17 in traces: a request's traceparent is anybody's until its
// signature is verified. The intake span is a root of the gateway's own,
// linked to the caller's context and sampled by the gateway's sampler: 100
// rejected requests that claim a sampled trace are exported under none of
// the client's trace ids, and not at all with the sampler at 0. Before, they
// were all exported under the client's trace id, whatever the sampler.
func TestAStrangersTraceparentIsOnlyALink(t *testing.T) {
	for _, ratio := range []float64{0, 1} {
		t.Run(fmt.Sprintf("sampler %v", ratio), func(t *testing.T) {
			spans := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
			gw := oncehooktest.StartWith(t, stripeConfig(testenv.NewSink(t).URL, ""), oncehook.Options{TracerProvider: tp})
			const requests = 100
			clients := map[trace.TraceID]bool{}
			for i := range requests {
				traceID := fmt.Sprintf("%032x", 0xc0ffee0000+i)
				req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/stripe", strings.NewReader(string(stripeEvent(fmt.Sprintf("evt_forged_%d", i)))))
				req.Header.Set("Stripe-Signature", "t=1,v1=00")
				req.Header.Set("Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("forged request %d: %d, want 401", i, resp.StatusCode)
				}
				id, _ := trace.TraceIDFromHex(traceID)
				clients[id] = true
			}
			intake := 0
			for _, s := range spans.GetSpans().Snapshots() {
				if clients[s.SpanContext().TraceID()] {
					t.Fatalf("span %q exported under the client's trace id %s", s.Name(), s.SpanContext().TraceID())
				}
				if s.Name() != "receive stripe" {
					continue
				}
				intake++
				if s.Parent().IsValid() || len(s.Links()) != 1 || !clients[s.Links()[0].SpanContext.TraceID()] {
					t.Fatalf("intake span: parent %v, links %v: want a root linked to the caller", s.Parent(), s.Links())
				}
			}
			if want := int(ratio * requests); intake != want {
				t.Fatalf("%d intake spans exported with the sampler at %v, want %d", intake, ratio, want)
			}
		})
	}
}

package route

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A Stripe event of about 1 KiB, as intake holds it.
var benchBody = []byte(`{"id":"evt_1PxYz","object":"event","api_version":"2024-06-20","created":1733050000,"livemode":true,
"type":"charge.dispute.created","data":{"object":{"id":"dp_1","object":"dispute","amount":15000,"currency":"brl",
"charge":"ch_1","reason":"fraudulent","status":"needs_response","metadata":{"order":"A-1001","channel":"web"},
"evidence_details":{"due_by":1733650000,"has_evidence":false,"past_due":false,"submission_count":0}}},
"pending_webhooks":3,"request":{"id":null,"idempotency_key":null}}` + strings.Repeat(" ", 400))

// One filter on one event: the body decoded once, then matched.
func BenchmarkFilterMatch(b *testing.B) {
	f, err := Compile(map[string]any{"body": map[string]any{
		"type": map[string]any{"$startsWith": "charge.dispute."},
		"data": map[string]any{"object": map[string]any{"amount": map[string]any{"$gte": 10000}}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		if !f.Match(&Input{Body: benchBody}) {
			b.Fatal("no match")
		}
	}
}

// Ten destinations' routes on one event: types and filters, the body
// decoded once for all of them.
func BenchmarkPickTenRoutes(b *testing.B) {
	var rs Routes
	for i := range 10 {
		f, err := Compile(map[string]any{"body": map[string]any{"data": map[string]any{"object": map[string]any{
			"amount": map[string]any{"$gte": 1000 * i}, "currency": "brl"}}}})
		if err != nil {
			b.Fatal(err)
		}
		r := Route{Destination: fmt.Sprintf("d%d", i), Filter: f}
		if i%2 == 0 {
			r.Types = []string{"charge.*", "invoice.*"}
		}
		rs = append(rs, r)
	}
	h := http.Header{"Stripe-Signature": {"t=1,v1=abc"}}
	plan := rs.Plan() // as a source makes it when it is loaded
	for b.Loop() {
		want, _ := plan.Pick("charge.dispute.created", &Input{Body: benchBody, Header: h})
		if len(want) != 10 {
			b.Fatalf("picked %d", len(want))
		}
	}
}

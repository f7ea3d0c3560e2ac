package route

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func mustJSON(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// The filter language against a table: the examples of Hookdeck's filter
// docs (hookdeck.com/docs/filters, "Filters syntax") and Convoy's
// (getconvoy.io/docs/product-manual/filters), which a rule copied from
// either must mean the same here, then every operator.
func TestFilterMatches(t *testing.T) {
	cases := []struct {
		name, filter, body string
		want               bool
	}{
		// Hookdeck, simple matches.
		{"hookdeck single value", `false`, `false`, true},
		{"hookdeck primitive", `{"type":"order/created"}`, `{"type":"order/created","order":{"id":123}}`, true},
		{"hookdeck nested object", `{"product":{"inventory":0}}`, `{"product":{"title":"A product","inventory":0}}`, true},
		{"hookdeck nested in an array", `{"order":{"items":{"id":456}}}`, `{"order":{"id":123,"items":[{"id":456,"title":"My product"}]}}`, true},
		{"hookdeck array contains", `{"product":{"tags":"gift"}}`, `{"product":{"title":"Gift Card","tags":["gift","something"]}}`, true},
		{"hookdeck array contains all", `{"product":{"tags":["gift","something"]}}`, `{"product":{"tags":["gift","something","another"]}}`, true},
		{"hookdeck array lacks one", `{"product":{"tags":["gift","missing"]}}`, `{"product":{"tags":["gift","something"]}}`, false},
		// Convoy's examples.
		{"convoy direct", `{"event_type":"created"}`, `{"event_type":"created"}`, true},
		{"convoy nested", `{"event":{"type":"created"}}`, `{"event":{"type":"created"}}`, true},
		{"convoy array contains", `{"dish":{"ingredients":"rice"}}`, `{"dish":{"ingredients":["beans","rice"]}}`, true},
		{"convoy $neq", `{"event":{"$neq":"created"}}`, `{"event":"updated"}`, true},
		{"convoy $neq equal", `{"event":{"$neq":"created"}}`, `{"event":"created"}`, false},
		{"convoy $or", `{"$or":[{"cities":"london"},{"cities":"lagos"}]}`, `{"cities":["paris","lagos"]}`, true},
		// Every operator.
		{"$eq", `{"amount":{"$eq":100}}`, `{"amount":100}`, true},
		{"$eq number forms", `{"amount":100}`, `{"amount":100.0}`, true},
		{"$in", `{"status":{"$in":["paid","refunded"]}}`, `{"status":"paid"}`, true},
		{"$in miss", `{"status":{"$in":["paid","refunded"]}}`, `{"status":"open"}`, false},
		{"$nin", `{"status":{"$nin":["paid"]}}`, `{"status":"open"}`, true},
		{"$nin on an array", `{"tags":{"$nin":["spam"]}}`, `{"tags":["a","spam"]}`, false},
		{"$gte", `{"data":{"object":{"amount":{"$gte":10000}}}}`, `{"data":{"object":{"amount":25000}}}`, true},
		{"$gte below", `{"data":{"object":{"amount":{"$gte":10000}}}}`, `{"data":{"object":{"amount":9999}}}`, false},
		{"$gt $lt range", `{"n":{"$gt":1,"$lt":3}}`, `{"n":2}`, true},
		{"$lte string", `{"d":{"$lte":"2026-12-01"}}`, `{"d":"2026-11-30"}`, true},
		{"$gt wrong kind", `{"n":{"$gt":1}}`, `{"n":"2"}`, false},
		{"$exist", `{"refund":{"$exist":true}}`, `{"refund":{"id":1}}`, true},
		{"$exist false", `{"refund":{"$exist":false}}`, `{"charge":1}`, true},
		{"$exist false present", `{"refund":{"$exist":false}}`, `{"refund":1}`, false},
		{"$startsWith", `{"type":{"$startsWith":"charge.dispute."}}`, `{"type":"charge.dispute.created"}`, true},
		{"$endsWith", `{"email":{"$endsWith":"@example.com"}}`, `{"email":"jo@example.com"}`, true},
		{"$regex", `{"sku":{"$regex":"^BR-[0-9]+$"}}`, `{"sku":"BR-123"}`, true},
		{"$regex miss", `{"sku":{"$regex":"^BR-[0-9]+$"}}`, `{"sku":"US-123"}`, false},
		{"$and", `{"$and":[{"a":1},{"b":2}]}`, `{"a":1,"b":2}`, true},
		{"$and one fails", `{"$and":[{"a":1},{"b":2}]}`, `{"a":1,"b":3}`, false},
		{"$not", `{"$not":{"type":"test"}}`, `{"type":"live"}`, true},
		{"missing field", `{"a":{"b":1}}`, `{"c":1}`, false},
		{"null", `{"a":null}`, `{"a":null}`, true},
		{"not JSON", `{"a":1}`, `not json`, false},
		{"not JSON, absence asked", `{"a":{"$exist":false}}`, `not json`, true},
		// The issue's own example: Stripe disputes of R$100 or more.
		{"stripe disputes", `{"type":{"$startsWith":"charge.dispute."},"data":{"object":{"amount":{"$gte":10000}}}}`,
			`{"type":"charge.dispute.created","data":{"object":{"amount":15000}}}`, true},
	}
	for _, c := range cases {
		f, err := Compile(map[string]any{"body": mustJSON(t, c.filter)})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := f.Match(&Input{Body: []byte(c.body)}); got != c.want {
			t.Errorf("%s: filter %s on %s = %v, want %v", c.name, c.filter, c.body, got, c.want)
		}
	}
}

func TestFilterReadsHeadersQueryAndPath(t *testing.T) {
	f, err := Compile(mustJSON(t, `{"headers":{"x-shopify-topic":{"$startsWith":"orders/"}},"query":{"env":"live"},"path":{"$endsWith":"/shop"}}`))
	if err != nil {
		t.Fatal(err)
	}
	in := func(topic, env, path string) *Input {
		return &Input{Header: http.Header{"X-Shopify-Topic": {topic}}, Query: url.Values{"env": {env}}, Path: path}
	}
	if !f.Match(in("orders/paid", "live", "/in/shop")) {
		t.Error("all three parts match: want a match")
	}
	for _, miss := range []*Input{in("products/create", "live", "/in/shop"), in("orders/paid", "test", "/in/shop"), in("orders/paid", "live", "/in/other")} {
		if f.Match(miss) {
			t.Errorf("%+v matched", miss)
		}
	}
}

// The config check compiles every filter and names the path of a bad one.
func TestCompileNamesWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ filter, want string }{
		{`{"body":{"amount":{"$gte":[1]}}}`, "body.amount.$gte"},
		{`{"body":{"a":{"$regex":"("}}}`, "body.a.$regex"},
		{`{"body":{"a":{"$bogus":1}}}`, "body.a.$bogus: no such operator"},
		{`{"body":{"$or":[]}}`, "body.$or"},
		{`{"bodee":{}}`, "bodee: want body"},
		{`["body"]`, "want an object"},
		{`{"body":{"a":{"$exist":"yes"}}}`, "body.a.$exist"},
	} {
		_, err := Compile(mustJSON(t, c.filter))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.filter, err, c.want)
		}
	}
	deep := `{"body":` + strings.Repeat(`{"a":`, MaxDepth+1) + `1` + strings.Repeat(`}`, MaxDepth+1) + `}`
	if _, err := Compile(mustJSON(t, deep)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("a filter nested %d deep: %v", MaxDepth+1, err)
	}
}

func TestTypes(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{[]string{"invoice.*", "customer.subscription.*"}, "invoice.paid", true},
		{[]string{"invoice.*", "customer.subscription.*"}, "customer.subscription.deleted", true},
		{[]string{"invoice.*"}, "invoicex", false},
		{[]string{"PURCHASE_APPROVED"}, "PURCHASE_APPROVED", true},
		{[]string{"PURCHASE_APPROVED"}, "PURCHASE_CANCELED", false},
		{[]string{"invoice.*"}, "", false},
		{[]string{"*"}, "", true},
	} {
		if got := MatchType(c.patterns, c.typ); got != c.want {
			t.Errorf("%q on %q = %v", c.patterns, c.typ, got)
		}
	}
	if CheckTypes([]string{"in*voice"}) == nil || CheckTypes([]string{""}) == nil || CheckTypes([]string{"invoice.*"}) != nil {
		t.Error("CheckTypes")
	}
	// The error names the pattern's place in the list, not the star's.
	if err := CheckTypes([]string{"invoice.*", "in*voice"}); err == nil || !strings.HasPrefix(err.Error(), `types[1] "in*voice"`) {
		t.Errorf("CheckTypes names %v", err)
	}
	rs := Routes{{Destination: "billing", Types: []string{"invoice.*"}}, {Destination: "audit"}}
	want, skip := rs.Pick("charge.succeeded", &Input{})
	if len(want) != 1 || want[0] != "audit" || len(skip) != 1 || skip[0] != "billing" {
		t.Errorf("Pick: want %q skip %q", want, skip)
	}
}

// A filter never panics and never loops, whatever it is compiled from and
// whatever it reads.
func FuzzFilter(f *testing.F) {
	f.Add(`{"body":{"type":{"$startsWith":"charge."},"data":{"object":{"amount":{"$gte":100}}}}}`, `{"type":"charge.x","data":{"object":{"amount":150}}}`)
	f.Add(`{"body":{"$or":[{"a":[1,2]},{"$not":{"b":{"$regex":"^x+$"}}}]}}`, `{"a":[1,2,3],"b":"xxx"}`)
	f.Add(`{"body":{"tags":{"$nin":["a"]},"n":{"$in":[1,"1",null,true]}}}`, `[{"tags":"a"},1]`)
	f.Fuzz(func(t *testing.T, filter, body string) {
		var spec any
		if json.Unmarshal([]byte(filter), &spec) != nil {
			return
		}
		fl, err := Compile(spec)
		if err != nil {
			return
		}
		fl.Match(&Input{Body: []byte(body), Header: http.Header{"X-A": {body}}, Query: url.Values{"q": {body}}, Path: body})
	})
}

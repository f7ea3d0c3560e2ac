package deliver

import (
	"errors"
	"strings"
	"testing"
)

// Each rule that cannot be read names its item; a status both lists
// hold at the same width is an error, not a guess.
func TestParseStatusRulesNamesTheItem(t *testing.T) {
	for _, c := range []struct {
		retry, final []string
		field, says  string
	}{
		{[]string{"5xx", "6xx"}, nil, "retry_on[1]", "100 to 599"},
		{nil, []string{"abc"}, "final_on[0]", "want a status"},
		{nil, []string{"503-500"}, "final_on[0]", "range"},
		{[]string{"2xx"}, nil, "retry_on[0]", "2xx is delivered"},
		{nil, []string{"199-201"}, "final_on[0]", "2xx is delivered"},
		{[]string{"503"}, []string{"503"}, "final_on", "503 is in retry_on too"},
		{[]string{"5xx"}, []string{"5xx"}, "final_on", "500 is in retry_on too"},
	} {
		_, err := ParseStatusRules(c.retry, c.final)
		var e *StatusRuleError
		if !errors.As(err, &e) || e.Field != c.field || !strings.Contains(err.Error(), c.says) {
			t.Errorf("retry_on %v final_on %v: %v, want %s: ...%s...", c.retry, c.final, err, c.field, c.says)
		}
	}
	if _, err := ParseStatusRules([]string{"429", "408"}, []string{"4xx", "500-502"}); err != nil {
		t.Fatal(err)
	}
}

// The narrowest rule decides; the default table holds elsewhere; a
// result without a status, delivered or released is left alone.
func TestStatusRulesApply(t *testing.T) {
	r, err := ParseStatusRules([]string{"429", "404"}, []string{"4xx", "500-502"})
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[int]ResultKind{
		400: Permanent, 404: Retry, 408: Permanent, 429: Retry, 500: Permanent, 502: Permanent, 503: Retry, 410: Permanent, 301: Permanent,
	} {
		res := ClassifyStatus(status, -1, "")
		r.Apply(&res)
		if res.Kind != want {
			t.Errorf("%d: %v, want %v (%s)", status, res.Kind, want, res.Error)
		}
	}
	res := ClassifyStatus(404, -1, "")
	r.Apply(&res)
	if res.Error != "retried by retry_on: HTTP 404" {
		t.Errorf("error = %q", res.Error)
	}
	for _, res := range []Result{{Kind: Retry, After: -1}, {Kind: Delivered, Status: 200}, {Kind: Released, Status: 500}} {
		before := res
		r.Apply(&res)
		if res != before {
			t.Errorf("%+v became %+v", before, res)
		}
	}
	var none *StatusRules
	res = ClassifyStatus(404, -1, "")
	none.Apply(&res)
	if res.Kind != Permanent {
		t.Errorf("nil rules changed the default table: %v", res.Kind)
	}
}

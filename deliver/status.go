package deliver

import (
	"fmt"
	"strconv"
	"strings"
)

// StatusRules are a destination's own answer to "is this status worth a
// retry?": retry_on and final_on, each a list of statuses (429), classes
// (5xx) or ranges (500-503), over the default table (2xx delivered; 3xx,
// 400, 401, 403, 404, 410 and 422 final; anything else retried). The
// narrowest rule that holds a status decides it: final_on: [4xx] with
// retry_on: [429] retries a 429 and ends every other 4xx. A 2xx is always
// delivered. The zero value (or nil) is the default table.
type StatusRules struct {
	rules []statusRule
}

type statusRule struct {
	lo, hi int
	final  bool
}

// Status codes a rule may name: the ones HTTP defines, but 2xx.
const minStatus, maxStatus = 100, 599

// ParseStatusRules reads retry_on and final_on. Its error names the list
// and the item at fault (retry_on[1]: "6xx": ...), and a status both lists
// hold at the same width (retry_on: [503], final_on: [503]).
func ParseStatusRules(retryOn, finalOn []string) (*StatusRules, error) {
	r := &StatusRules{}
	for _, l := range []struct {
		name  string
		items []string
		final bool
	}{{"retry_on", retryOn, false}, {"final_on", finalOn, true}} {
		for i, s := range l.items {
			lo, hi, err := parseStatusRange(s)
			if err != nil {
				return nil, &StatusRuleError{Field: fmt.Sprintf("%s[%d]", l.name, i), Err: fmt.Errorf("%q: %w", s, err)}
			}
			r.rules = append(r.rules, statusRule{lo: lo, hi: hi, final: l.final})
		}
	}
	for status := minStatus; status <= maxStatus; status++ {
		if _, ok, tie := r.decide(status); ok && tie {
			return nil, &StatusRuleError{Field: "final_on", Err: fmt.Errorf("%d is in retry_on too, at the same width: say which it is with a narrower rule", status)}
		}
	}
	return r, nil
}

// StatusRuleError is ParseStatusRules' error: the item at fault
// (retry_on[1]) and what is wrong with it.
type StatusRuleError struct {
	Field string
	Err   error
}

func (e *StatusRuleError) Error() string { return e.Field + ": " + e.Err.Error() }

// parseStatusRange reads 429, 5xx or 500-503.
func parseStatusRange(s string) (lo, hi int, err error) {
	s = strings.TrimSpace(s)
	switch {
	case len(s) == 3 && strings.HasSuffix(strings.ToLower(s), "xx"):
		d, err := strconv.Atoi(s[:1])
		if err != nil {
			return 0, 0, fmt.Errorf("want a status (429), a class (5xx) or a range (500-503)")
		}
		lo, hi = d*100, d*100+99
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		x, err1 := strconv.Atoi(strings.TrimSpace(a))
		y, err2 := strconv.Atoi(strings.TrimSpace(b))
		if err1 != nil || err2 != nil || x > y {
			return 0, 0, fmt.Errorf("want a range low-high (500-503)")
		}
		lo, hi = x, y
	default:
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, 0, fmt.Errorf("want a status (429), a class (5xx) or a range (500-503)")
		}
		lo, hi = n, n
	}
	if lo < minStatus || hi > maxStatus {
		return 0, 0, fmt.Errorf("want statuses from 100 to 599")
	}
	if lo <= 299 && hi >= 200 {
		return 0, 0, fmt.Errorf("a 2xx is delivered, never retried nor final")
	}
	return lo, hi, nil
}

// decide is the narrowest rule's verdict on status: ok when a rule holds
// it, tie when rules of both lists hold it at the same, narrowest, width.
func (r *StatusRules) decide(status int) (final, ok, tie bool) {
	width := -1
	for _, rule := range r.rules {
		if status < rule.lo || status > rule.hi {
			continue
		}
		w := rule.hi - rule.lo
		switch {
		case !ok || w < width:
			final, ok, tie, width = rule.final, true, false, w
		case w == width && rule.final != final:
			tie = true
		}
	}
	return final, ok, tie
}

// Apply reclassifies res, an answer with an HTTP status (a POST's, or a
// pull consumer's ack), by the rules: nothing else changes (a result
// without a status, a delivery, a shutdown's release). Retry-After stays
// what the answer said, where it said it (a 429, a 503).
func (r *StatusRules) Apply(res *Result) {
	if r == nil || len(r.rules) == 0 || res.Status == 0 || res.Kind == Delivered || res.Kind == Released {
		return
	}
	final, ok, _ := r.decide(res.Status)
	switch {
	case !ok:
	case final && res.Kind != Permanent:
		res.Kind = Permanent
		res.Error = withReason(res.Error, fmt.Sprintf("final by final_on: HTTP %d", res.Status), res.Status)
	case !final && res.Kind == Permanent:
		res.Kind = Retry
		res.Error = withReason(res.Error, fmt.Sprintf("retried by retry_on: HTTP %d", res.Status), res.Status)
	}
}

// withReason is why, with what the answer's error said beside it unless
// that was only the default table's word for the same status.
func withReason(prev, why string, status int) string {
	if prev == "" || prev == fmt.Sprintf("HTTP %d", status) || prev == fmt.Sprintf("permanent failure: HTTP %d", status) {
		return why
	}
	return why + ": " + prev
}

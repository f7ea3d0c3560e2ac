package objects_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

const (
	// bound is what the README states: a change taken through the API on
	// one replica is served by every other within it ("Every replica,
	// within seconds").
	bound = 5 * time.Second
	ops   = "ops-token-0123456789"
	// secretKeys is ONCEHOOK_SECRET_KEYS: one 32-byte key in base64.
	secretKeys = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
)

// client is every request's: short idle connections, many of them (the
// traffic, the probes and the changes go to three replicas at once).
var client = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 10 * time.Second},
}

// answer is an HTTP answer: status 0 and the error as body when there was
// none (a process killed, a port closed).
type answer struct {
	status int
	body   []byte
	json   map[string]any
}

// call sends an API request with the ops token.
func call(method, url, body string) answer {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ops)
	return roundTrip(req)
}

func roundTrip(req *http.Request) answer {
	resp, err := client.Do(req)
	if err != nil {
		return answer{body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, body: raw}
	json.Unmarshal(raw, &a.json)
	return a
}

// event is a Stripe event of id and amount; filters read the amount.
func event(id string, amount int) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":%d}}}`, id, amount)
}

// webhook sends event id (of amount) to source at intake, signed with
// secret as Stripe signs.
func webhook(t testing.TB, intake, source, secret, id string, amount int) answer {
	return roundTrip(testenv.SignedRequest(t, intake+"/in/"+source, "stripe", secret, event(id, amount), ""))
}

// delivered is, by event id, the destinations that answered its
// deliveries 200 (one entry a delivery): the sink's paths are
// /d/{destination}, its bodies the events.
func delivered(deliveries []testenv.Delivery) map[string][]string {
	out := map[string][]string{}
	for _, d := range deliveries {
		var e struct {
			ID string `json:"id"`
		}
		json.Unmarshal(d.Body, &e)
		out[e.ID] = append(out[e.ID], strings.TrimPrefix(d.Path, "/d/"))
	}
	for _, ds := range out {
		slices.Sort(ds)
	}
	return out
}

// p50 is the median of d.
func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(100 * time.Microsecond)
}

// top is d's largest.
func top(d []time.Duration) time.Duration { return slices.Max(d).Round(100 * time.Microsecond) }

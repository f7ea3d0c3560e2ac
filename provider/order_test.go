package provider

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestOrderRuleReadsEntityAndVersion(t *testing.T) {
	d := Describe(&shopify{}).Order
	if d.Entity == "" {
		t.Fatal("shopify has a default order")
	}
	r, err := ParseOrderRule(d.Entity, d.Version, string(d.Unit), 0)
	if err != nil {
		t.Fatal(err)
	}
	newer, ok1 := r.Read(nil, []byte(`{"id":820982911946154508,"updated_at":"2024-01-01T10:00:00-05:00"}`), testNow)
	older, ok2 := r.Read(nil, []byte(`{"id":820982911946154508,"updated_at":"2024-01-01T14:59:59Z"}`), testNow)
	if !ok1 || !ok2 || newer.Entity != "820982911946154508" || older.Version >= newer.Version {
		t.Fatalf("newer %+v %v, older %+v %v: offsets compare by instant", newer, ok1, older, ok2)
	}
	if newer.VersionText != "2024-01-01T10:00:00-05:00" {
		t.Fatalf("version text %q: want it as the provider wrote it", newer.VersionText)
	}
	for _, body := range []string{`{"updated_at":"2024-01-01T10:00:00Z"}`, `{"id":1}`, `{"id":1,"updated_at":"yesterday"}`, `not json`} {
		if p, ok := r.Read(nil, []byte(body), testNow); ok {
			t.Errorf("%s: read %+v, want no place (delivered outside the order)", body, p)
		}
	}
	arrival, err := ParseOrderRule("header:X-Entity", Arrival, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := arrival.Read(http.Header{"X-Entity": {"cus_1"}}, nil, testNow)
	if !ok || p.Entity != "cus_1" || p.Versioned {
		t.Fatalf("arrival rule read %+v %v", p, ok)
	}
	if _, err := ParseOrderRule("id", "", "", 0); err == nil {
		t.Fatal("an entity rule without its kind was accepted")
	}
	if Describe(&github{}).Order.Entity != "" {
		t.Fatal("github names its entity per event kind: no default")
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]int64{"1700000000": 1700000000, "-3": -3, "1970-01-01T00:00:01Z": 1e9, "1970-01-01T00:00:00.5Z": 5e8} {
		if got, ok := ParseVersion(in); !ok || got != want {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	// Times whose nanoseconds do not fit in 64 bits wrapped to a negative
	// version (stale on arrival); they are no version now.
	for _, in := range []string{"", "1.5", "v2", "2024-01-01", "2263-01-01T00:00:00Z", "2262-04-11T23:47:17Z", "9999-12-31T23:59:59Z", "1677-09-21T00:12:43Z", "0001-01-01T00:00:00Z"} {
		if _, ok := ParseVersion(in); ok {
			t.Errorf("ParseVersion(%q) accepted", in)
		}
	}
}

var testNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// A version that names a time past the arrival by more than the bound goes
// outside the order, whatever the unit says and however far ahead, from a
// second past the bound to the end of int64; within it, the event keeps
// its place.
func TestOrderRuleRefusesVersionsAhead(t *testing.T) {
	for _, maxAhead := range []time.Duration{time.Second, time.Minute, DefaultMaxAhead, 24 * time.Hour} {
		for _, unit := range []VersionUnit{UnixSeconds, UnixMillis, Sequence} {
			r, err := ParseOrderRule("json:id", "json:v", string(unit), maxAhead)
			if err != nil {
				t.Fatal(err)
			}
			at := func(d time.Duration) string {
				switch unit {
				case UnixMillis:
					return strconv.FormatInt(testNow.Add(d).UnixMilli(), 10)
				case UnixSeconds:
					return strconv.FormatInt(testNow.Add(d).Unix(), 10)
				}
				return testNow.Add(d).Format(time.RFC3339Nano) // sequence: only RFC 3339 names a time
			}
			cases := []struct {
				v     string
				place bool
			}{
				{at(-30 * 24 * time.Hour), true},
				{at(0), true},
				{at(maxAhead), true},
				{at(maxAhead + 2*time.Second), false},
				{at(365 * 24 * time.Hour), false},
				{"2262-01-01T00:00:00Z", false},
			}
			if unit != Sequence {
				cases = append(cases, struct {
					v     string
					place bool
				}{"9000000000000000000", false}, struct {
					v     string
					place bool
				}{"9223372036854775807", false})
			}
			for _, c := range cases {
				body := fmt.Sprintf(`{"id":"e1","v":%q}`, c.v)
				if _, ok := r.Read(nil, []byte(body), testNow); ok != c.place {
					t.Errorf("unit %q, max_ahead %s, version %s: placed %v, want %v", unit, maxAhead, c.v, ok, c.place)
				}
			}
		}
	}
	// A counter names no time: any value keeps its place.
	r, _ := ParseOrderRule("json:id", "json:v", "sequence", time.Second)
	if _, ok := r.Read(nil, []byte(`{"id":"e1","v":"9000000000000000000"}`), testNow); !ok {
		t.Error("a sequence version was bounded as if it were a time")
	}
	if _, err := ParseOrderRule("json:id", "json:v", "seconds", 0); err == nil {
		t.Error("an unknown version_unit was accepted")
	}
	if Describe(&stripe{}).Order.Unit != UnixSeconds {
		t.Error("stripe's created is Unix seconds")
	}
}

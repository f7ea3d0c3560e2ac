package provider

import (
	"net/http"
	"testing"
)

func TestOrderRuleReadsEntityAndVersion(t *testing.T) {
	entity, version, ok := DefaultOrder("shopify")
	if !ok {
		t.Fatal("shopify has a default order")
	}
	r, err := ParseOrderRule(entity, version)
	if err != nil {
		t.Fatal(err)
	}
	newer, ok1 := r.Read(nil, []byte(`{"id":820982911946154508,"updated_at":"2024-01-01T10:00:00-05:00"}`))
	older, ok2 := r.Read(nil, []byte(`{"id":820982911946154508,"updated_at":"2024-01-01T14:59:59Z"}`))
	if !ok1 || !ok2 || newer.Entity != "820982911946154508" || older.Version >= newer.Version {
		t.Fatalf("newer %+v %v, older %+v %v: offsets compare by instant", newer, ok1, older, ok2)
	}
	if newer.VersionText != "2024-01-01T10:00:00-05:00" {
		t.Fatalf("version text %q: want it as the provider wrote it", newer.VersionText)
	}
	for _, body := range []string{`{"updated_at":"2024-01-01T10:00:00Z"}`, `{"id":1}`, `{"id":1,"updated_at":"yesterday"}`, `not json`} {
		if p, ok := r.Read(nil, []byte(body)); ok {
			t.Errorf("%s: read %+v, want no place (delivered outside the order)", body, p)
		}
	}
	arrival, err := ParseOrderRule("header:X-Entity", Arrival)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := arrival.Read(http.Header{"X-Entity": {"cus_1"}}, nil)
	if !ok || p.Entity != "cus_1" || p.Versioned {
		t.Fatalf("arrival rule read %+v %v", p, ok)
	}
	if _, err := ParseOrderRule("id", ""); err == nil {
		t.Fatal("an entity rule without its kind was accepted")
	}
	if _, _, ok := DefaultOrder("github"); ok {
		t.Fatal("github names its entity per event kind: no default")
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]int64{"1700000000": 1700000000, "-3": -3, "1970-01-01T00:00:01Z": 1e9, "1970-01-01T00:00:00.5Z": 5e8} {
		if got, ok := ParseVersion(in); !ok || got != want {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "1.5", "v2", "2024-01-01"} {
		if _, ok := ParseVersion(in); ok {
			t.Errorf("ParseVersion(%q) accepted", in)
		}
	}
}

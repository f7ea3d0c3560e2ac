package duration

import (
	"testing"
	"time"
)

func TestParseTakesDaysAndRefusesOverflow(t *testing.T) {
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "0d5m": 5 * time.Minute} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "-1d", "7x", "99999d", "1d99999999h"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) took it", in)
		}
	}
	if _, err := Seconds(1e300); err == nil {
		t.Error("Seconds(1e300) took it")
	}
	if d, err := Seconds(5); err != nil || d != 5*time.Second {
		t.Errorf("Seconds(5) = %v, %v", d, err)
	}
}

package receive_test

import (
	"testing"

	"github.com/oncehook/oncehook/receive"
)

func TestLimitsDefaultsAndRefusals(t *testing.T) {
	for _, c := range []struct {
		body, inflight, wantBody, wantInflight int64
		refused                                bool
	}{
		{0, 0, 5 << 20, 64 << 20, false},
		{100 << 20, 0, 100 << 20, 100 << 20, false}, // the budget never below one body
		{1 << 20, 2 << 20, 1 << 20, 2 << 20, false},
		{0, 1 << 20, 5 << 20, 1 << 20, true},
	} {
		b, i, err := receive.Limits(c.body, c.inflight)
		if b != c.wantBody || i != c.wantInflight || (err != nil) != c.refused {
			t.Errorf("Limits(%d, %d) = %d, %d, %v", c.body, c.inflight, b, i, err)
		}
	}
}

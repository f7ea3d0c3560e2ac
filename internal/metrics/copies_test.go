package metrics

import (
	"fmt"
	"testing"
	"time"
)

// Copies add up per event, keep the latest time, survive a failed commit
// (Restore), and stay bounded in memory.
func TestCopiesAddUpAndStayBounded(t *testing.T) {
	c := NewCopies()
	t0 := time.Unix(1700000000, 0)
	c.Add("s", "k", t0.Add(time.Second))
	c.Add("s", "k", t0)
	got := c.Take()
	if len(got) != 1 || got[0].N != 2 || !got[0].Last.Equal(t0.Add(time.Second)) {
		t.Fatalf("%+v", got)
	}
	if again := c.Take(); again != nil {
		t.Fatalf("a second Take: %+v", again)
	}
	c.Restore(got)
	c.Add("s", "k", t0)
	if got := c.Take(); got[0].N != 3 {
		t.Fatalf("after Restore: %+v", got)
	}
	for i := range MaxCopyKeys + 10 {
		c.Add("s", fmt.Sprint(i), t0)
	}
	if got := c.Take(); len(got) != MaxCopyKeys {
		t.Fatalf("%d keys held, want at most %d", len(got), MaxCopyKeys)
	}
	var nilCopies *Copies
	nilCopies.Add("s", "k", t0) // off: no panic
}

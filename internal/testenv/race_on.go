//go:build race

package testenv

// Race says whether this test binary was built with the race detector,
// which slows the gateway several times over: pacing tests assert that a
// backlog keeps moving rather than its full rate, and the slow sweeps
// (hostile bytes, large backlogs) run once without it (.ci/run).
const Race = true

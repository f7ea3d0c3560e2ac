//go:build race

package oncehook_test

// raceDetector: the race detector slows the gateway several times over, so
// pacing tests assert that a backlog keeps moving, not its full rate.
const raceDetector = true

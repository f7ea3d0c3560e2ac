//go:build !race

package oncehook_test

const raceDetector = false

//go:build !race

package testenv

// Race: see race_on.go.
const Race = false

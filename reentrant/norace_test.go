//go:build !race

package reentrant_test

const raceEnabled = false

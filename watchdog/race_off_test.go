//go:build !race

package watchdog_test

// raceDetector reports whether the race detector is on.
const raceDetector = false

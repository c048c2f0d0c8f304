//go:build !race

package renewal_test

// raceDetector reports whether the race detector is on.
const raceDetector = false

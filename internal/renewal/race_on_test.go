//go:build race

package renewal_test

// raceDetector reports whether the race detector is on: it makes go-redis
// encode and decode about ten times slower, too slow for 100,000 renewals
// a second on a small machine.
const raceDetector = true

//go:build race

package reentrant_test

// raceEnabled: the race detector slows scripts several-fold; scale tests
// run smaller under it.
const raceEnabled = true

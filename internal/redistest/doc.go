// Package redistest holds the helpers that the tests of this module share:
// throw-away Redis servers (an embedded miniredis and real redis-server
// processes, also as a Redis Cluster, a master with a replica, or a master,
// a replica and three sentinels), a fault-injecting TCP proxy, a re-executed child test process
// for "the holder crashed" scenarios, and small inspection helpers.
//
// It is an ordinary package, not a _test.go file, so that the tests of every
// other package can import it. Nothing in it is meant for production code.
//
// Every resource a helper creates is released in a t.Cleanup registered by
// that helper, and every goroutine it starts has returned once the cleanups
// have run, so tests may call goleak.VerifyNone from a cleanup registered
// before any helper is used.
//
// The helpers never connect to, or otherwise touch, a Redis server they did
// not start themselves.
package redistest

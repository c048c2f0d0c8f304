// Package faults holds only tests: fault-injection runs of the reentrant
// lock against real redis-server processes (and miniredis where the fault
// applies), with at least eight clients each, whose recorded histories are
// checked by internal/history (linearizability against a reentrant mutex
// model, no two owners believing they hold the lock at once) instead of
// being eyeballed.
//
// Faults: a holder process killed with SIGKILL, the server frozen with
// SIGSTOP past the lease, the server killed and restarted, the pub/sub
// connection killed (CLIENT KILL TYPE pubsub), fair-lock holder processes
// killed or paused (SIGSTOP) past their lease while the queue is long (the
// time to the next grant checked against the lease), and, through the test
// harness's TCP proxy, latency, a black hole, connection resets and replies
// lost after their command ran; on a Redis Cluster, the lock's slot
// migrated between masters under load (a redirect must never reach a
// caller).
//
// Each worker acts as a careful user: it repeats a call whose outcome was
// unknown (a timeout, a reset, a lost reply) until it gets an answer, and
// the library promises that the repeat and the attempts before it take
// effect once, so they are recorded as one call; this is what checks that
// hold counts stay exact. It keeps the Done channel of each holding period
// and stops working as soon as it closes.
//
// Every run is short enough for CI. Set RLOCK_SOAK=1 for longer runs (more
// rounds per client); each test logs the number of acquisitions checked
// and violations found, and TestMain prints the table that the README's
// "Safety model" section quotes.
package faults

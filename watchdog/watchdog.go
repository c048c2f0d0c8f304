// Package watchdog renews the leases of held locks: one scheduler per
// client, whatever the number of locks it holds.
//
// A lock taken without an explicit lease gets the watchdog lease (30 s by
// default) and is registered with the scheduler. Every interval (lease/3 by
// default: a tick) the scheduler renews every registered lock.
//
// # One round trip per node per tick, nodes concurrently
//
// A tick groups the registered locks by the server that holds them: the
// master of each key's hash slot on a *redis.ClusterClient (MasterForKey),
// the shard of each key on a *redis.Ring, the one server otherwise. Each
// node's locks go out in one pipeline on that node's own client: script
// calls of up to 100 keys each (rlock.WithWatchdogBatchSize; one hash slot per call on a
// cluster, as Redis requires), written at once and answered in one round
// trip. The nodes are renewed concurrently, one goroutine per node with a
// round in flight, so a slow or frozen node delays no other node's
// renewals.
//
// The scheduler waits for a node's round for one interval. A round not
// answered by then counts as timed out: its outcome is unknown, so its
// locks count as failed and are retried (and a late reply is still used).
// No second round is ever sent to a node while one is in flight, so
// nothing piles up behind a frozen node (go-redis does not apply a context
// deadline to a read unless ContextTimeoutEnabled is set, so a frozen node
// holds a round for its ReadTimeout, times its retries). A tick that comes
// due while a node's round is in flight is not skipped: that node's next
// round starts the moment the previous one ends, so a slow node is renewed
// as often as it can answer, not every other interval.
//
// Scripts in a pipeline have no NOSCRIPT fallback of their own: the first
// call of the first pipeline to a node (or after a round it did not
// answer) is an EVAL, which caches the script for the EVALSHAs behind it,
// so a new or promoted node costs no extra round trip; the calls a server
// answers NOSCRIPT (restarted, SCRIPT FLUSH) are sent again in a second
// pipeline, the first of them as EVAL. On a cluster, a call answered MOVED or ASK
// (a slot that moved) is sent again through the ClusterClient, which
// follows the redirection, and any failure or timeout makes the
// ClusterClient reload its slot map, so renewal follows a failover within
// the retry interval. A client that cannot pipeline (any other
// redis.Scripter) gets one Script.Run call per batch.
//
// The scheduler's own work per tick grows with the locks it renews, not with
// its wake-ups: a renewed lock is moved, in O(1), to the cohort of locks
// whose lease the same round extended; cohorts sit in a heap by when they
// run out, and the timer wakes only for the next tick, a retry, a round's
// bound, or the first cohort to run out, never to scan every lock. The
// scheduler's goroutines exist only while something is registered or a
// round is in flight.
//
// A lock still held at the first tick after it was registered is handed
// to the watch: buckets of locks by when their lease runs out (to the
// millisecond), in a heap, with one runtime timer for the first bucket. A
// renewal only moves the lease on; when a bucket comes due, a lock whose
// lease moved on meanwhile joins the bucket of its new end (one O(1) move
// per lease period, not an operation per renewal), and the others are
// reported lost. A lock released within one interval never gets there;
// until its first tick a lock is watched by its cohort.
//
// # Loss
//
// Loss is reported, never swallowed, with its cause. A lock found not held
// at renewal (expired, force-unlocked, Redis restarted or failed over) is
// reported to its holder at once ("no longer held by this owner at
// renewal"). A renewal that fails (an error, or no reply within the
// interval) is retried every retry interval until the lease has certainly
// run out, counted from the moment the last successful renewal was sent;
// then the lock is reported lost even if a renewal is still in flight
// ("ran out while renewal failed: " and the last error). A lease that runs
// out before any renewal could reach its node (added while the node's
// round was stuck) says so ("ran out before a renewal could reach" the
// node). Every report wraps rlock.ErrLockLost.
//
// # How soon a holder learns that its lease ran out
//
// Until is the watchdog lease counted from the last renewal sent that
// succeeded; it never moves once it has passed (a renewal answered after
// that does not revive the lock), and from that moment:
//
//   - Err reports the loss at once: it compares the clock with Until, so
//     Err is non-nil whenever time.Now() is past Until, whatever reports
//     the loss and however busy the client is;
//   - Done closes and Ctx is cancelled by the watch, not one after
//     another on the scheduler's loop: the locks whose leases run out
//     together are shared out among goroutines of 256 locks each, so the
//     first is told within the timer's latency (well under a millisecond
//     on an idle process) and the last after the CPU time of the reports
//     before it (several µs each, spread over the cores). No bound can be
//     constant: n reports cost n times that CPU time, and a starved
//     process gives them only a share of its CPU. Measured on a shared,
//     loaded 2-core machine (load average 3-8), with 8 goroutines
//     keeping the process busy: 20,000 locks running out at once were all
//     told within 0.15-0.17 s (0.32-0.46 s when each lock had a timer and
//     a goroutine of its own), 100,000 within 0.50-0.58 s (0.46-0.65 s:
//     no better there, the CPU time of the reports). A lock whose
//     lease runs out before its first tick (the loop itself starved for
//     more than lease - interval) is reported by the loop.
//
// A holder that must not act past its lease checks Err or Until before
// acting rather than relying on Done alone.
package watchdog

import "time"

// Defaults of the client options that configure the watchdog
// (rlock.WithWatchdogLease, rlock.WithWatchdogInterval,
// rlock.WithWatchdogBatchSize).
const (
	// DefaultLease is the lease a watchdog-mode hold gets and every
	// renewal sets again: Redisson's lockWatchdogTimeout.
	DefaultLease = 30 * time.Second
	// DefaultBatchSize is how many locks one renewal script call carries.
	DefaultBatchSize = 100
)

// The default interval between two renewals of a lock is a third of the
// watchdog lease: 10 s with DefaultLease.

// Stats counts what a client's watchdog has done (rlock.Client.WatchdogStats).
type Stats struct {
	Registered int    // locks registered now
	Rounds     uint64 // renewal rounds dispatched (ticks and retries)
	RoundTrips uint64 // renewal requests: one pipeline per node per round, plus fallbacks (NOSCRIPT, redirects), or one per batch where the client cannot pipeline
	Renewed    uint64 // leases renewed
	Lost       uint64 // losses reported
	Errors     uint64 // node rounds that failed with an error
	Timeouts   uint64 // node rounds not answered within the interval (retried; their reply is still used if it comes before the lease runs out)

	// Late counts node rounds of a tick that had to wait for that node's
	// previous round to end; they start the moment it does.
	Late uint64
	// Ticks, TickTime and MaxTickTime measure the ticks whose every node
	// round has ended: how many, their total and their longest duration,
	// from the tick to the last node's reply.
	Ticks       uint64
	TickTime    time.Duration
	MaxTickTime time.Duration
}

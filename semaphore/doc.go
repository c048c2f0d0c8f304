// Package semaphore holds Redisson's semaphores for Go, shared by every
// process (Go or Java) that names them, built on the same rlock.Client as
// the locks and sharing its pub/sub hub and watchdog: Semaphore
// (Redisson's RSemaphore, a counter whose permits have no owner) and
// Expirable (Redisson's RPermitExpirableSemaphore, whose permits have IDs
// and leases; see the Expirable section below and docs/semaphores.md).
//
//	s, err := semaphore.New(client, "partner-api") // a cheap handle; no I/O
//	...
//	if _, err := s.TrySetPermits(ctx, 5); err != nil { // once, by anyone
//		return err
//	}
//	if err := s.Acquire(ctx, 1); err != nil {
//		return err
//	}
//	defer s.Release(context.WithoutCancel(ctx), 1)
//
// # Layout
//
// The key named by the semaphore holds the available permits as a decimal
// integer (a missing key is 0), and every release publishes the new count
// on "redisson_sc:{name}" ("redisson_sc:name" for a name with a hash tag),
// with PUBLISH, or SPUBLISH when the client uses sharded pub/sub, exactly
// as Redisson does: Redisson's RSemaphore and this package share one
// semaphore by name. rlock adds one key of its own, "{name}:rlock_ops"
// ("name:rlock_ops" with a hash tag), in the same hash slot: a sorted set
// of the IDs of recent operations, each kept for the client's replay
// window (rlock.WithReplayWindow) and trimmed by every write (to at most
// the newest 10000).
//
// # Safety model
//
// Permits have no owner, as in Redisson and in the JDK: Release adds
// permits whoever calls it, and a holder that crashes without releasing
// leaks its permits for good. What rlock adds is exactly-once calls:
//
//   - Each acquire, release and permit change carries an operation ID
//     recorded by its script. A copy of the call that go-redis re-sends
//     after a lost reply finds its ID and changes nothing again: an
//     acquire never takes twice, a release never returns twice (Redisson's
//     does, issue #5066).
//   - An acquire whose reply never came back is settled at once: the
//     permits it may have taken are given back, and no later copy of it
//     can take any. An acquire granted after its ctx ended gives its
//     permits back too.
//   - No wait depends on a message: a waiter tries again when a release
//     wakes it, when its subscription is confirmed (so a release between
//     its first try and its SUBSCRIBE is never missed), and at least every
//     poll interval (WithPoll, 1 s by default).
//   - No herd across clients: a waiter's refused attempt registers its
//     client ("{name}:rlock_waiters"), and a release of k permits
//     designates about k registered clients before its count; the other
//     clients' waiters stay asleep (a designated client with no waiter
//     left publishes the count again for everyone). A count without
//     designations (Redisson's) wakes as many of each client's waiters as
//     it counts permits; a waiter granted with permits left over wakes the
//     next one. A wasted designation costs a waiter at most one poll. The
//     expirable semaphore's waiters are designated the same way, by its
//     releases, give-backs and reclaims of expired permits (see Expirable
//     below).
//
// Every call's keys share one hash slot, so the scripts run unchanged on
// Redis Cluster.
//
// # Replica sync
//
// Acquisitions and drains share the client's replica sync with the locks
// (rlock.WithReplicaSync, on by default for a *redis.Client or a
// *redis.ClusterClient): the script and WAIT go in one pipeline on the
// semaphore's master, and when the master has a connected replica and
// none acknowledged the grant within the timeout (or WAIT failed after
// the script ran), a failover could lose it and hand the permits out
// again, so the grant is undone: the permits are given back exactly once
// (under the acquire's operation ID, or each permit's ID), TryAcquire and
// DrainPermits return an error wrapping rlock.ErrNotReplicated and the
// caller holds nothing, and a waiting Acquire logs a warning, pauses and
// tries again within its ctx, as a waiting Lock does. Releases, permit
// changes and lease updates are not waited for, as a lock's unlock is not:
// a failover that loses one leaves fewer permits available, never more
// holders than permits.
//
// # Expirable
//
// An Expirable's counter holds the available permits, and
// "{name}:timeout" the held ones: their raw 16-byte IDs (32 lowercase hex
// characters to callers) scored by their expiry in epoch ms, Redisson's
// NoLeaseScore for Redisson's permits without a lease. Every script first
// returns expired permits to the pool. Acquire returns a *Permit. One
// taken with WithLease expires then unless released or its lease set
// again; one taken without gets the client's watchdog lease and is
// renewed with the client's locks, so a crashed holder's permit returns
// within a watchdog lease. A permit's handle reports its loss (Done, Err
// wrapping rlock.ErrLockLost, Ctx), and Until says how long it is known
// to be held. Waiters wake on releases and at least every poll interval;
// a lease that passes reaches them through one rlock client: the one that
// watches the nearest expiry ("{name}:rlock_watch", claimed by a refused
// waiting acquire, handed on by a grant or a shorter lease while rlock
// clients wait) reclaims the permit then and designates waiters for it,
// so a lapse wakes about as many waiters as it frees permits rather than
// every waiter of every client. A watching client that is gone costs the
// waiters at most a poll (their own attempts reclaim expired permits).
package semaphore

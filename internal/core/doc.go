// Package core is the lock engine behind the public lock packages
// (reentrant, fair): the client, the lock handle engine and the flow every
// lock kind shares. Packages reentrant and fair are thin, documented
// wrappers around it; they reach the engine behind an *rlock.Client
// through Of, so every lock kind of a process shares one client, one
// pub/sub connection and one watchdog.
//
// # Vocabulary
//
//   - A hold is one count of an owner's re-entrant acquisitions; the lock
//     hash stores each owner field's hold count.
//   - ownerState (owner.go) is the client's bookkeeping of one owner on one
//     lock: its hold count, what protects its holds (the watchdog or an
//     explicit lease), and a semaphore that serialises the owner's calls on
//     that lock, so that the scripts can tell a re-sent request from a new
//     one.
//   - A holding (holding.go) is one holding period of one owner: from the
//     grant that takes it from no holds to some, to its last release or the
//     loss of its holds. Its ctx is the holding: cancelled when it ends,
//     with a cause wrapping ErrLockLost on loss. Lock.Done, Err, Ctx, Until
//     and Token, and a combinator's Grant (grant.go), all read a holding.
//
// # Files
//
//   - client.go: Client, its configuration, and how it runs a script (a
//     cluster's retries, replica sync).
//   - kind.go: everything that sets one lock kind apart (see below).
//   - lock.go: Lock, the handle engine, and its Lock and TryLock entries.
//   - wait.go: a blocking Lock call: join the kind's channel, sleep,
//     retry; the failures it outlives.
//   - attempt.go: one acquire attempt, from sending the script to keeping
//     or giving back the grant, with its named outcomes.
//   - release.go: Unlock, settling a call whose outcome is unknown, and
//     ForceUnlock.
//   - lease.go: SetLease, and what protects a holding (watchdog, lease).
//   - owner.go, holding.go: the bookkeeping above.
//   - trace.go: the events reported to hooks (rlock.Trace): a Lock call's
//     end, waiting, a holding's end (logged too, when a loss); each emitted
//     by one call at its place in the flow.
//   - query.go: IsLocked, HoldCount, TTL, Queue and the handle's view of
//     its holding; rwstate.go: a read-write lock's state and its
//     force-unlock in any mode.
//
// # Lock kinds
//
// The engine's flow is the same for every kind: an attempt sends the
// kind's acquire script and reads one of three replies (a grant, a
// refusal with the time to wait, or a re-entry that found the holds gone;
// see parseAcquireReply); a release reads one of three (see
// parseReleaseReply); a blocked call waits on a pub/sub channel and
// retries. Everything else is asked of the kind (the kind interface):
// its keys and scripts for acquire, release, force-unlock and renewal,
// and its waitPlan: which channel a blocked call listens on, whether its
// attempts queue the owner (and so how often it must retry to keep its
// place), whether a new call waits behind the client's other waiters, and
// what leaving means when the owner's last waiting call gives up.
//
//   - reentrantKind: one channel per lock, a release publishes on it.
//     A waiting call's attempts register its client in the lock's waiter
//     registry (waitPlan.registers), and the last release designates up to
//     two registered clients to wake a waiter (scripts/designate.lua), so a
//     release costs about one attempt however many clients wait (the
//     second client's waiter tries only if the first did not act:
//     coverFirst); the registration lapses by itself, so leaving is
//     nothing (the hub unregisters a client when it drops the channel, and
//     passes on a designation it cannot use: Client.passOn).
//   - fairKind: attempts queue the owner and renew its place within the
//     queue timeout; each owner listens on its own channel; leaving takes
//     the owner out of the queue. It also answers Queue (the lined
//     interface).
//   - readKind and writeKind (kind.go, rwstate.go): the two sides of a
//     read-write lock (Redisson's RReadWriteLock: one hash with a "mode"
//     field, reader fields "<owner>" and the writer's "<owner>:write", one
//     timeout key per read hold, one channel "redisson_rwlock:{name}").
//     The kind's field method maps an owner to the hash field its holds
//     count in, so an owner's read and write holds have separate
//     ownerStates, each with its own hold count, holding and settling.
//     Readers wait on the shared channel without waiting behind each
//     other; a blocking writer's attempts register it as a waiting writer
//     (which keeps new readers out) and renew its entry every third of the
//     writer-wait timeout; leaving takes it out (rw_leave.lua); the last
//     reader's release wakes a writer first (waitPlan.prefer). A writer
//     whose owner reads is refused for good ({-2, 0}: ErrUpgrade). The
//     read kind counts a reader's holds only while a timeout key lives
//     (counted), and both sides answer IsLocked from one consistent view
//     (rwSide, RWState). Renewal needs nothing of its own: renew.lua tells
//     a read-write hash by its mode and renews a reader's timeout keys.
//
// Beyond recognising the upgrade refusal, nothing in attempt, wait or
// release is kind-specific.
package core

var unwrap func(any) (*Client, bool)

// Register is called once, by package rlock's init, with the function
// that returns the engine behind an *rlock.Client.
func Register(f func(any) (*Client, bool)) { unwrap = f }

// Of returns the engine behind v, an *rlock.Client, and whether v was one
// (a nil client is not).
func Of(v any) (*Client, bool) {
	if unwrap == nil {
		return nil, false
	}
	return unwrap(v)
}
